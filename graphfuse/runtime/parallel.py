"""Threads for CPU kernels: MLIR's OpenMP lowering of `scf.parallel`, run by graphfuse's
own small runtime (`parallel_runtime.c`).

`convert-scf-to-openmp` turns each `scf.parallel` into an OpenMP parallel loop, and
`convert-openmp-to-llvm` plus `mlir-translate` outline its body and call libomp's ABI
(`__kmpc_fork_call`, `__kmpc_dispatch_next_8u`, `__kmpc_barrier`, ...). The pinned
toolchain ships no libomp, and MLIR's async runtime (the other route, `async-parallel-for`)
wakes its workers through condition variables for every loop, which costs a memory-bound
kernel much of its second core (docs/decisions.md). So the kernels' calls are renamed to
`graphfuse_kmpc_*` and linked against `parallel_runtime.c`, a pool whose workers spin
between loops, built once by the system C compiler into the build cache. Renaming keeps
another OpenMP runtime in the same process (PyTorch's, say) out of graphfuse's way and
graphfuse's out of its.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import resources

from graphfuse.toolchain import ToolchainError

_KMPC_CALL = re.compile(r"@__kmpc_")
_STATIC_LOOP = re.compile(r"omp\.wsloop\s*\{")
_SOURCE = "parallel_runtime.c"


def openmp_conversion(threads: int) -> list[str]:
    """mlir-opt passes that turn `scf.parallel` into OpenMP loops on `threads` workers (they
    run before `scf` is lowered to `cf`). Canonicalising inlines the `memref.alloca_scope`
    the conversion wraps each body in, where the body allocates nothing."""
    return [f"--convert-scf-to-openmp=num-threads={threads}", "--canonicalize"]


def schedule_dynamically(text: str) -> str:
    """Give every OpenMP loop a dynamic schedule (the conversion leaves them static): on a
    shared or noisy machine a statically split loop waits for its slowest member, where
    dynamic chunks (guided, in the runtime) let the others take its share. Softmax
    4096x1024 on 2 threads spent 8.8% of its time at the closing barrier. The runtime
    implements only this schedule, so a loop printed any other way is an error here."""
    scheduled, count = _STATIC_LOOP.subn("omp.wsloop schedule(dynamic) {", text)
    if count != text.count("omp.wsloop"):
        raise ToolchainError(
            "lowering to the LLVM dialect: an OpenMP loop graphfuse's parallel runtime "
            "cannot schedule (only plain scf.parallel loops are supported)"
        )
    return scheduled


def after_openmp_conversion() -> list[str]:
    """The OpenMP dialect to LLVM, before `scf` becomes `cf`. The alloca scopes that stay
    (bodies with stack tiles) are lowered to stack save/restore by
    `finalize-memref-to-llvm`, which therefore runs here too (an alloca scope holds one
    block, and `scf-to-cf` would give it several)."""
    return [
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


@cache
def runtime_source() -> str:
    return resources.files("graphfuse.runtime").joinpath(_SOURCE).read_text()


@cache
def runtime_name() -> str:
    """The runtime library's file name, which carries a hash of its source: an edited
    runtime is built afresh, and libraries linked against the old one keep theirs."""
    digest = hashlib.sha256(runtime_source().encode()).hexdigest()[:16]
    return f"libgraphfuse_parallel-{digest}.so"
