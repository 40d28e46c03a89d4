"""Large constants as an object file of raw bytes, never as text.

A model's weights (BERT-base: 440 MB) printed as `dense<"0x...">` cost every tool that
reads them minutes and gigabytes. Instead their bytes are written once, straight into a
relocatable ELF object: one read-only section holding every weight on a 64-byte boundary,
and a global symbol per weight naming its slice:

    .rodata.graphfuse_weights  (SHF_ALLOC, 64-byte aligned)   "w": offset 0, size 131072
    .symtab / .strtab          one STB_GLOBAL STT_OBJECT symbol per weight
    .note.GNU-stack            empty: the object asks for no executable stack

The object defines the symbols the kernels declare (kernel_split.py) and is linked into a
library that must stand alone. Writing it here costs one pass over the bytes; an assembler
given `.incbin` lines cost that pass and the assembler's own again. The object is written
to memory (/dev/shm) where it has room: on disk it costs as much again as the link
(docs/decisions.md).
"""

from __future__ import annotations

import platform
import shutil
import struct
import tempfile
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

ALIGNMENT = 64
"""Each weight starts on a cache line (the kernels' globals ask for 64 bytes)."""

SECTION = ".rodata.graphfuse_weights"

_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
"""ELF e_machine of the hosts graphfuse builds for: EM_X86_64, EM_AARCH64."""
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_PROGBITS, _SYMTAB, _STRTAB = 1, 2, 3
_ALLOC = 2
_GLOBAL_OBJECT = (1 << 4) | 1
"""st_info of a global data symbol: STB_GLOBAL, STT_OBJECT."""


def weights_object(weights: Mapping[str, bytes], folder: Path) -> Path:
    """An object file in `folder` defining each of `weights` (symbol -> bytes), aligned to
    ALIGNMENT, in a read-only section."""
    machine = _MACHINES.get(platform.machine().lower(), 62)
    obj = folder / "weights.o"
    symbols: list[tuple[int, int, int]] = []  # name offset, value, size
    names = bytearray(b"\0")
    with open(obj, "wb") as out:
        out.write(bytes(ALIGNMENT))  # the ELF header, written last
        offset = 0
        for symbol, data in weights.items():
            padding = -offset % ALIGNMENT
            out.write(bytes(padding))
            offset += padding
            size = memoryview(data).nbytes
            out.write(data)
            symbols.append((len(names), offset, size))
            names += symbol.encode() + b"\0"
            offset += size
        data_size = offset
        data_offset = ALIGNMENT
        at = data_offset + data_size
        at += _pad(out, at, 8)
        symtab_offset = at
        out.write(bytes(_SYMBOL.size))  # the undefined symbol
        for name, value, size in symbols:
            out.write(_SYMBOL.pack(name, _GLOBAL_OBJECT, 0, 1, value, size))
        at += _SYMBOL.size * (len(symbols) + 1)
        strtab_offset = at
        out.write(names)
        at += len(names)
        section_names = (
            b"\0"
            + b"\0".join(
                n.encode() for n in (SECTION, ".symtab", ".strtab", ".shstrtab", ".note.GNU-stack")
            )
            + b"\0"
        )
        shstrtab_offset = at
        out.write(section_names)
        at += len(section_names)
        at += _pad(out, at, 8)
        name_at = _name_offsets(section_names)
        headers = [
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
            (name_at[0], _PROGBITS, _ALLOC, 0, data_offset, data_size, 0, 0, ALIGNMENT, 0),
            (
                name_at[1],
                _SYMTAB,
                0,
                0,
                symtab_offset,
                _SYMBOL.size * (len(symbols) + 1),
                3,  # its names: .strtab
                1,  # the first global symbol
                8,
                _SYMBOL.size,
            ),
            (name_at[2], _STRTAB, 0, 0, strtab_offset, len(names), 0, 0, 1, 0),
            (name_at[3], _STRTAB, 0, 0, shstrtab_offset, len(section_names), 0, 0, 1, 0),
            (name_at[4], _PROGBITS, 0, 0, at, 0, 0, 0, 1, 0),
        ]
        for header in headers:
            out.write(_SECTION_HEADER.pack(*header))
        ident = b"\x7fELF\x02\x01\x01".ljust(16, b"\0")
        out.seek(0)
        out.write(
            _HEADER.pack(
                ident,
                1,
                machine,
                1,
                0,
                0,
                at,
                0,
                _HEADER.size,
                0,
                0,
                _SECTION_HEADER.size,
                len(headers),
                4,
            )  # fmt: skip
        )
    return obj


def _pad(out: BinaryIO, at: int, alignment: int) -> int:
    """Write the zeros that bring `at` to `alignment`; returns how many."""
    padding = -at % alignment
    out.write(bytes(padding))
    return padding


def _name_offsets(table: bytes) -> list[int]:
    """The offset of each name in a string table that starts with the empty name."""
    offsets, at = [], 1
    while at < len(table):
        offsets.append(at)
        at = table.index(b"\0", at) + 1
    return offsets


MEMORY_FOLDER = Path("/dev/shm")
"""A folder in memory (tmpfs) on Linux, where it exists."""


@contextmanager
def weights_folder(size: int) -> Generator[Path, None, None]:
    """A temporary folder for a weights object of `size` bytes: in memory when
    MEMORY_FOLDER has room for twice the size, else in the default temporary folder."""
    where: str | None = None
    try:
        if shutil.disk_usage(MEMORY_FOLDER).free > 2 * size:
            where = str(MEMORY_FOLDER)
    except OSError:
        pass
    with tempfile.TemporaryDirectory(prefix="graphfuse-weights-", dir=where) as folder:
        yield Path(folder)
