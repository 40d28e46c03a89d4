"""graph-split-grouped-conv: a grouped convolution as one convolution per group and a
concat, for the CPU build.

loop-tile-matmul computes a convolution as the implicit GEMM of im2col, whose rows are
output channels that only the weights read. In a grouped convolution the input channels an
output point reads depend on its output channel's group, so the nest has no such rows and
keeps a slow dot product per output point. Split, each group is an ordinary convolution of
the group's input channels (a slice) with its filters, a GEMM that tiles, and the concat
(with the convolution's epilogue) is one memory-bound kernel, as onnxruntime runs one GEMM
per group. Left whole: depthwise convolutions (their direct form vectorises along output
columns), groups too small to tile (`worth_tiling`, or fewer than MIN_GROUP_ROWS filters
per group), more than MAX_GROUPS groups (the graph grows by three ops per group), and
element types other than f32 (loop-tile-matmul computes f32 only). The GPU build does not
run this pass: there every output point is a thread either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_of, tensor_type_of
from graphfuse.lowering.graph_to_loop.operand_layouts import worth_tiling

MAX_GROUPS = 64
MIN_GROUP_ROWS = 8
"""Filters per group below which a group's GEMM is too short for the 6-row tiles."""


def worth_splitting(op: graph.Conv2dOp) -> bool:
    groups = op.groups.value.data
    filters, group_channels, kh, kw = shape_of(op.weight)
    result = tensor_type_of(op.result)
    points = math.prod(result.get_shape()) // groups
    return (
        1 < groups <= MAX_GROUPS
        and group_channels > 1
        and filters // groups >= MIN_GROUP_ROWS
        and isinstance(result.get_element_type(), Float32Type)
        and worth_tiling(points, group_channels * kh * kw)
    )


def _slice(value: SSAValue, dim: int, start: int, size: int) -> graph.SliceOp:
    shape = list(shape_of(value))
    starts = [0] * len(shape)
    starts[dim] = start
    shape[dim] = size
    element = tensor_type_of(value).get_element_type()
    return graph.SliceOp.create(
        operands=[value],
        result_types=[TensorType(element, shape)],
        properties={
            "starts": DenseArrayBase.from_list(i64, starts),
            "strides": DenseArrayBase.from_list(i64, [1] * len(shape)),
        },
    )


class SplitGroupedConv(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.Conv2dOp, rewriter: PatternRewriter) -> None:
        # Not inside a kernel: fusing a fused module again must change nothing.
        if not worth_splitting(op) or isinstance(op.parent_op(), graph.FusedOp):
            return
        groups = op.groups.value.data
        filters, group_channels = shape_of(op.weight)[:2]
        per_group = filters // groups
        n, _, oh, ow = shape_of(op.result)
        result_type = TensorType(
            tensor_type_of(op.result).get_element_type(), [n, per_group, oh, ow]
        )
        properties: dict[str, Attribute] = {
            "strides": op.strides,
            "padding": op.padding,
            "dilations": op.dilations,
            "groups": IntegerAttr(1, 64),
        }
        parts: list[SSAValue] = []
        for g in range(groups):
            x = _slice(op.input, 1, g * group_channels, group_channels)
            w = _slice(op.weight, 0, g * per_group, per_group)
            conv = graph.Conv2dOp.create(
                operands=[x.result, w.result], result_types=[result_type], properties=properties
            )
            rewriter.insert([x, w, conv], InsertPoint.before(op))
            parts.append(conv.result)
        concat = graph.ConcatOp.create(
            operands=parts,
            result_types=[op.result.type],
            properties={"axis": IntegerAttr(1, 64)},
        )
        rewriter.replace(op, concat)


@dataclass(frozen=True)
class GraphSplitGroupedConvPass(ModulePass):
    """Grouped convolutions that tile as one convolution per group, then a concat."""

    name = "graph-split-grouped-conv"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(SplitGroupedConv(), apply_recursively=False).rewrite_module(op)
