"""TOSA elementwise, comparison, clamp, select and cast ops as graph-dialect ops.

TOSA broadcasts operands of equal rank along their size-1 dimensions, which NumPy's rules
(the graph dialect's) include, so binary ops map one to one. Ops with a quantisation
operand (mul's shift, negate's zero points) are taken when that operand is 0, as it is in
float models.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import AnyFloat, BFloat16Type, IntegerType
from xdsl.ir import Attribute, Operation
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import Value, element_of
from graphfuse.frontend.tosa.tosa_builder import TosaOp

Converter = Callable[[TosaOp], list[Value]]

_UNARY: dict[str, type[Operation]] = {
    "tosa.abs": graph.AbsOp,
    "tosa.exp": graph.ExpOp,
    "tosa.log": graph.LogOp,
    "tosa.tanh": graph.TanhOp,
    "tosa.sigmoid": graph.SigmoidOp,
    "tosa.rsqrt": graph.RsqrtOp,
    "tosa.erf": graph.ErfOp,
    "tosa.floor": graph.FloorOp,
    "tosa.ceil": graph.CeilOp,
    "tosa.sin": graph.SinOp,
    "tosa.cos": graph.CosOp,
    "tosa.bitwise_not": graph.BitwiseNotOp,
}
_BINARY: dict[str, type[Operation]] = {
    "tosa.add": graph.AddOp,
    "tosa.sub": graph.SubOp,
    "tosa.pow": graph.PowOp,
    "tosa.maximum": graph.MaxOp,
    "tosa.minimum": graph.MinOp,
    "tosa.intdiv": graph.DivOp,
    "tosa.bitwise_and": graph.BitwiseAndOp,
    "tosa.bitwise_or": graph.BitwiseOrOp,
    "tosa.bitwise_xor": graph.BitwiseXorOp,
}
_COMPARE = {"tosa.equal": "eq", "tosa.greater": "gt", "tosa.greater_equal": "ge"}


def _unary(op: TosaOp) -> list[Value]:
    b, op_type = op.builder, _UNARY[op.name]
    return [b.through_transpose(op.operands[0], lambda x: b.unary(op_type, x))]


def _binary(op: TosaOp) -> list[Value]:
    return [op.builder.binary(_BINARY[op.name], op.operands[0], op.operands[1])]


def _compare(op: TosaOp) -> list[Value]:
    return [op.builder.compare(_COMPARE[op.name], op.operands[0], op.operands[1])]


def _identity(op: TosaOp) -> list[Value]:
    return [op.operands[0]]


def _mul(op: TosaOp) -> list[Value]:
    """input1 * input2 >> shift; the shift (integer models only) must be 0."""
    if len(op.operands) > 2:
        shift = op.known_ints(2, "shift")
        if any(shift):
            raise op.fail(f"shift {shift[0]} is not supported (only 0: no fixed-point scaling)")
    return [op.builder.binary(graph.MulOp, op.operands[0], op.operands[1])]


def _negate(op: TosaOp) -> list[Value]:
    for index, what in ((1, "input1_zp"), (2, "output_zp")):
        if len(op.operands) > index:
            op.require_zero(index, what)
    return [op.builder.unary(graph.NegOp, op.operands[0])]


def _reciprocal(op: TosaOp) -> list[Value]:
    x = op.operands[0]
    return [op.builder.binary(graph.DivOp, op.builder.constant_like(1, x), x)]


def _logical(op: TosaOp) -> list[Value]:
    """On i1: not a = (a == false), a and b = a ? b : a, a or b = a ? a : b, xor = a != b."""
    b, x = op.builder, op.operands[0]
    if op.name == "tosa.logical_not":
        return [b.compare("eq", x, np.zeros((1,) * len(op.result_shape()), np.bool_))]
    y = op.operands[1]
    if op.name == "tosa.logical_xor":
        return [b.compare("ne", x, y)]
    on_true, on_false = (y, x) if op.name == "tosa.logical_and" else (x, y)
    operands = [b.tensor(v) for v in (x, on_true, on_false)]
    return [b.op(graph.SelectOp, operands, op.result_shape(), op.result_element())]


def _select(op: TosaOp) -> list[Value]:
    b = op.builder
    condition, on_true, on_false = (b.tensor(v) for v in op.operands[:3])
    shape = op.result_shape()
    return [b.op(graph.SelectOp, [condition, on_true, on_false], shape, element_of(on_true, ""))]


def _clamp(op: TosaOp) -> list[Value]:
    """max(min(x, max_val), min_val); ReLU (min 0, max the type's largest) is graph.relu."""
    low, high = op.number("min_val"), op.number("max_val")
    return [op.builder.through_transpose(op.operands[0], lambda x: _clamped(op, x, low, high))]


def _clamped(op: TosaOp, x: Value, low: float, high: float) -> Value:
    b = op.builder
    dtype = numpy_dtype(element_of(x, ""))
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    if low == 0 and high >= float(info.max):
        return b.unary(graph.ReluOp, x)
    result = x
    if high < float(info.max):
        result = b.binary(graph.MinOp, result, b.constant_like(high, x))
    if low > float(info.min):
        result = b.binary(graph.MaxOp, result, b.constant_like(low, x))
    return result


def _cast(op: TosaOp) -> list[Value]:
    """Float to integer as MLIR's tosa-to-linalg lowers it: round to the nearest, halves to
    even (TOSA's rule), then saturate to the integer type's range (graph.cast alone would
    truncate and wrap); see `_saturating_cast`."""
    b, x = op.builder, op.operands[0]
    target = op.result_element()
    source = element_of(x, "")
    if isinstance(source, AnyFloat) and isa(target, IntegerType) and target.bitwidth > 1:
        return [_saturating_cast(op, b.unary(graph.RoundOp, x), source, target)]
    return [b.cast(x, target)]


def _float_format(source: Attribute) -> tuple[int, float]:
    """Significand digits and largest finite value of a float type."""
    if isinstance(source, BFloat16Type):
        return 8, 2.0**128 * (1 - 2.0**-8)
    info = np.finfo(numpy_dtype(source))
    return int(info.nmant) + 1, float(info.max)


def _saturating_cast(op: TosaOp, r: Value, source: Attribute, target: IntegerType) -> Value:
    """The rounded `r` clamped into the integer range, in tosa-to-linalg's three cases:

    - the integer range is exact in the float type (f32 -> i8/i16): clamp, then convert;
      NaN gives 0 (tosa-to-linalg's fptosi of NaN is poison: no value to match);
    - the float type reaches 2^(n-1) but cannot hold the integer maximum (f32 -> i32):
      values >= 2^(n-1) give the maximum, NaN too (its unordered `uge` test);
    - the float range is narrower than the integer's (f16 -> i32): +inf gives the maximum,
      -inf and NaN the minimum (its two unordered `ueq` tests, in that order).

    The clamps keep every converted value in range, so graph.cast is defined on all."""
    b = op.builder
    info = np.iinfo(numpy_dtype(target))
    low, top = int(info.min), int(info.max) + 1  # both powers of two (or 0)
    digits, largest = _float_format(source)
    exact = top - 1 <= 2.0**digits and top <= largest
    below_top = min(top * (1 - 2.0**-digits), largest)  # the largest float < 2^(n-1)
    clamped = b.binary(graph.MinOp, r, b.constant_like(top - 1.0 if exact else below_top, r))
    clamped = b.binary(graph.MaxOp, clamped, b.constant_like(max(float(low), -largest), r))
    y = b.cast(clamped, target)
    shape = op.result_shape()

    def where(condition: Value, on_true: Value, on_false: int) -> Value:
        known = np.full((1,) * len(shape), on_false, numpy_dtype(target))
        return b.op(graph.SelectOp, [condition, on_true, known], shape, target)

    if exact:
        return where(b.compare("eq", r, r), y, 0)
    bound = float(top) if top <= largest else np.inf
    y = where(b.compare("lt", r, b.constant_like(bound, r)), y, top - 1)
    if -largest > low:
        y = where(b.compare("gt", r, b.constant_like(-np.inf, r)), y, low)
    return y


CONVERTERS: dict[str, Converter] = {
    **dict.fromkeys(_UNARY, _unary),
    **dict.fromkeys(_BINARY, _binary),
    **dict.fromkeys(_COMPARE, _compare),
    "tosa.identity": _identity,
    "tosa.mul": _mul,
    "tosa.negate": _negate,
    "tosa.reciprocal": _reciprocal,
    "tosa.select": _select,
    **dict.fromkeys(
        ("tosa.logical_not", "tosa.logical_and", "tosa.logical_or", "tosa.logical_xor"), _logical
    ),
    "tosa.clamp": _clamp,
    "tosa.cast": _cast,
}
