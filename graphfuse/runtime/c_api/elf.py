"""Reading one named section of an ELF shared library (64-bit, little-endian: x86-64 and
AArch64 Linux), without loading it: its section headers and their name table only, a few
kilobytes of a library that may hold hundreds of megabytes of weights.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_MAGIC = b"\x7fELF\x02\x01"
"""ELF, 64-bit, little-endian."""
_NO_BITS = 8
"""SHT_NOBITS: a section with no bytes in the file."""


def read_section(path: Path, name: str) -> bytes | None:
    """The bytes of section `name` of the ELF file `path`; None when the file is no
    64-bit little-endian ELF or has no such section (OSError when it cannot be read)."""
    with open(path, "rb") as stream:
        header = stream.read(_HEADER.size)
        if len(header) < _HEADER.size or not header.startswith(_MAGIC):
            return None
        fields = _HEADER.unpack(header)
        shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
        if shoff == 0 or shentsize != _SECTION.size:
            return None
        first = _section(stream, shoff, 0)
        if shnum == 0:  # more sections than the header field holds (ELF's extended count)
            shnum = first[5]
        if shstrndx == 0xFFFF:
            shstrndx = first[6]
        sections = [_section(stream, shoff, i) for i in range(shnum)]
        names = sections[shstrndx]
        table = _read(stream, names[4], names[5])
        wanted = name.encode()
        for section in sections:
            start = section[0]
            if table[start : start + len(wanted) + 1] == wanted + b"\0":
                return None if section[1] == _NO_BITS else _read(stream, section[4], section[5])
    return None


def _section(stream: BinaryIO, shoff: int, index: int) -> tuple[int, ...]:
    return _SECTION.unpack(_read(stream, shoff + index * _SECTION.size, _SECTION.size))


def _read(stream: BinaryIO, offset: int, size: int) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise OSError(f"{stream.name}: truncated ELF file")
    return data
