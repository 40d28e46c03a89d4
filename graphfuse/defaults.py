"""The defaults and bounds the `graphfuse` command's parser shows, in a module that imports
nothing.

Every command, `graphfuse --help` included, builds the whole argument parser first; whatever
the parser reads is imported before any work. Taken from the compiler, the passes and the
targets, these values loaded xDSL, NumPy and every pipeline just to print usage; here they
cost nothing, and the commands import the compiler when they run. CompileOptions, graph-fuse,
convert-loop-to-gpu and the NVPTX target use the same values (tests/test_cli.py checks that
they agree).
"""

from __future__ import annotations

MAX_DEPTH = 256
"""Ops per fused kernel at most: TVM's default cap on ops per fused function
(relay.FuseOps.max_depth); graph-fuse's and CompileOptions' max_depth."""

AT_LEAST: dict[str, int] = {"max_depth": 1, "threads": 1}
"""The least value of each count option; --max-depth and --threads, CompileOptions and
graph-fuse check the same bounds."""

GPU_CHIP = "sm_90"
"""The GPU chip PTX files are built for when none is named (CompileOptions.chip None)."""

PTX_ISA = "8.0"
"""The PTX ISA version emitted when none is named: 8.0 (CUDA 12.0), the oldest graphfuse
emits."""

BLOCK_SIZE = 256
"""GPU threads per block (convert-loop-to-gpu's block_size)."""
