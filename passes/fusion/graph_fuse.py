"""The `graph-fuse` pass: partition each function's ops into kernels and outline them.

```mlir
%c = graph.conv2d %x, %w : ...     // after: %0 = graph.fused "fused_conv2d_add_relu"(%x, %w, %b)
%a = graph.add %c, %b : ...        //   kind = out_elemwise_fusable {conv2d, add, relu}
%r = graph.relu %a : ...
```

Front end first (graph-decompose, graph-simplify, graph-fuse-patterns; options switch each
off), then TVM FuseOps: dataflow graph -> post-dominator tree -> union-find groups ->
cost-model refinement -> outline every group holding a graph op. Pre-formed kernels count
their ops against max-depth (one over it is opened first); the partitioner's own kernels
and other dialects' ops are opaque, so the pass is idempotent. `explain=true` prints each
candidate fusion as a `//` line ahead of the module, so the output still parses.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import reduce

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, OpResult
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import functions
from graphfuse.parsing import check_at_least
from graphfuse.passes.analysis.cost_model import CPU_HOST, TARGETS, Target
from graphfuse.passes.analysis.dataflow import (
    DataflowGraph,
    is_preformed,
    node_kind,
    op_count,
)
from graphfuse.passes.analysis.post_dominators import combine
from graphfuse.passes.fusion.fusion_legality import Limits
from graphfuse.passes.fusion.fusion_refine import RefineOptions, Refiner
from graphfuse.passes.fusion.graph_fuse_patterns import fuse_patterns
from graphfuse.passes.fusion.kernel_plan import Plan
from graphfuse.passes.fusion.outline import inline, outline, sort_block
from graphfuse.passes.fusion.partition import Partitioner
from graphfuse.passes.rewrites.graph_decompose import GraphDecomposePass
from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass


@contextmanager
def gc_paused() -> Generator[None, None, None]:
    """Pause CPython's cycle collector while IR is rebuilt.

    Outlining creates and drops many IR objects; each automatic collection rescans the whole
    (large, long-lived) IR heap, which made graph-fuse grow faster than linearly with the
    graph. The IR holds no garbage cycles worth collecting mid-pass; collection resumes after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


DEFAULT_MAX_DEPTH = 256
"""TVM's default cap on ops per fused function (relay.FuseOps.max_depth)."""

DEFAULT_MAX_INPUTS = 64
"""Buffers one refined kernel may read (XLA's GPU limit on a fusion's operands and
outputs is 96; Ascend caps loads per kernel likewise)."""

DEFAULT_MAX_RESULTS = 8
"""Results one refined kernel may write."""

LEAST: dict[str, int] = {
    "max_depth": 1,
    "max_inputs": 1,
    "max_results": 1,
    "horizontal_max_bytes": 0,
}
"""The smallest value each numeric option allows; `graphfuse --max-depth` and CompileOptions
check max_depth against the same bound."""


def _is_outlinable(dag: DataflowGraph, index: int) -> bool:
    op = dag.nodes[index].op
    return op.dialect_name() == "graph" and (not isinstance(op, graph.FusedOp) or is_preformed(op))


def _open_oversized(block: Block, max_depth: int) -> None:
    """Open pre-formed kernels of more than max_depth ops back into their ops, which the
    partitioner then groups like any others, so no kernel exceeds the limit."""
    for op in list(block.ops):
        if is_preformed(op) and op_count(op) > max_depth:
            assert isinstance(op, graph.FusedOp)
            inline(op)


def fuse_function(
    function: func.FuncOp,
    max_depth: int,
    refine: RefineOptions | None = None,
    target: Target = CPU_HOST,
) -> FuseResult:
    """Fuse one function in place; returns the explanation of its decisions.

    `refine=None` stops after the TVM rules; otherwise the partition is refined (see
    `fusion_refine`) with costs for `target`."""
    block = function.body.block
    _open_oversized(block, max_depth)
    dag = DataflowGraph.from_block(block)
    partitioner = Partitioner(dag, max_depth)
    groups = partitioner.run()
    name = function.sym_name.data
    lines = [f"@{name}: {decision.render(dag)}" for decision in partitioner.decisions]
    # Opaque-kind ops (sort, ...) are outlined alone, as the rules leave them; ops of
    # other dialects are not outlined at all. Neither ever joins another kernel.
    opaque = {
        i
        for i in range(len(dag))
        if not _is_outlinable(dag, i) or node_kind(dag.nodes[i].op) == graph.FusionKind.OPAQUE
    }
    plan = Plan.from_groups(dag, groups, target, opaque)
    if refine is not None:
        refiner = Refiner(plan, refine)
        refiner.run()
        lines += [f"@{name}: {line}" for line in refiner.log]
    for kernel_ops in _plan_ops(plan):
        nodes = [dag.index_of[op] for op in kernel_ops if op in dag.index_of]
        if not all(_is_outlinable(dag, node) for node in nodes):
            assert len(kernel_ops) == 1, "an opaque op was fused"
            continue
        # The kernel's kind is its most restrictive member's; the partitioner's group kind
        # follows TVM (only anchors raise it) and can understate an injective member.
        kind = reduce(combine, (node_kind(op) for op in kernel_ops))
        outline(_open_preformed(kernel_ops), kind)
    sort_block(block)
    copies = sum(len(holders) - 1 for holders in plan.holders)
    return FuseResult(lines, copies)


@dataclass(frozen=True)
class FuseResult:
    """What fusing one function did."""

    lines: list[str]
    """Every accepted and rejected fusion, with its reason (for `explain`)."""
    copies: int
    """Ops recomputed in a second (third, ...) kernel: the function holds this many ops
    more than before fusion."""


def default_refinement(max_depth: int = DEFAULT_MAX_DEPTH) -> RefineOptions:
    """Every refinement step on, with the default limits (graph-fuse's defaults)."""
    refine, _ = GraphFusePass(max_depth=max_depth).refine_options()
    assert refine is not None
    return refine


def _plan_ops(plan: Plan) -> list[list[Operation]]:
    """Each kernel's ops in IR order. A node a kernel holds without owning it (a
    recomputed copy) is cloned there, just before the original, and the kernel's ops are
    wired to read the kernel's own copy of every node it holds and the original of every
    other: afterwards every op is in exactly one kernel."""
    dag = plan.dag
    block = dag.nodes[0].op.parent_block() if dag.nodes else None
    origin: dict[Operation, int] = dict(dag.index_of)
    kernels: list[dict[int, Operation]] = []
    for kernel in plan.ordered():
        local: dict[int, Operation] = {}
        for node in plan.kernels[kernel]:
            op = dag.nodes[node].op
            if plan.owner[node] != kernel:
                assert block is not None
                clone = op.clone()
                block.insert_op_before(clone, op)
                origin[clone] = node
                op = clone
            local[node] = op
        kernels.append(local)
    for local in kernels:
        for op in local.values():
            _wire(op, local, origin, dag)
    if block is None:
        return [list(local.values()) for local in kernels]
    position = {op: i for i, op in enumerate(block.ops)}
    return [sorted(local.values(), key=position.__getitem__) for local in kernels]


def _wire(
    op: Operation, local: dict[int, Operation], origin: dict[Operation, int], dag: DataflowGraph
) -> None:
    """Point `op`'s operands at its kernel's copy of each producer, or the original."""
    for index, operand in enumerate(op.operands):
        if not isinstance(operand, OpResult) or operand.op not in origin:
            continue
        source = operand.op
        node = origin[source]
        producer = local.get(node, dag.nodes[node].op)
        if producer is not source:
            op.operands[index] = producer.results[operand.index]


def _open_preformed(ops: list[Operation]) -> list[Operation]:
    """The ops of a kernel with pre-formed kernels opened back into their ops."""
    opened: list[Operation] = []
    for op in ops:
        if isinstance(op, graph.FusedOp):
            opened.extend(o for o in inline(op) if not isinstance(o, graph.ConstantOp))
        else:
            opened.append(op)
    return opened


@dataclass(frozen=True)
class GraphFusePass(ModulePass):
    """Fuse graph ops into `graph.fused` kernels (TVM FuseOps rules, see module docstring)."""

    name = "graph-fuse"

    max_depth: int = DEFAULT_MAX_DEPTH
    """Most ops one kernel may hold (TVM's max_depth)."""

    explain: bool = False
    """Print every accepted and rejected candidate fusion with its reason."""

    decompose: bool = True
    """First open compound ops into primitives (graph-decompose)."""

    simplify: bool = True
    """Then simplify, fold constants, CSE and DCE (graph-simplify)."""

    patterns: bool = True
    """Then pre-form the classic fused kernels (graph-fuse-patterns)."""

    rules: str | None = None
    """A PDL file of extra simplification rules (see graph-simplify)."""

    refine: bool = True
    """Refine the TVM partition with the cost model (false: the TVM rules alone)."""

    priority: bool = RefineOptions.priority
    """XLA priority fusion: producers into their consumers, best estimated gain first."""

    recompute: bool = RefineOptions.recompute
    """Let priority fusion recompute a cheap producer in each of several consumers."""

    stitch: bool = True
    """Reduction stitching: a reduction fuses with the ops after it over the same rows."""

    multi_output: bool = RefineOptions.multi_output
    """Sibling fusion: kernels reading one input over one iteration space merge."""

    merger: bool = RefineOptions.merger
    """XLA fusion merger: merge a kernel into its consumers when no bytes are added."""

    rollback: bool = RefineOptions.rollback
    """Split kernels that move as many bytes as their ops would alone."""

    horizontal: bool = RefineOptions.horizontal
    """Horizontal fusion: independent small kernels of one iteration space merge."""

    max_inputs: int = DEFAULT_MAX_INPUTS
    """Most buffers a refined kernel may read."""

    max_results: int = DEFAULT_MAX_RESULTS
    """Most results a refined kernel may write."""

    horizontal_max_bytes: int = RefineOptions.horizontal_max_bytes
    """Kernels moving more bytes than this are not small enough for horizontal fusion."""

    target: str = "cpu"
    """Cost-model target: cpu (this machine) or h100."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for lines in self.fuse(ctx, op):
            if self.explain:
                print("\n".join(f"// graph-fuse: {line}" for line in lines))

    def fuse(self, ctx: Context, op: ModuleOp) -> list[list[str]]:
        """Fuse `op` in place; returns each function's accepted and rejected fusions with
        their reasons (what `explain` prints), for a driver that prints them elsewhere."""
        refine, target = self.refine_options()
        with gc_paused():
            self._front_end(ctx, op)
            return [
                fuse_function(function, self.max_depth, refine, target).lines
                for function in functions(op)
            ]

    def _front_end(self, ctx: Context, op: ModuleOp) -> None:
        """The steps before partitioning: open compound ops, simplify (with a user's PDL
        rules file, if given), pre-form pattern kernels."""
        if self.decompose:
            GraphDecomposePass().apply(ctx, op)
        if self.simplify:
            GraphSimplifyPass(rules=self.rules).apply(ctx, op)
        if self.patterns:
            fuse_patterns(op)

    def refine_options(self) -> tuple[RefineOptions | None, Target]:
        """The refinement steps these options select, and the cost-model target."""
        self.check_options()
        if not self.refine:
            return None, TARGETS[self.target]
        limits = Limits(self.max_depth, self.max_inputs, self.max_results, self.stitch)
        # Every RefineOptions field but the limits is a graph-fuse option of the same name.
        steps = {f.name: getattr(self, f.name) for f in fields(RefineOptions) if f.name != "limits"}
        return RefineOptions(limits, **steps), TARGETS[self.target]

    def check_options(self) -> None:
        """Refuse out-of-range options with one PassFailedException naming the option and
        what it allows (`option_error` in graphfuse/parsing.py), before any IR changes."""
        for field, least in LEAST.items():
            check_at_least(self.name, field, getattr(self, field), least)
        if self.target not in TARGETS:
            raise PassFailedException(
                f"graph-fuse: unknown target '{self.target}'; valid targets: "
                f"{', '.join(TARGETS)} (option target, the cost-model preset)"
            )
