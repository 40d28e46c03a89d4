"""Scalar scales moved out of matmul operands: matmul(x * c, y) -> matmul(x, y) * c.

ONNX's Attention body scales Q and K by sqrt(scale) each before their product (to keep the
scores in range in low precision); written by hand, the scale multiplies the scores. Moved
behind the matmul, the multiplication joins the matmul's epilogue, and no kernel pass over Q
and no scaled copy of K is left, so the opened-up op is as fast as the hand-written graph.
Two scales meeting behind the matmul are folded into one constant when their product stays
in range. Only scalar constants (one value, any shape that does not broadcast the operand)
move, only from a multiplication nothing else reads, and only in f32, f64 and integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerType, TensorType
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import same_bits
from graphfuse.passes.rewrites.folding import constant_value, make_constant


def _scalar(value: SSAValue) -> NDArray[Any] | None:
    """The one value of a constant all of whose elements hold the same bits (zeros of both
    signs are no scalar), as a 0-d array."""
    array = constant_value(value)
    if array is None or not same_bits(array):
        return None
    return np.asarray(array.reshape(-1)[0])


def _wide_enough(value: SSAValue) -> bool:
    """f32, f64 or integers: a product computed before its scale stays in range (in f16 or
    bf16 it may not: why ONNX's Attention scales Q and K first, and why those stay)."""
    element = graph.tensor_type_of(value).get_element_type()
    return isinstance(element, Float32Type | Float64Type | IntegerType)


def _in_kernel(op: Operation) -> bool:
    """Inside a graph.fused kernel: fusion decided its ops already; leave them (and keep
    fusing a fused module a no-op)."""
    return isinstance(op.parent_op(), graph.FusedOp)


def _scaled(value: SSAValue) -> tuple[SSAValue, NDArray[Any]] | None:
    """`value` is x * c (or c * x) with c scalar, x of value's own type, read only here."""
    if not isinstance(value, OpResult) or not isinstance(value.op, graph.MulOp):
        return None
    if not value.has_one_use():
        return None
    mul = value.op
    for operand, other in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        scale = _scalar(other)
        if scale is not None and operand.type == value.type:
            return operand, scale
    return None


class HoistScalarScales(RewritePattern):
    """matmul(x * c, y) or matmul(x, y * c) -> matmul(x, y) * c, c a scalar constant."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter) -> None:
        if _in_kernel(op) or not _wide_enough(op.result):
            return
        result_type = graph.tensor_type_of(op.result)
        for index in (0, 1):
            found = _scaled(op.operands[index])
            if found is None:
                continue
            unscaled, scale = found
            operands = list(op.operands)
            operands[index] = unscaled
            product = graph.MatmulOp.create(operands=operands, result_types=[result_type])
            element = result_type.get_element_type()
            constant = make_constant(scale, TensorType(element, []))
            mul = graph.MulOp(product.results[0], constant.result)
            mul.result.name_hint = op.result.name_hint
            rewriter.replace(op, [product, constant, mul], [mul.result])
            return


class FoldScalarScales(RewritePattern):
    """(x * c1) * c2 -> x * (c1 * c2), c1 and c2 scalar constants, x * c1 read only here."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp, rewriter: PatternRewriter) -> None:
        if _in_kernel(op) or not _wide_enough(op.result):
            return
        for inner, outer in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            second = _scalar(outer)
            found = _scaled(inner)
            if (
                second is None
                or found is None
                or outer.type != TensorType(graph.tensor_type_of(op.result).get_element_type(), [])
            ):
                continue
            x, first = found
            if x.type != op.result.type:
                continue
            element = graph.tensor_type_of(op.result).get_element_type()
            combined = _product(first, second)
            if combined is None:
                continue
            constant = make_constant(combined, TensorType(element, []))
            mul = graph.MulOp(x, constant.result)
            mul.result.name_hint = op.result.name_hint
            rewriter.replace(op, [constant, mul], [mul.result])
            return


def _product(first: NDArray[Any], second: NDArray[Any]) -> NDArray[Any] | None:
    """c1 * c2 in their type, or None when it leaves the type's normal range (an underflow
    to 0 or subnormal, or an overflow, would change x * c1 * c2, which rounds twice but
    stays in range for the x it is used on)."""
    exact = np.float64(first) * np.float64(second)
    combined = np.asarray(exact).astype(first.dtype)
    if np.issubdtype(first.dtype, np.integer):
        return combined if int(combined) == int(exact) else None
    info = np.finfo(first.dtype)
    magnitude = abs(float(combined))
    if not np.isfinite(combined) or (exact != 0 and magnitude < float(info.tiny)):
        return None
    return combined
