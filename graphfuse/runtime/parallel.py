"""Threads for CPU kernels: MLIR's OpenMP lowering of `scf.parallel`, run by graphfuse's
own small runtime (`parallel_runtime.c`).

`convert-scf-to-openmp` turns each `scf.parallel` into an OpenMP parallel loop, and
`convert-openmp-to-llvm` plus `mlir-translate` outline its body and call libomp's ABI
(`__kmpc_fork_call`, `__kmpc_for_static_init_8u`, `__kmpc_barrier`, ...). The pinned
toolchain ships no libomp, and MLIR's async runtime (the other route, `async-parallel-for`)
wakes its workers through condition variables for every loop: a memory-bound kernel on
two cores ran at 1.4x of one core where a spinning pool reaches 2x. So the kernels' calls
are renamed to `graphfuse_kmpc_*` and linked against `parallel_runtime.c`, built once by
the system C compiler into the build cache. Renaming keeps another OpenMP runtime in the
same process (PyTorch's, say) out of graphfuse's way and graphfuse's out of its.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

_KMPC_CALL = re.compile(r"@__kmpc_")
_SOURCE = "parallel_runtime.c"


def openmp_passes(threads: int) -> list[str]:
    """mlir-opt passes that turn `scf.parallel` into OpenMP loops on `threads` workers.

    They run before `scf` is lowered to `cf`. Canonicalising after the conversion inlines
    the `memref.alloca_scope` it wraps each body in where the body allocates nothing; the
    scopes that stay (bodies with stack tiles) are lowered to stack save/restore by
    `finalize-memref-to-llvm`, which must therefore also run before `scf` becomes `cf` (an
    alloca scope holds one block)."""
    return [
        f"--convert-scf-to-openmp=num-threads={threads}",
        "--canonicalize",
        "--convert-math-to-funcs=convert-ctlz=false",
        "--expand-strided-metadata",
        "--convert-openmp-to-llvm",
        "--finalize-memref-to-llvm",
    ]


def rename_runtime_calls(llvm_ir: str) -> str:
    """Point the kernels' OpenMP runtime calls at graphfuse's runtime."""
    return _KMPC_CALL.sub("@graphfuse_kmpc_", llvm_ir)


def uses_runtime(llvm_ir: str) -> bool:
    return "@graphfuse_kmpc_" in llvm_ir


def runtime_source() -> str:
    return resources.files("graphfuse.runtime").joinpath(_SOURCE).read_text()


def runtime_name() -> str:
    """The runtime library's file name, which carries a hash of its source: an edited
    runtime is built afresh, and libraries linked against the old one keep theirs."""
    digest = hashlib.sha256(runtime_source().encode()).hexdigest()[:16]
    return f"libgraphfuse_parallel-{digest}.so"
