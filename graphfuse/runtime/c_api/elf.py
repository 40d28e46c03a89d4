"""Reading the sections of an ELF shared library (64-bit, little-endian: x86-64 and AArch64
Linux) without loading it: its section headers and their name table, a few kilobytes of a
library that may hold hundreds of megabytes of weights.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_MAGIC = b"\x7fELF\x02\x01"
"""ELF, 64-bit, little-endian."""
NO_BITS = 8
"""SHT_NOBITS: a section with no bytes in the file."""


@dataclass(frozen=True)
class Section:
    """One section header: what rename.py and read_section need of it."""

    name: str
    type: int
    offset: int
    size: int
    link: int
    """The index of the section it refers to (a symbol table's strings)."""
    entry_size: int


def sections(stream: BinaryIO) -> list[Section] | None:
    """The section headers of the ELF file open as `stream`, in index order; None when it
    is no 64-bit little-endian ELF (OSError when it is cut short)."""
    stream.seek(0)
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
    raw = [_section(stream, shoff, i) for i in range(shnum)]
    names = raw[shstrndx]
    table = read_at(stream, names[4], names[5])
    return [
        Section(table[s[0] : table.index(b"\0", s[0])].decode(), s[1], s[4], s[5], s[6], s[9])
        for s in raw
    ]


def read_section(path: Path, name: str) -> bytes | None:
    """The bytes of section `name` of the ELF file `path`; None when the file is no
    64-bit little-endian ELF or has no such section (OSError when it cannot be read)."""
    with open(path, "rb") as stream:
        found = sections(stream)
        for section in found or ():
            if section.name == name:
                if section.type == NO_BITS:
                    return None
                return read_at(stream, section.offset, section.size)
    return None


def _section(stream: BinaryIO, shoff: int, index: int) -> tuple[int, ...]:
    return _SECTION.unpack(read_at(stream, shoff + index * _SECTION.size, _SECTION.size))


def read_at(stream: BinaryIO, offset: int, size: int) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise OSError(f"{stream.name}: truncated ELF file")
    return data
