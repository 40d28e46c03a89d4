"""The `graph-fuse` pass: partition each function's ops into kernels and outline them.

```mlir
// before                                   // after graph-fuse
%c = graph.conv2d %x, %w : ...              %0 = graph.fused "fused_conv2d_add_relu"(%x, %w, %b)
%a = graph.add %c, %b : ...                        kind = out_elemwise_fusable : ... {
%r = graph.relu %a : ...                      ^bb0(...): conv2d, add, relu; graph.yield
func.return %r : ...                        }
```

The pipeline: graph-decompose (open compound ops) -> graph-simplify (rewrite rules,
constant folding, CSE, DCE) -> graph-fuse-patterns (pre-formed kernels) -> partition;
options switch the first three off. Partitioning follows TVM FuseOps: dataflow graph ->
post-dominator tree -> union-find groups in three phases -> outline every group holding a
graph op. Pre-formed kernels are single nodes of their recorded kind that may grow (they
count their ops against max-depth, and one already over it is opened first); the
partitioner's own kernels, and ops of other dialects, are opaque nodes, never fused and
left where they are, which makes the pass idempotent. With `explain=true` every candidate
fusion is printed, one `//` line each, ahead of the module so the output still parses.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import graph
from graphfuse.passes.dataflow import DataflowGraph, functions, is_preformed, op_count
from graphfuse.passes.graph_decompose import GraphDecomposePass
from graphfuse.passes.graph_fuse_patterns import fuse_patterns
from graphfuse.passes.graph_simplify import GraphSimplifyPass
from graphfuse.passes.outline import inline, outline, sort_block
from graphfuse.passes.partition import Partitioner
from graphfuse.passes.post_dominators import combine


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


def _is_outlinable(dag: DataflowGraph, index: int) -> bool:
    op = dag.nodes[index].op
    return op.dialect_name() == "graph" and (not isinstance(op, graph.FusedOp) or is_preformed(op))


def _group_ops(dag: DataflowGraph, members: list[int]) -> list[Operation]:
    """The ops of a group in IR order, pre-formed kernels opened back into their ops."""
    ops: list[Operation] = []
    for index in members:
        op = dag.nodes[index].op
        if isinstance(op, graph.FusedOp):
            ops.extend(o for o in inline(op) if not isinstance(o, graph.ConstantOp))
        else:
            ops.append(op)
    return ops


def _open_oversized(block: Block, max_depth: int) -> None:
    """Open pre-formed kernels of more than max_depth ops back into their ops, which the
    partitioner then groups like any others, so no kernel exceeds the limit."""
    for op in list(block.ops):
        if is_preformed(op) and op_count(op) > max_depth:
            assert isinstance(op, graph.FusedOp)
            inline(op)


def fuse_function(function: func.FuncOp, max_depth: int) -> list[str]:
    """Fuse one function in place; returns the explanation lines of its decisions."""
    block = function.body.block
    _open_oversized(block, max_depth)
    dag = DataflowGraph.from_block(block)
    partitioner = Partitioner(dag, max_depth)
    groups = partitioner.run()
    lines = [
        f"@{function.sym_name.data}: {decision.render(dag)}" for decision in partitioner.decisions
    ]
    for members in groups:
        if not all(_is_outlinable(dag, i) for i in members):
            assert len(members) == 1, "an opaque op was fused"
            continue
        # The kernel's kind is its most restrictive member's; the partitioner's group kind
        # follows TVM (only anchors raise it) and can understate an injective member.
        kind = reduce(combine, (dag.nodes[i].kind for i in members))
        outline(_group_ops(dag, members), kind)
    sort_block(block)
    return lines


def front_end(
    ctx: Context,
    module: ModuleOp,
    decompose: bool,
    simplify: bool,
    patterns: bool,
    rules: str | None = None,
) -> None:
    """The steps before partitioning: open compound ops, simplify (with a user's PDL rules
    file, if given), pre-form pattern kernels."""
    if decompose:
        GraphDecomposePass().apply(ctx, module)
    if simplify:
        GraphSimplifyPass(rules=rules).apply(ctx, module)
    if patterns:
        fuse_patterns(module)


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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_depth < 1:
            raise PassFailedException(f"graph-fuse: max-depth must be >= 1, got {self.max_depth}")
        with gc_paused():
            front_end(ctx, op, self.decompose, self.simplify, self.patterns, self.rules)
            self._partition(op)

    def _partition(self, op: ModuleOp) -> None:
        for function in functions(op):
            lines = fuse_function(function, self.max_depth)
            if self.explain:
                print("\n".join(f"// graph-fuse: {line}" for line in lines))
