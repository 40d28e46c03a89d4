"""How a graph is compiled: `CompileOptions`, with the defaults and bounds of its options,
in a module that imports nothing heavy.

Every command, `graphfuse --help` included, builds the whole argument parser first, and
the parser shows these defaults; a compile found whole in the cache (graphfuse.compile_cache)
reads its options without loading the compiler. Taken from the compiler, the passes and the
targets, these values loaded xDSL, NumPy and every pipeline just to print usage. graph-fuse,
convert-loop-to-gpu, the NVPTX and CPU targets use the same values (tests/test_cli.py checks
that they agree)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphfuse.runtime.cpu_tools import CpuTarget
    from graphfuse.runtime.nvptx import NvptxTarget

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

CPU = "native"
"""The LLVM CPU built for when none is named: this machine's (CpuTarget.cpu)."""

OPT_LEVEL = 3
"""opt and llc's level for the kernels that need it most (CpuTarget.opt_level)."""


@dataclass(frozen=True)
class CompileOptions:
    """How a graph is compiled. `fuse=False` gives every op its own kernel (the baseline
    the benchmarks compare against); `max_depth` caps the ops per kernel."""

    fuse: bool = True
    max_depth: int = MAX_DEPTH
    refine: bool = True
    """Refine the TVM partition with the cost model (False: TVM's rules alone)."""
    cpu: str = CPU
    opt_level: int = OPT_LEVEL
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Workers for each kernel's parallel loops (default: this machine's cores)."""
    lanes: int | None = None
    """f32 lanes of the tiled matmul and convolution kernels' vectors: None picks 16 where
    the CPU has AVX-512, else 8; 8 on an AVX-512 CPU keeps to 256-bit registers."""

    block_size: int = BLOCK_SIZE
    """GPU threads per block (a multiple of 32 up to 1024)."""
    chip: str | None = None
    """The GPU the PTX is for (see graphfuse.runtime.nvptx.CHIP_MIN_PTX); None: sm_90 for
    PTX files, the GPU's own for target 'cuda'."""
    ptx_isa: str = PTX_ISA

    def __post_init__(self) -> None:
        """Options are checked where they are made, so a bad one never starts a build."""
        for name in ("max_depth", "threads", "opt_level", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                _refuse(f"{name} must be an integer, got {value!r}")
        for name, least in AT_LEAST.items():
            value = getattr(self, name)
            if value < least:
                _refuse(f"{name} must be at least {least}, got {value}")
        if self.lanes not in (None, 8, 16):
            _refuse(f"lanes must be 8 or 16, got {self.lanes}")
        if self.opt_level not in (0, 1, 2, 3):
            _refuse(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level}")
        if not self.cpu.strip():
            _refuse("cpu is empty: name an LLVM CPU, or 'native' for this one")

    def fusion(self) -> dict[str, int | bool]:
        """graph-fuse's options (see pipelines.fusion): without `fuse`, one op per kernel."""
        if not self.fuse:
            return {"max_depth": 1, "refine": False}
        return {"max_depth": self.max_depth, "refine": self.refine}

    def cpu_lowering(self) -> str:
        """The CPU lowering pipeline for these options' threads and vector lanes."""
        from graphfuse import pipelines

        lanes = self.lanes or self.target.vector_lanes()
        return pipelines.cpu_lowering(self.threads > 1, lanes, workers=self.threads)

    @property
    def target(self) -> CpuTarget:
        from graphfuse.runtime.cpu_tools import CpuTarget

        return CpuTarget(cpu=self.cpu, opt_level=self.opt_level, threads=self.threads)

    @property
    def build_target(self) -> CpuTarget:
        """`target` as a build uses it: an opt level the user chose applies to every
        kernel (the default: GEMM tiles only)."""
        return replace(self.target, uniform_opt_level=self.opt_level != OPT_LEVEL)

    @property
    def nvptx(self) -> NvptxTarget:
        from graphfuse.runtime.nvptx import NvptxTarget

        return NvptxTarget(chip=self.chip or GPU_CHIP, ptx_isa=self.ptx_isa)


def _refuse(message: str) -> None:
    """Raise graphfuse's input error."""
    from graphfuse.errors import GraphfuseError

    raise GraphfuseError(message)
