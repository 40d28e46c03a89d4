"""The two builds a profile runs: the normal library and the instrumented one.

The graph is fused and lowered once, as graphfuse.compile does it; the fused graph's
kernels give each call site its cost-model figures (bytes moved: passes/analysis/
kernel_stats.py, FLOPs: cost_model.op_flops) and its ops' shares for `--by-op`. Then the
lowered module is built twice: as it is (the library `graphfuse run` uses, found in the
same cache) and with timers around each kernel call of the entry (instrument.py), which
changes the entry module alone, so every kernel object is shared by the two builds.

convert-graph-to-loop makes one `loop.call` per `graph.fused`, in IR order, and no later
pass adds or removes a call, so call site i of the lowered entry runs fused kernel i;
loop-dedupe-kernels may point several sites at one kernel function.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, SSAValue

from graphfuse.compiler import CompileOptions, check_options, lower_for_cpu
from graphfuse.dialects import graph
from graphfuse.dialects.graph.interpreter import find_function
from graphfuse.passes.analysis.cost_model import op_flops
from graphfuse.passes.analysis.kernel_stats import kernel_stats, value_bytes
from graphfuse.profiling import runtime
from graphfuse.profiling.instrument import instrument
from graphfuse.profiling.origins import tokens_of
from graphfuse.runtime.build import build_module_library
from graphfuse.runtime.compiled import CompiledFunction
from graphfuse.timing import timed


@dataclass(frozen=True)
class OpCost:
    """One op of a fused kernel: where it came from and what the cost model charges it."""

    token: str | None
    """Its origin token (origins.py), None when nothing names it."""
    op: str
    flops: int
    bytes_moved: int
    """What it reads from and writes to memory (not values kept inside the kernel)."""


@dataclass(frozen=True)
class Site:
    """One kernel call of the entry, with the fused kernel it runs."""

    kernel: str
    """The kernel function it calls (shared by identical kernels)."""
    kind: str
    ops: tuple[str, ...]
    bytes_moved: int
    """Read plus written per call (kernel_stats)."""
    flops: int
    op_costs: tuple[OpCost, ...]


@dataclass(frozen=True)
class Builds:
    normal: CompiledFunction
    instrumented: CompiledFunction
    sites: list[Site]


def build(module: ModuleOp, entry: str, options: CompileOptions) -> Builds:
    """Fuse and lower `module` (changed in place) and build it twice (module docstring)."""
    check_options(options)
    fused: list[Site] = []

    def collect(fused_module: ModuleOp) -> None:
        fused.extend(_fused_kernels(find_function(fused_module, entry)))

    lowered = lower_for_cpu(module, entry, options, collect)
    signature, detached = lowered.signature, lowered.detached
    instrumented = module.clone()
    callees = instrument(instrumented, entry)
    assert len(callees) == len(fused), "one kernel call per graph.fused"
    sites = [replace(site, kernel=callee) for site, callee in zip(fused, callees, strict=True)]
    cpu = options.build_target
    runtime.runtime()  # loaded first: the instrumented library binds to it
    with timed("build"):
        libraries = [build_module_library(m, cpu, None, detached) for m in (module, instrumented)]
    normal, timed_build = (
        CompiledFunction(
            library,
            entry,
            signature.inputs,
            signature.outputs,
            lowered.scratch,
            len(sites),
            detached,
            lowered.offsets,
        )
        for library in libraries
    )
    return Builds(normal, timed_build, sites)


def _fused_kernels(function: func.FuncOp) -> list[Site]:
    """A Site per graph.fused of the fused `function`, in IR order (kernel: its graph name)."""
    fused = [op for op in function.body.block.ops if isinstance(op, graph.FusedOp)]
    stats = kernel_stats(function)
    assert len(stats) == len(fused), "graph-fuse leaves no op outside a kernel"
    return [
        Site(
            kernel=s.name,
            kind=s.kind,
            ops=s.ops,
            bytes_moved=s.bytes_read + s.bytes_written,
            flops=op_flops(op),
            op_costs=tuple(_op_costs(op)),
        )
        for op, s in zip(fused, stats, strict=True)
    ]


def _op_costs(fused: graph.FusedOp) -> list[OpCost]:
    """Each op's FLOPs and the bytes it moves to or from memory: operands that are kernel
    inputs (or constants cloned into it), results the kernel yields. Values made and used
    inside the kernel cost no bytes (kernel_stats), so an elementwise epilogue weighs its
    FLOPs, not a round trip through memory it never makes."""
    block = fused.body.block
    terminator = block.last_op
    assert terminator is not None
    yielded = set(terminator.operands)

    def from_memory(value: SSAValue) -> bool:
        return isinstance(value, BlockArgument) or isinstance(value.owner, graph.ConstantOp)

    costs: list[OpCost] = []
    for op in block.ops:
        if isinstance(op, graph.YieldOp | graph.ConstantOp):
            continue
        read = [v for v in dict.fromkeys(op.operands) if from_memory(v)]
        written = [r for r in op.results if r in yielded]
        moved = sum(value_bytes(v) for v in (*read, *written))
        found = next((t for r in op.results if (t := tokens_of(r.name_hint))), list[str]())
        tokens: list[str | None] = [*found] or [None]
        share = len(tokens)  # a merged op's cost is split evenly among the ops it stands for
        name, flops = op.name.removeprefix("graph."), op_flops(op)
        costs += [OpCost(t, name, flops // share, moved // share) for t in tokens]
    return costs
