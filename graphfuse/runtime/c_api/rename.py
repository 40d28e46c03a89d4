"""Giving a finished library the symbol prefix of another file name, in place.

A library's exported symbols carry a prefix from its file name (naming.py), so the same
model compiled to `a.so` and to `b.so` differs only in its symbol names and in the
description its C layer carries. Relinking for each name would cost as much as the first
link (hundreds of megabytes of weights); instead a copy of the cached library is renamed
where it lies, in a few kilobytes:

- each exported name in the dynamic string table is overwritten with the new one and
  padded with NULs, and so is its copy in the static symbol table's strings;
- the SysV hash table (`.hash`) is rebuilt for the new names (libraries written out are
  linked with `--hash-style=sysv`: the GNU hash table orders symbols by hash, which a
  rename would change);
- the description section is rewritten, NUL-padded to its size.

The room for a name is its string's slot: the name and the NULs after it. A library is
first linked with PLACEHOLDER_PREFIX, longer than any prefix a file name gives, and renamed
to its own prefix, so every library graphfuse writes keeps room for any other. A string
that another reference shares (a linker may point a shorter name into a longer one's tail)
is never changed: RenameError instead, and the caller links afresh.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from graphfuse.runtime.c_api.describe import CLibrary, library_symbols
from graphfuse.runtime.c_api.elf import Section, read_at, sections
from graphfuse.runtime.c_api.naming import DESCRIPTION_SECTION
from graphfuse.toolchain import ToolchainError

SYSV_HASH_STYLE = "-Wl,--hash-style=sysv"
"""The linker flag that makes the hash table one rename can rebuild in place."""

_SYMBOL = struct.Struct("<IBBHQQ")
_DYNAMIC = struct.Struct("<qQ")
_STRTAB, _HASH, _DYNAMIC_TYPE, _DYNSYM, _SYMTAB = 3, 5, 6, 11, 2
_GNU_HASH, _VERNEED, _VERDEF = 0x6FFFFFF6, 0x6FFFFFFE, 0x6FFFFFFD
_NAMED_TAGS = (1, 14, 15, 29)
"""DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH: dynamic entries that are string offsets."""


class RenameError(ToolchainError):
    """A library whose names cannot be changed in place (the caller links it afresh)."""


def rename_library(path: Path, library: CLibrary, prefix: str, name: str) -> CLibrary:
    """Give the library at `path`, described by `library`, the symbol prefix `prefix` and
    the file name `name`; returns its new description. The file is changed in place, so
    it must be a copy of its own (never a hard link into the cache)."""
    renamed = library.renamed(prefix, name)
    old, new = library_symbols(library), library_symbols(renamed)
    names = {a.encode(): b.encode() for a, b in zip(old, new, strict=True)}
    with open(path, "r+b") as stream:
        found = sections(stream)
        if found is None:
            raise RenameError(f"{path}: not a 64-bit little-endian ELF library")
        if any(s.type == _GNU_HASH for s in found):
            raise RenameError(f"{path}: has a GNU hash table (linked without {SYSV_HASH_STYLE})")
        dynamic = next((s for s in found if s.type == _DYNSYM), None)
        if dynamic is None:
            raise RenameError(f"{path}: has no dynamic symbol table")
        described = _description(found, renamed, path)  # checked before anything is written
        done = _rename_in(stream, found, dynamic, names, _other_references(stream, found))
        missing = set(names) - done
        if missing:
            raise RenameError(f"{path}: exports no {sorted(missing)[0].decode()}")
        static = next((s for s in found if s.type == _SYMTAB), None)
        if static is not None:  # what debuggers and nm show; a shared string keeps its name
            _rename_in(stream, found, static, names, [], strict=False)
        stream.seek(described[0])
        stream.write(described[1])
    return renamed


def _rename_in(
    stream: BinaryIO,
    found: list[Section],
    table: Section,
    names: Mapping[bytes, bytes],
    others: list[int],
    strict: bool = True,
) -> set[bytes]:
    """Rename the symbols of symbol table `table` named in `names`; rebuild the hash table
    that indexes it. Returns the old names renamed. `others` are string offsets referenced
    from outside the table (the dynamic section's, the version tables'). A name without
    room is a RenameError when `strict`, else left as it is."""
    strings_section = found[table.link]
    strings = bytearray(read_at(stream, strings_section.offset, strings_section.size))
    symbols = read_at(stream, table.offset, table.size)
    offsets = [_SYMBOL.unpack_from(symbols, at)[0] for at in range(0, len(symbols), _SYMBOL.size)]
    references = sorted({*offsets, *others})
    renamed: set[bytes] = set()
    for start in sorted(set(offsets)):
        end = strings.index(b"\0", start)
        old = bytes(strings[start:end])
        new = names.get(old)
        if new is None:
            continue
        room = end
        while room + 1 < len(strings) and strings[room + 1] == 0:
            room += 1
        if len(new) > room - start or any(start < r <= room for r in references):
            if not strict:
                continue
            raise RenameError(f"{old.decode()}: no room to rename it in place")
        strings[start:room] = new.ljust(room - start, b"\0")
        renamed.add(old)
    stream.seek(strings_section.offset)
    stream.write(strings)
    hashed = next((s for s in found if s.type == _HASH and found[s.link] == table), None)
    if hashed is not None:
        _rebuild_hash(stream, hashed, [_string(strings, o) for o in offsets])
    return renamed


def _rebuild_hash(stream: BinaryIO, section: Section, names: list[bytes]) -> None:
    """The SysV hash table of symbols named `names` (index order), same bucket count."""
    buckets, chains = struct.unpack_from("<II", read_at(stream, section.offset, 8))
    if chains != len(names):
        raise RenameError("the hash table does not index every dynamic symbol")
    bucket, chain = [0] * buckets, [0] * chains
    for index in range(len(names) - 1, 0, -1):  # index 0 is the undefined symbol
        slot = elf_hash(names[index]) % buckets
        chain[index], bucket[slot] = bucket[slot], index
    stream.seek(section.offset + 8)
    stream.write(struct.pack(f"<{buckets + chains}I", *bucket, *chain))


def elf_hash(name: bytes) -> int:
    """The System V ABI's symbol hash."""
    value = 0
    for byte in name:
        value = (value << 4) + byte
        high = value & 0xF0000000
        if high:
            value ^= high >> 24
        value &= ~high & 0xFFFFFFFF
    return value


def _string(strings: bytearray, offset: int) -> bytes:
    return bytes(strings[offset : strings.index(b"\0", offset)])


def _other_references(stream: BinaryIO, found: list[Section]) -> list[int]:
    """The dynamic string table's offsets that the dynamic section (needed libraries,
    soname, run paths) and the version tables refer to."""
    offsets: list[int] = []
    for section in found:
        if section.type not in (_DYNAMIC_TYPE, _VERNEED, _VERDEF):
            continue  # never read the weights' section
        data = read_at(stream, section.offset, section.size)
        if section.type == _DYNAMIC_TYPE:
            for at in range(0, len(data) - _DYNAMIC.size + 1, _DYNAMIC.size):
                tag, value = _DYNAMIC.unpack_from(data, at)
                if tag in _NAMED_TAGS:
                    offsets.append(value)
        elif section.type == _VERNEED:
            offsets += _version_needs(data)
        elif section.type == _VERDEF:
            offsets += _version_definitions(data)
    return offsets


_VERNEED_ENTRY = (struct.Struct("<HHIII"), 1, (2,), 3, 4)
_VERNAUX_ENTRY = (struct.Struct("<IHHII"), None, (3,), None, 4)
_VERDEF_ENTRY = (struct.Struct("<HHHHIII"), 3, (), 5, 6)
_VERDAUX_ENTRY = (struct.Struct("<II"), None, (0,), None, 1)
"""How each version table's records read: (layout, index of the count of auxiliary
records, indices of string offsets, index of the offset to the first auxiliary record,
index of the offset to the next record)."""


def _version_needs(data: bytes) -> list[int]:
    return _version_names(data, _VERNEED_ENTRY, _VERNAUX_ENTRY)


def _version_definitions(data: bytes) -> list[int]:
    return _version_names(data, _VERDEF_ENTRY, _VERDAUX_ENTRY)


def _version_names(data: bytes, record: tuple, auxiliary: tuple) -> list[int]:  # type: ignore[type-arg]
    """The string offsets of a version table: a chain of records, each with a chain of
    auxiliary records (ELF's Verneed/Vernaux and Verdef/Verdaux)."""
    layout, count_at, names_at, aux_at, next_at = record
    offsets: list[int] = []
    at = 0
    while at + layout.size <= len(data):
        fields = layout.unpack_from(data, at)
        offsets += [fields[i] for i in names_at]
        entry = at + fields[aux_at]
        for _ in range(fields[count_at]):
            aux = auxiliary[0].unpack_from(data, entry)
            offsets += [aux[i] for i in auxiliary[2]]
            entry += aux[auxiliary[4]]
        if not fields[next_at]:
            break
        at += fields[next_at]
    return offsets


def _description(found: list[Section], library: CLibrary, path: Path) -> tuple[int, bytes]:
    """Where the description section lies, and its new bytes (NUL-padded to its size)."""
    section = next((s for s in found if s.name == DESCRIPTION_SECTION), None)
    if section is None:
        raise RenameError(f"{path}: holds no C interface description")
    text = library.to_json().encode()
    if len(text) >= section.size:
        raise RenameError(f"{path}: no room for the renamed description")
    return section.offset, text.ljust(section.size, b"\0")
