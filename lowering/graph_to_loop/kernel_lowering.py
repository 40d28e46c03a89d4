"""One `graph.fused` kernel → one `loop.kernel`: which ops it materialises, which buffers it
takes, and the order its loops are built in.

A heavy op (reduction, matmul, convolution, pooling: a `loop.reduce` accumulator) is
computed inline at the output point only when every path from it to the kernel's results
is elementwise at the same shape, so each of its elements is needed once per output point.
Otherwise (a reduction broadcast back over the rows it reduced, a matmul read through a
transpose) inlining would recompute it many times, so it is *materialised*: a first loop
writes it to a buffer (the kernel's output buffer if it is also a result, else a scratch
buffer the caller passes in) and later loops read it. A kernel whose materialised ops all
reduce the trailing dims of rows its results share (softmax, layer-norm) is instead
stitched: one loop over the rows, no scratch buffer (`row_stitching`). `kernel_builder`
builds the loops; `element_builder` and the per-op rules (`value_rules`) their bodies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import FusionKind, fusion_kind, shape_of
from graphfuse.lowering.graph_to_loop import (
    accumulator_rules,
    data_movement_rules,
    operand_layouts,
)
from graphfuse.lowering.graph_to_loop.buffers import GlobalPool, memref_of
from graphfuse.lowering.graph_to_loop.kernel_builder import KernelBuilder, yielded
from graphfuse.lowering.graph_to_loop.ranking import RANKING_OPS
from graphfuse.lowering.graph_to_loop.row_stitching import row_plan, stitched_rows

HEAVY_OPS = (graph.ReduceOp, graph.MatmulOp, graph.Conv2dOp, graph.Pool2dOp)
"""Ops computed with an accumulator over a reduction space."""

VALUE_RULES = data_movement_rules.RULES | accumulator_rules.RULES
"""How to compute one element of each non-elementwise op a kernel may hold."""


def _identity_closed(value: SSAValue, seen: dict[SSAValue, bool]) -> bool:
    """Every use of `value` is the yield or an elementwise op of the same shape whose
    result is itself identity-closed: each element is used once per output point.

    Users are visited with an explicit stack (an elementwise tail may be thousands of
    ops long), each value's answer after its users' answers."""
    stack = [(value, False)]
    while stack:
        top, users_done = stack.pop()
        if users_done:
            seen[top] = all(_closed_use(top, use.operation, seen) for use in top.uses)
        elif top not in seen:
            seen[top] = True
            stack.append((top, True))
            stack.extend((r, False) for r in _elementwise_results(top))
    return seen[value]


def _elementwise_results(value: SSAValue) -> list[SSAValue]:
    """Results of `value`'s elementwise users of its own shape."""
    return [
        result
        for use in value.uses
        if _same_shape_elementwise(use.operation, value)
        for result in use.operation.results
    ]


def _same_shape_elementwise(user: Operation, value: SSAValue) -> bool:
    return fusion_kind(user) == FusionKind.ELEMWISE and all(
        shape_of(r) == shape_of(value) for r in user.results
    )


def _closed_use(value: SSAValue, user: Operation, seen: dict[SSAValue, bool]) -> bool:
    if isinstance(user, graph.YieldOp):
        return True
    return _same_shape_elementwise(user, value) and all(seen[r] for r in user.results)


def materialized_ops(fused: graph.FusedOp) -> list[Operation]:
    """Heavy ops of the kernel that need a buffer, in program order."""
    seen: dict[SSAValue, bool] = {}
    return [
        op
        for op in fused.body.block.ops
        if isinstance(op, RANKING_OPS)
        or (isinstance(op, HEAVY_OPS) and not _identity_closed(op.results[0], seen))
    ]


@dataclass
class KernelSignature:
    """Buffers a kernel takes: one per input, one per result, then its scratch buffers."""

    inputs: list[MemRefType[Attribute]]
    outputs: list[MemRefType[Attribute]]
    scratch: list[MemRefType[Attribute]]

    @property
    def arg_types(self) -> list[Attribute]:
        return [*self.inputs, *self.outputs, *self.scratch]


def _stitched_rows(
    fused: graph.FusedOp, materialized: Sequence[Operation], operand_copies: bool
) -> tuple[int, ...] | None:
    copied = bool(operand_layouts.operand_copies(fused, operand_copies))
    return stitched_rows(materialized, yielded(fused), copied)


def staged_ops(
    fused: graph.FusedOp, operand_copies: bool = operand_layouts.OPERAND_COPIES
) -> list[Operation]:
    """Materialised ops that a loop of their own writes to a buffer before later loops read
    them: none in a kernel lowered row by row (see row_stitching), which keeps each
    reduction a scalar of its row."""
    materialized = materialized_ops(fused)
    return [] if _stitched_rows(fused, materialized, operand_copies) is not None else materialized


def kernel_signature(
    fused: graph.FusedOp, operand_copies: bool = operand_layouts.OPERAND_COPIES
) -> KernelSignature:
    """The buffers `lower_kernel(fused, ..., operand_copies)` takes."""
    yielded_values = set(yielded(fused))
    scratch = [
        memref_of(result)
        for op in staged_ops(fused, operand_copies)
        for result in op.results
        if result not in yielded_values
    ]
    scratch += [
        copy.buffer_type() for copy in operand_layouts.operand_copies(fused, operand_copies)
    ]
    return KernelSignature(
        [memref_of(v) for v in fused.inputs], [memref_of(r) for r in fused.outputs], scratch
    )


def lower_kernel(
    fused: graph.FusedOp,
    name: str,
    pool: GlobalPool,
    operand_copies: bool = operand_layouts.OPERAND_COPIES,
) -> loop.KernelOp:
    """The loop kernel computing `fused`'s results into its output buffers; with
    `operand_copies`, it first copies operands into reduction-contiguous layouts."""
    kernel = loop.KernelOp(name, kernel_signature(fused, operand_copies).arg_types)
    copies = operand_layouts.operand_copies(fused, operand_copies)
    builder = KernelBuilder(fused, kernel, copies, pool, VALUE_RULES)
    materialized = materialized_ops(fused)
    rows = _stitched_rows(fused, materialized, operand_copies)
    if rows is None:
        builder.build_staged(materialized)
    else:
        ops = list(fused.body.block.ops)
        builder.build_rows(row_plan(ops, materialized, yielded(fused), rows))
    builder.finish()
    return kernel
