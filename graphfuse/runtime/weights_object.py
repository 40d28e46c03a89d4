"""Large constants as an object file of raw bytes, never as text.

A model's weights (BERT-base: 440 MB) printed as `dense<"0x...">` cost every tool that
reads them minutes and gigabytes. Instead their bytes are written once into a blob file and
an assembler file names each one, `.incbin`-ing its slice of the blob into a read-only
section:

    .section .rodata.graphfuse_weights,"a",@progbits
    .balign 64
    .globl "w"
    .type "w", @object
    .size "w", 131072
    "w": .incbin "/tmp/.../weights.bin", 0, 131072

`cc -c` assembles it; the object defines the symbols the kernels declare (kernel_split.py),
and is linked into a library that must stand alone. The blob and the object are written to
memory (/dev/shm) where it has room: on disk they cost as much again as the link
(docs/decisions.md).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path

from graphfuse.runtime.cpu_tools import run_tool

ALIGNMENT = 64
"""Each weight starts on a cache line (the kernels' globals ask for 64 bytes)."""


def weights_object(weights: Mapping[str, bytes], folder: Path) -> Path:
    """An object file in `folder` defining each of `weights` (symbol -> bytes), aligned to
    ALIGNMENT, in a read-only section."""
    blob = folder / "weights.bin"
    lines = ['\t.section .rodata.graphfuse_weights,"a",@progbits']
    offset = 0
    with open(blob, "wb") as out:
        for symbol, data in weights.items():
            padding = -offset % ALIGNMENT
            out.write(bytes(padding))
            offset += padding
            size = memoryview(data).nbytes
            out.write(data)
            name = _quoted(symbol)
            lines += [
                f"\t.balign {ALIGNMENT}",
                f"\t.globl {name}",
                f"\t.type {name}, @object",
                f"\t.size {name}, {size}",
                f"{name}:",
                f"\t.incbin {_quoted(str(blob))}, {offset}, {size}" if size else "",
            ]
            offset += size
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    source = folder / "weights.s"
    source.write_text("\n".join(lines) + "\n")
    obj = folder / "weights.o"
    run_tool("assembling the weights", "cc", ["-c", "-o", str(obj), str(source)])
    return obj


MEMORY_FOLDER = Path("/dev/shm")
"""A folder in memory (tmpfs) on Linux, where it exists."""


@contextmanager
def weights_folder(size: int) -> Generator[Path, None, None]:
    """A temporary folder for a weights object of `size` bytes (its blob and object take
    twice that): in memory when MEMORY_FOLDER has room for four times the size, else in
    the default temporary folder."""
    where: str | None = None
    try:
        if shutil.disk_usage(MEMORY_FOLDER).free > 4 * size:
            where = str(MEMORY_FOLDER)
    except OSError:
        pass
    with tempfile.TemporaryDirectory(prefix="graphfuse-weights-", dir=where) as folder:
        yield Path(folder)


def _quoted(text: str) -> str:
    """`text` as a GNU assembler string (symbol names with any character are quoted too)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
