"""The tool runs from upstream MLIR to machine code: mlir-opt's passes to the LLVM dialect,
mlir-translate to LLVM IR, opt's optimisation and llc's code generation, each given once
here so that building and cache keys agree on them.

Several modules may go through mlir-opt and mlir-translate in one run (`--split-input-file`):
each chunk is converted on its own, and the outputs come back in order between markers.
This pays each tool's start (tens of milliseconds, all its dialects registered) once per
batch of kernels rather than once per kernel (docs/decisions.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from graphfuse.runtime import parallel
from graphfuse.runtime.cpu_tools import CpuTarget, run_tool
from graphfuse.toolchain import ToolchainError

MLIR_TO_LLVM_DIALECT = (
    "--canonicalize",
    "--cse",
    "--loop-invariant-code-motion",
    "--convert-scf-to-cf",
    "--convert-math-to-funcs=convert-ctlz=false",
    "--expand-strided-metadata",
    "--convert-vector-to-llvm",
    "--finalize-memref-to-llvm",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
)
"""mlir-opt passes from scf/memref/arith/math/func to the LLVM dialect."""

SCOPES_TO_LLVM = ("--expand-strided-metadata", "--finalize-memref-to-llvm")
"""Lowers memref ops, `memref.alloca_scope` among them, before `scf` becomes `cf`."""

BF16_EXPANSION = "--arith-expand=include-bf16=true"
"""bf16 conversions as integer ops (the C runtime may lack __truncsfbf2). Only for modules
that use bf16: arith-expand also turns maximumf into compare+select, which LLVM will not
vectorise as a reduction."""

BF16_TRUNCATION_HELPER = """
define weak hidden bfloat @__truncsfbf2(float %a) {
  %bits = bitcast float %a to i32
  %upper = lshr i32 %bits, 16
  %lsb = and i32 %upper, 1
  %bias = add i32 %lsb, 32767
  %rounded = add i32 %bits, %bias
  %nearest = lshr i32 %rounded, 16
  %nan = fcmp uno float %a, %a
  %quiet = or i32 %upper, 64
  %chosen = select i1 %nan, i32 %quiet, i32 %nearest
  %half = trunc i32 %chosen to i16
  %result = bitcast i16 %half to bfloat
  ret bfloat %result
}
"""
"""f32 -> bf16, rounding to nearest even (NaNs stay quiet NaNs). arith-expand writes the
conversions as integer ops, but `opt` may fold them back into bfloat selects and phis,
which llc (without AVX512-BF16) legalises with calls to `__truncsfbf2`: compiler-rt and
libgcc from GCC 13 have it, older libgcc does not, and the library would not load. So a
module that still holds bfloat after `opt` carries its own (weak, hidden) copy."""

MLIR_MARKER = "// -----"
"""Between modules given to mlir-opt at once (its `--split-input-file` default)."""
LLVM_MARKER = "; -----"
"""Between the LLVM IR modules mlir-translate prints for several inputs."""

LOWERING = "lowering to the LLVM dialect"
TRANSLATING = "translating to LLVM IR"
OPTIMISING = "optimising LLVM IR"
GENERATING = "generating machine code"
TOOL_STAGES = (
    ("mlir-opt", LOWERING),
    ("mlir-translate", TRANSLATING),
    ("opt", OPTIMISING),
    ("llc", GENERATING),
)
"""Each tool a kernel goes through and the stage its diagnostics and timing name."""


def mlir_opt_stages(upstream: str, threads: int = 1) -> list[list[str]]:
    """The mlir-opt runs from upstream MLIR to the LLVM dialect: one, or with threads two,
    between which `parallel.schedule_dynamically` rewrites the OpenMP loops' schedule."""
    passes: list[str] = list(MLIR_TO_LLVM_DIALECT)
    if "bf16" in upstream:
        passes.insert(passes.index("--expand-strided-metadata"), BF16_EXPANSION)
    if not uses_threads(upstream, threads):
        # Alloca scopes that outlive canonicalisation are lowered to stack save/restore
        # while they still hold one block: `scf-to-cf` would give them several.
        at = passes.index("--convert-scf-to-cf")
        return [[*passes[:at], *SCOPES_TO_LLVM, *passes[at:]]]
    at = passes.index("--convert-scf-to-cf")
    return [
        [*passes[:at], *parallel.openmp_conversion(threads)],
        [*parallel.after_openmp_conversion(), *passes[at:]],
    ]


def uses_threads(upstream: str, threads: int) -> bool:
    """Whether `upstream` gets OpenMP loops (and so the parallel runtime) for `threads`."""
    return threads > 1 and "scf.parallel" in upstream


def _target_args(target: CpuTarget, level: int) -> list[str]:
    """What opt and llc both take: the level and the machine (its features where the
    target turns some off)."""
    args = [f"-O{level}", f"-mtriple={target.triple}", f"-mcpu={target.resolved_cpu()}"]
    features = target.features()
    return [*args, f"-mattr={features}"] if features else args


def opt_args(target: CpuTarget, level: int) -> list[str]:
    return [*_target_args(target, level), "-vector-library=LIBMVEC", "-S"]


def llc_args(target: CpuTarget, level: int) -> list[str]:
    return [*_target_args(target, level), "-relocation-model=pic", "-filetype=obj"]


def to_llvm_dialect(upstream: str, threads: int = 1) -> str:
    """Upstream MLIR text -> LLVM dialect text."""
    return _lower(upstream, mlir_opt_stages(upstream, threads), [])


def _lower(text: str, stages: Sequence[Sequence[str]], extra: Sequence[str]) -> str:
    for n, passes in enumerate(stages):
        if n > 0:
            text = parallel.schedule_dynamically(text)
        text = run_tool(LOWERING, "mlir-opt", [*extra, *passes], text).decode()
    return text


def to_llvm_ir_modules(modules: Sequence[str], stages: Sequence[Sequence[str]]) -> list[str]:
    """Upstream MLIR modules (that share `stages`) -> unoptimised LLVM IR, one per module,
    through one mlir-opt run per stage and one mlir-translate run for them all. OpenMP
    runtime calls are renamed to graphfuse's runtime."""
    split = [f"--split-input-file={MLIR_MARKER}"]
    joined = f"\n{MLIR_MARKER}\n".join(modules) if len(modules) > 1 else modules[0]
    lowered = _lower(joined, stages, split if len(modules) > 1 else [])
    translate = ["--mlir-to-llvmir"]
    if len(modules) > 1:
        translate = [*split, f"--output-split-marker={LLVM_MARKER}", *translate]
    raw = run_tool(TRANSLATING, "mlir-translate", translate, lowered).decode()
    pieces = raw.split(f"\n{LLVM_MARKER}\n") if len(modules) > 1 else [raw]
    if len(pieces) != len(modules):
        raise ToolchainError(
            f"{TRANSLATING} failed (mlir-translate): {len(modules)} modules in, {len(pieces)} out"
        )
    return [mark_own_arguments(parallel.rename_runtime_calls(piece)) for piece in pieces]


_OWN_DEFINITION = re.compile(r"^define internal void @.*$", re.M)
_PLAIN_POINTER = re.compile(r"\bptr (?=%)")


def mark_own_arguments(llvm_ir: str) -> str:
    """Every pointer argument of a kernel module's internal functions marked `noalias`.
    Those are the kernel's own functions (kernel_split.py), which graphfuse makes only to
    say that their buffers do not overlap (scf-outline-tasks), and the bodies the OpenMP
    lowering outlines, whose pointers (thread ids and a context struct on the caller's
    stack, only read) overlap nothing either."""
    return _OWN_DEFINITION.sub(lambda m: _PLAIN_POINTER.sub("ptr noalias ", m.group(0)), llvm_ir)


def optimise(llvm_ir: str, target: CpuTarget, level: int) -> str:
    """opt at `level`; a module left holding bfloat gets its truncation helper."""
    optimised = run_tool(OPTIMISING, "opt", opt_args(target, level), llvm_ir).decode()
    if "bfloat" in optimised and "@__truncsfbf2(" not in optimised:
        optimised += BF16_TRUNCATION_HELPER
    return optimised


def to_llvm_ir(upstream: str, target: CpuTarget) -> str:
    """Upstream MLIR text -> optimised LLVM IR (what `--emit llvm` prints), whole."""
    stages = mlir_opt_stages(upstream, target.threads)
    (raw,) = to_llvm_ir_modules([upstream], stages)
    return run_tool(OPTIMISING, "opt", opt_args(target, target.opt_level), raw).decode()
