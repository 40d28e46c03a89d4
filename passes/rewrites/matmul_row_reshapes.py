"""A reshape that regroups a matmul's rows moves into the matmul's left operand.

```mlir
%y = graph.matmul %x2d, %w : (tensor<512x768xf32>, tensor<768x3072xf32>) -> tensor<512x3072xf32>
%b = graph.add %y, %bias : (tensor<512x3072xf32>, tensor<3072xf32>) -> tensor<512x3072xf32>
%r = graph.reshape %b : tensor<512x3072xf32> -> tensor<4x128x3072xf32>
%g = graph.tanh %r ...
  ->
%x3d = graph.reshape %x2d : tensor<512x768xf32> -> tensor<4x128x768xf32>
%y = graph.matmul %x3d, %w : (tensor<4x128x768xf32>, tensor<768x3072xf32>) -> tensor<4x128x3072xf32>
%b = graph.add %y, %bias ...                                  // %g follows %b directly
```

PyTorch's `addmm` linear layers (GPT-2's Conv1D, any `x.view(-1, k) @ w` then `.view(...)`)
export as Gemm between two Reshapes. A reshape is injective, not elementwise, so the
activation and the residual add after it could not join the GEMM as its epilogue (TVM's
rule) and each ran as a kernel of its own, reading and writing the whole activation again.
With a weight of rank 2, row i of the product depends only on row i of the left operand, so
any reshape that keeps the last dimension (N) and regroups the rows can be applied to the
left operand instead (where the import's own reshape usually cancels it, and a reshape that
stays is read in place by the GEMM). Row-wise elementwise ops between the product and the
reshape (a bias along N, a scale, an activation) move below it with it: their other
operands are scalars or vectors along N, which broadcast the same at either rank.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from graphfuse.dialects import graph

_ROW_WISE = (graph.UnaryOp, graph.BinaryOp, graph.CastOp, graph.CompareOp, graph.SelectOp)
"""Elementwise ops whose properties do not depend on the shape (a predicate at most)."""


def _row_weight_matmul(value: SSAValue) -> graph.MatmulOp | None:
    """The matmul producing `value`, when its right operand is a rank-2 weight and nothing
    else reads the product (the other readers would need it at its own shape again)."""
    if not isinstance(value, OpResult) or not isinstance(value.op, graph.MatmulOp):
        return None
    if not value.has_one_use():
        return None
    matmul = value.op
    return matmul if len(graph.shape_of(matmul.rhs)) == 2 else None


def _along_rows(value: SSAValue, full: Sequence[int], target_rank: int) -> bool:
    """An operand that broadcasts the same over `full` rows at the target rank: a scalar,
    or a vector along the last dimension (leading dims of 1), of rank at most the target."""
    shape = graph.shape_of(value)
    if len(shape) > target_rank:
        return False
    return all(d == 1 for d in shape[:-1]) and (not shape or shape[-1] in (1, full[-1]))


def _row_wise_step(op: Operation, target_rank: int) -> SSAValue | None:
    """The one full-shape operand of a row-wise elementwise `op` (its other operands
    broadcast along rows), or None when `op` is not such an op."""
    if not isinstance(op, _ROW_WISE):
        return None
    full = graph.shape_of(op.results[0])
    main = [v for v in op.operands if graph.shape_of(v) == full]
    rest = [v for v in op.operands if graph.shape_of(v) != full]
    if len(main) != 1 or not all(_along_rows(v, full, target_rank) for v in rest):
        return None
    if sum(v is main[0] for v in op.operands) != 1:
        return None
    return main[0]


def _chain_to_matmul(value: SSAValue, target_rank: int) -> bool:
    """`value` is a rank-2-weight matmul's product, or reaches one through row-wise
    elementwise ops that nothing else reads."""
    while _row_weight_matmul(value) is None:
        if not isinstance(value, OpResult) or not value.has_one_use():
            return False
        step = _row_wise_step(value.op, target_rank)
        if step is None:
            return False
        value = step
    return True


def _keeps_columns(source: Sequence[int], target: Sequence[int]) -> bool:
    return len(source) >= 2 and len(target) >= 2 and source[-1] == target[-1] and source != target


class ReshapeRowsIntoMatmul(RewritePattern):
    """reshape(matmul(x, w)) -> matmul(reshape(x), w), through row-wise ops (module doc)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        if isinstance(op.parent_op(), graph.FusedOp):
            return
        source, target = graph.shape_of(op.input), graph.shape_of(op.result)
        if not _keeps_columns(source, target):
            return
        matmul = _row_weight_matmul(op.input)
        if matmul is not None:
            self._into_matmul(op, matmul, target, rewriter)
            return
        if not isinstance(op.input, OpResult) or not op.input.has_one_use():
            return
        main = _row_wise_step(op.input.op, len(target))
        if main is not None and _chain_to_matmul(main, len(target)):
            self._below(op, op.input.op, main, rewriter)

    @staticmethod
    def _into_matmul(
        op: graph.ReshapeOp,
        matmul: graph.MatmulOp,
        target: Sequence[int],
        rewriter: PatternRewriter,
    ) -> None:
        lhs = graph.ReshapeOp(matmul.lhs, (*target[:-1], graph.shape_of(matmul.lhs)[-1]))
        product = graph.MatmulOp.create(
            operands=[lhs.results[0], matmul.rhs], result_types=[op.result.type]
        )
        product.results[0].name_hint = matmul.result.name_hint
        rewriter.insert([lhs, product], InsertPoint.before(matmul))
        rewriter.replace(op, [], [product.results[0]])
        rewriter.erase(matmul)

    @staticmethod
    def _below(
        op: graph.ReshapeOp, step: Operation, main: SSAValue, rewriter: PatternRewriter
    ) -> None:
        """reshape(f(main, c)) -> f(reshape(main), c) for the row-wise `step`."""
        inner = graph.ReshapeOp(main, graph.shape_of(op.result))
        operands = [inner.results[0] if v is main else v for v in step.operands]
        moved = type(step).create(
            operands=operands,
            result_types=[op.result.type],
            properties=dict(step.properties),
            attributes=dict(step.attributes),
        )
        moved.results[0].name_hint = step.results[0].name_hint
        rewriter.insert([inner, moved], InsertPoint.before(step))
        rewriter.replace(op, [], [moved.results[0]])
        rewriter.erase(step)
