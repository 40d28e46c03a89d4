"""A reshape of a concat that keeps the concat's axis moves onto the concat's operands.

```mlir
%c = graph.concat %a, %b axis = 3 : (tensor<1x28x28x96xf32>, ...) -> tensor<1x28x28x192xf32>
%r = graph.reshape %c : tensor<1x28x28x192xf32> -> tensor<1x784x192xf32>
  ->
%a2 = graph.reshape %a : tensor<1x28x28x96xf32> -> tensor<1x784x96xf32>
%b2 = graph.reshape %b : tensor<1x28x28x96xf32> -> tensor<1x784x96xf32>
%r = graph.concat %a2, %b2 axis = 2 : ...
```

When a reshape only regroups the dimensions before the concat's axis, and keeps the axis
and every dimension after it, each operand lands in one block of the result either way.
Swin's patch merging ends like this: four strided slices, a concat along the channels, and
a flattening of the image. With the concat last, convert-graph-to-loop stores it with one
loop per operand (kernel_builder.py). That is a vectorised copy of each slice. Behind a
reshape, it was one loop over the result that computed every operand at each point and
selected one.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import OpResult
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules


class ReshapeIntoConcat(RewritePattern):
    """reshape(concat(a, b, ...)) -> concat(reshape(a), reshape(b), ...) (module doc)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        source = op.input
        if not isinstance(source, OpResult) or not isinstance(source.op, graph.ConcatOp):
            return
        concat = source.op
        if not source.has_one_use() or isinstance(op.parent_op(), graph.FusedOp):
            return
        shape, target = graph.shape_of(source), graph.shape_of(op.result)
        axis = rules.normalize_axis(concat.axis.value.data, len(shape))
        kept = len(shape) - axis
        if len(target) < kept or tuple(target[len(target) - kept :]) != tuple(shape[axis:]):
            return
        new_axis = len(target) - kept
        pieces = [
            graph.ReshapeOp(
                operand,
                (*target[:new_axis], graph.shape_of(operand)[axis], *target[new_axis + 1 :]),
            )
            for operand in concat.inputs
        ]
        joined = graph.ConcatOp.create(
            operands=[p.results[0] for p in pieces],
            result_types=[op.result.type],
            properties={**concat.properties, "axis": IntegerAttr(new_axis, 64)},
            attributes=dict(concat.attributes),
        )
        joined.results[0].name_hint = op.result.name_hint
        rewriter.insert([*pieces, joined], InsertPoint.before(op))
        rewriter.replace(op, [], [joined.results[0]])
        rewriter.erase(concat)
