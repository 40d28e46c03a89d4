"""Elementwise StableHLO and CHLO ops, compare, select, clamp and convert as graph ops.

StableHLO's elementwise ops take operands of one shape (JAX broadcasts explicitly with
broadcast_in_dim); the graph ops broadcast as NumPy does, so a known operand is handed
over compact and the importer later lets an SSA operand skip its `graph.broadcast_to`.
Ops with no graph op of their own are built from those that exist (expm1 = exp - 1,
log1p = log(1 + x), logical and/or/xor/not on i1 through select and compare).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerType, UnitAttr
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.ops import is_unsigned
from graphfuse.frontend.onnx_builder import Value, shape_of
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp, compact
from graphfuse.frontend.stablehlo.table import converts

_UNARY: dict[str, type[Operation]] = {
    "stablehlo.abs": graph.AbsOp,
    "stablehlo.negate": graph.NegOp,
    "stablehlo.exponential": graph.ExpOp,
    "stablehlo.log": graph.LogOp,
    "stablehlo.tanh": graph.TanhOp,
    "stablehlo.logistic": graph.SigmoidOp,
    "stablehlo.sqrt": graph.SqrtOp,
    "stablehlo.rsqrt": graph.RsqrtOp,
    "stablehlo.sine": graph.SinOp,
    "stablehlo.cosine": graph.CosOp,
    "stablehlo.tan": graph.TanOp,
    "stablehlo.floor": graph.FloorOp,
    "stablehlo.ceil": graph.CeilOp,
    "stablehlo.sign": graph.SignOp,
    "stablehlo.round_nearest_even": graph.RoundOp,
    "chlo.erf": graph.ErfOp,
    "chlo.tan": graph.TanOp,
    "chlo.sinh": graph.SinhOp,
    "chlo.cosh": graph.CoshOp,
    "chlo.asin": graph.AsinOp,
    "chlo.acos": graph.AcosOp,
    "chlo.atan": graph.AtanOp,
    "chlo.asinh": graph.AsinhOp,
    "chlo.acosh": graph.AcoshOp,
    "chlo.atanh": graph.AtanhOp,
}

_BINARY: dict[str, type[Operation]] = {
    "stablehlo.add": graph.AddOp,
    "stablehlo.subtract": graph.SubOp,
    "stablehlo.multiply": graph.MulOp,
    "stablehlo.divide": graph.DivOp,
    "stablehlo.maximum": graph.MaxOp,
    "stablehlo.minimum": graph.MinOp,
    "stablehlo.power": graph.PowOp,
    "stablehlo.shift_left": graph.ShiftLeftOp,
}

_BITWISE: dict[str, type[Operation]] = {
    "stablehlo.and": graph.BitwiseAndOp,
    "stablehlo.or": graph.BitwiseOrOp,
    "stablehlo.xor": graph.BitwiseXorOp,
}

_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def _broadcast_shape(*values: Value) -> tuple[int, ...]:
    return rules.broadcast_shapes(*(shape_of(v) for v in values))


@converts(*_UNARY)
def _unary(b: HloBuilder, op: HloOp) -> list[Value]:
    return [b.unary(_UNARY[op.name], op.operands[0])]


@converts(*_BINARY, "stablehlo.remainder", "stablehlo.shift_right_arithmetic")
def _binary(b: HloBuilder, op: HloOp) -> list[Value]:
    lhs, rhs = (b.elementwise_operand(v) for v in op.operands)
    if op.name == "stablehlo.remainder":  # C's fmod: the result takes the dividend's sign
        a, c = b.same_element(lhs, rhs)
        result = b.op(graph.ModOp, [a, c], op.result_shape(), fmod=UnitAttr())
    elif op.name == "stablehlo.shift_right_arithmetic":
        if is_unsigned(op.operand_element(0)):
            raise b.fail("an arithmetic right shift of unsigned integers is not supported")
        result = b.binary(graph.ShiftRightOp, lhs, rhs)
    else:
        result = b.binary(_BINARY[op.name], lhs, rhs)
    return [b.broadcast_to(result, op.result_shape())]


@converts("stablehlo.shift_right_logical")
def _shift_right_logical(b: HloBuilder, op: HloOp) -> list[Value]:
    if not is_unsigned(op.operand_element(0)):
        raise b.fail("a logical right shift of signed integers is not supported")
    lhs, rhs = (b.elementwise_operand(v) for v in op.operands)
    return [b.broadcast_to(b.binary(graph.ShiftRightOp, lhs, rhs), op.result_shape())]


@converts(*_BITWISE, "stablehlo.not")
def _logical(b: HloBuilder, op: HloOp) -> list[Value]:
    """Bitwise on integers; on i1 (which has no bitwise graph op) through select and
    compare: a and b = a ? b : a, a or b = a ? a : b, a xor b = a != b, not a = a == 0."""
    values = [b.elementwise_operand(v) for v in op.operands]
    shape = op.result_shape()
    if op.operand_element(0) != IntegerType(1):
        if op.name == "stablehlo.not":
            return [b.unary(graph.BitwiseNotOp, values[0])]
        return [b.broadcast_to(b.binary(_BITWISE[op.name], *values), shape)]
    if op.name == "stablehlo.not":
        return [b.compare("eq", values[0], np.array(False))]
    lhs, rhs = values
    if op.name == "stablehlo.xor":
        return [b.broadcast_to(b.compare("ne", lhs, rhs), shape)]
    chosen = (rhs, lhs) if op.name == "stablehlo.and" else (lhs, rhs)
    result = b.op(graph.SelectOp, [lhs, *chosen], _broadcast_shape(lhs, rhs), IntegerType(1))
    return [b.broadcast_to(result, shape)]


@converts(
    "stablehlo.exponential_minus_one",
    "stablehlo.log_plus_one",
    "stablehlo.is_finite",
    "chlo.erfc",
    "chlo.square",
)
def _composed_unary(b: HloBuilder, op: HloOp) -> list[Value]:
    """Unary ops the graph has no op for, from those it has (expm1 and log1p lose their
    extra precision near 0; erfc its tail's relative precision: 1 - erf)."""
    x = op.operands[0]
    one = np.ones((), np.float64)
    if op.name == "stablehlo.exponential_minus_one":
        return [b.binary(graph.SubOp, b.unary(graph.ExpOp, x), one)]
    if op.name == "stablehlo.log_plus_one":
        return [b.unary(graph.LogOp, b.binary(graph.AddOp, x, one))]
    if op.name == "chlo.erfc":
        return [b.binary(graph.SubOp, one, b.unary(graph.ErfOp, x))]
    if op.name == "chlo.square":
        return [b.binary(graph.MulOp, x, x)]
    # x - x is 0 for finite x and NaN for inf and NaN.
    return [b.compare("eq", b.binary(graph.SubOp, x, x), np.zeros((), np.float64))]


@converts("stablehlo.round_nearest_afz")
def _round_away(b: HloBuilder, op: HloOp) -> list[Value]:
    """Halves away from zero, exactly: with a = |x| and f = floor(a), sign(x) * (a - f >= 0.5
    ? f + 1 : f). Every step is exact in x's type (a - f is; f + 1 is, as a - f is 0 from
    2^p / 2 on), where floor(|x| + 0.5) rounds the sum: 0.49999997 + 0.5 gives 1, and
    8388609 + 0.5 gives 8388610. NaN and inf stay (a - f is NaN, the test false)."""
    x = op.operands[0]
    a = b.unary(graph.AbsOp, x)
    f = b.unary(graph.FloorOp, a)
    up = b.compare("ge", b.binary(graph.SubOp, a, f), np.array(0.5))
    next_up = b.binary(graph.AddOp, f, np.array(1.0))
    rounded = b.op(graph.SelectOp, [up, next_up, f], shape_of(a), op.result_element())
    return [b.binary(graph.MulOp, b.unary(graph.SignOp, x), rounded)]


@converts("stablehlo.compare")
def _compare(b: HloBuilder, op: HloOp) -> list[Value]:
    direction = str(op.attr("comparison_direction")).split()[-1].rstrip(">")
    kind = op.optional("compare_type")
    if kind is not None and "TOTALORDER" in str(kind):
        raise b.fail("compare_type TOTALORDER is not supported (only FLOAT, SIGNED, UNSIGNED)")
    if direction not in _PREDICATES:
        raise b.fail(f"comparison direction {direction} is not supported")
    lhs, rhs = (b.elementwise_operand(v) for v in op.operands)
    return [b.broadcast_to(b.compare(_PREDICATES[direction], lhs, rhs), op.result_shape())]


@converts("stablehlo.select")
def _select(b: HloBuilder, op: HloOp) -> list[Value]:
    condition, on_true, on_false = (b.elementwise_operand(v) for v in op.operands)
    on_true, on_false = b.same_element(on_true, on_false)
    shape = _broadcast_shape(condition, on_true, on_false)
    result = b.op(graph.SelectOp, [condition, on_true, on_false], shape, op.result_element())
    return [b.broadcast_to(result, op.result_shape())]


@converts("stablehlo.clamp")
def _clamp(b: HloBuilder, op: HloOp) -> list[Value]:
    low, x, high = (b.elementwise_operand(v) for v in op.operands)
    result = b.binary(graph.MinOp, b.binary(graph.MaxOp, x, low), high)
    return [b.broadcast_to(result, op.result_shape())]


@converts("stablehlo.convert")
def _convert(b: HloBuilder, op: HloOp) -> list[Value]:
    x = op.operands[0]
    if isinstance(x, SSAValue):
        return [b.cast(x, op.result_element())]
    # A known operand converts compact (a splat stays a broadcast view).
    return [b.broadcast_to(b.cast(compact(x), op.result_element()), op.result_shape())]
