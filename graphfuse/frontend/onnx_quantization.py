"""ONNX quantization operators as graph-dialect ops: QuantizeLinear, DequantizeLinear,
QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger, DynamicQuantizeLinear.

Nothing new is needed in the graph dialect: quantizing is a division, a round half to even
(graph.round), a clamp and casts; dequantizing is casts, a subtraction and a product. The
integer ops subtract the zero points in int32 and accumulate in int32 (graph.matmul and
graph.conv2d on i32, through the Conv lowering of onnx_nn). The QLinear ops requantize the
int32 accumulator as ONNX's reference does: the scales' ratio is formed in the scales' own
type and the product, the zero point, rounding and saturation are worked in f64 (NumPy
promotes int32 times float32 to float64), so the integer results match it exactly.

Per-axis scales and zero points (1-D, along `axis`) and blocked ones (`block_size`: the
scale's dimension `axis` repeated block_size times, cut to x's size) are broadcast to x.
Quantized types are uint8/int8/uint16/int16 (and int32 inputs where ONNX allows them);
float8, int4/uint4, int2/uint2 and float4 tensors are refused naming the type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, helper
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend import onnx_nn
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    Attrs,
    Inputs,
    converter,
    optional,
    required,
)

I32 = IntegerType(32)
F32 = Float32Type()
F64 = Float64Type()

_RANGES: dict[Attribute, tuple[int, int]] = {
    IntegerType(8, Signedness.UNSIGNED): (0, 255),
    IntegerType(8): (-128, 127),
    IntegerType(16, Signedness.UNSIGNED): (0, 65535),
    IntegerType(16): (-32768, 32767),
}
"""The quantized element types and their saturation ranges."""

_ONNX_QUANTIZED: dict[int, IntegerType] = {
    TensorProto.UINT8: IntegerType(8, Signedness.UNSIGNED),
    TensorProto.INT8: IntegerType(8),
    TensorProto.UINT16: IntegerType(16, Signedness.UNSIGNED),
    TensorProto.INT16: IntegerType(16),
}


def _where(b: Builder) -> str:
    return f"node {b.node}"


def _element(b: Builder, value: Value) -> Attribute:
    return element_of(value, _where(b))


def _is_float(element: Attribute) -> bool:
    return isinstance(element, Float16Type | BFloat16Type | Float32Type | Float64Type)


def _promoted(a: Attribute, c: Attribute) -> Attribute:
    """NumPy's promotion of two element types (the reference computes with NumPy): equal
    types stay, two 16-bit floats meet in f32, int32 with a float goes to f64."""
    if a == c:
        return a
    floats = [e for e in (a, c) if _is_float(e)]
    if len(floats) < 2:
        return F64
    widths: dict[type[Attribute], int] = {
        Float16Type: 16,
        BFloat16Type: 16,
        Float32Type: 32,
        Float64Type: 64,
    }
    wide = max(floats, key=lambda e: widths[type(e)])
    return wide if widths[type(wide)] > 16 else F32


def _onnx_type_name(value: int) -> str:
    return TensorProto.DataType.Name(value)


# ---- scales and zero points ---------------------------------------------------------------


def _broadcastable(
    b: Builder, value: Value, shape: Sequence[int], axis: int, block: int, what: str
) -> Value:
    """A scale or zero point reshaped (per axis) or repeated (blocked) to broadcast
    against x of `shape`, as ONNX lays them out."""
    value_shape = shape_of(value)
    if math.prod(value_shape) == 1 and (not block or len(value_shape) <= 1):
        return b.reshape(value, [])
    if not 0 <= axis < len(shape):
        raise b.fail(f"axis {axis} is out of range for x of rank {len(shape)}")
    if not block:
        if len(value_shape) != 1 or value_shape[0] != shape[axis]:
            raise b.fail(
                f"{what} of shape {rules.format_shape(value_shape)} does not match axis "
                f"{axis} of x ({rules.format_shape(shape)})"
            )
        return b.reshape(value, [shape[axis] if d == axis else 1 for d in range(len(shape))])
    return _blocked(b, value, shape, axis, block, what)


def _blocked(
    b: Builder, value: Value, shape: Sequence[int], axis: int, block: int, what: str
) -> Value:
    """`value` repeated `block` times along `axis` and cut to x's size there."""
    value_shape = list(shape_of(value))
    expected = [-(-shape[axis] // block) if d == axis else n for d, n in enumerate(shape)]
    if block < 0 or value_shape != expected:
        raise b.fail(
            f"{what} of shape {rules.format_shape(value_shape)} does not block x "
            f"({rules.format_shape(shape)}) by {block} along axis {axis}"
        )
    split = [*value_shape[: axis + 1], 1, *value_shape[axis + 1 :]]
    spread = [*value_shape[: axis + 1], block, *value_shape[axis + 1 :]]
    repeated = _broadcast(b, b.reshape(value, split), spread)
    merged = list(value_shape)
    merged[axis] *= block
    flat = b.reshape(repeated, merged)
    return onnx_nn.strided_slice(b, flat, [0] * len(shape), list(shape), [1] * len(shape))


def _broadcast(b: Builder, x: Value, shape: Sequence[int]) -> Value:
    if tuple(shape) == shape_of(x):
        return x
    if not isinstance(x, SSAValue):
        return np.broadcast_to(x, shape).copy()
    return b.op(graph.BroadcastToOp, [x], shape)


def _axis(b: Builder, attrs: Attrs, x: Value) -> int:
    """The quantization axis, normalized; checked only where a scale has one."""
    rank = len(shape_of(x))
    axis = int(attrs.get("axis", 1))
    return axis + rank if -rank <= axis < 0 else axis


# ---- quantize / dequantize ----------------------------------------------------------------


def _quantized_type(b: Builder, zero_point: Value | None, attrs: Attrs) -> Attribute:
    """The element type QuantizeLinear produces: the zero point's, else output_dtype,
    else uint8."""
    if zero_point is not None:
        element = _element(b, zero_point)
        if element not in _RANGES:
            raise b.fail(f"zero point of type {element} is not supported (only u8/i8/u16/i16)")
        return element
    code = int(attrs.get("output_dtype", 0) or TensorProto.UINT8)
    if code not in _ONNX_QUANTIZED:
        raise b.fail(
            f"quantizing to {_onnx_type_name(code)} is not supported "
            "(only UINT8, INT8, UINT16, INT16)"
        )
    return _ONNX_QUANTIZED[code]


def _round_clamp_cast(b: Builder, x: Value, zero_point: Value | None, target: Attribute) -> Value:
    """saturate(round_half_even(x) + zero_point) as `target` (x float: ONNX's rint, then
    int32 addition and clipping)."""
    rounded = b.unary(graph.RoundOp, x)
    element = _element(b, rounded)
    # A float outside int32's range has no int32 cast; it saturates anyway.
    bound = 65504.0 if isinstance(element, Float16Type) else float(2**30)
    rounded = b.binary(graph.MaxOp, rounded, np.array(-bound, np.float64))
    rounded = b.binary(graph.MinOp, rounded, np.array(bound, np.float64))
    shifted = b.cast(rounded, I32)
    if zero_point is not None:
        shifted = b.binary(graph.AddOp, shifted, b.cast(zero_point, I32))
    low, high = _RANGES[target]
    clamped = b.binary(graph.MaxOp, shifted, np.array(low, np.int32))
    clamped = b.binary(graph.MinOp, clamped, np.array(high, np.int32))
    return b.cast(clamped, target)


def quantize(
    b: Builder,
    x: Value,
    scale: Value,
    zero_point: Value | None,
    target: Attribute,
    axis: int = 1,
    block: int = 0,
) -> Value:
    """ONNX QuantizeLinear: saturate(round(x / scale) + zero_point), x / scale in NumPy's
    promoted type of the two."""
    shape = shape_of(x)
    compute = _promoted(_element(b, x), _element(b, scale))
    scale = b.cast(_broadcastable(b, scale, shape, axis, block, "scale"), compute)
    ratio = b.binary(graph.DivOp, b.cast(x, compute), scale)
    if zero_point is not None:
        zero_point = _broadcastable(b, zero_point, shape, axis, block, "zero point")
    return _round_clamp_cast(b, ratio, zero_point, target)


def dequantize(
    b: Builder,
    x: Value,
    scale: Value,
    zero_point: Value | None,
    target: Attribute,
    axis: int = 1,
    block: int = 0,
) -> Value:
    """ONNX DequantizeLinear: (x - zero_point) * scale, computed as the reference does
    (x as float32, an int32 zero point taking the difference to f64), cast to `target`."""
    shape = shape_of(x)
    dx: Value = b.cast(x, F32)
    work: Attribute = F32
    if zero_point is not None:
        work = F64 if _element(b, zero_point) == I32 else F32
        zero_point = _broadcastable(b, zero_point, shape, axis, block, "zero point")
        dx = b.binary(graph.SubOp, b.cast(dx, work), b.cast(zero_point, work))
    scale = _broadcastable(b, scale, shape, axis, block, "scale")
    work = _promoted(work, _element(b, scale))
    product = b.binary(graph.MulOp, b.cast(dx, work), b.cast(scale, work))
    return b.cast(product, target)


def _check_integer_input(b: Builder, value: Value, what: str, allowed: Sequence[Attribute]) -> None:
    element = _element(b, value)
    if element not in allowed:
        raise b.fail(f"{what} of type {element} is not supported")


_QUANTIZED_INPUTS = (*_RANGES, I32)


@converter("QuantizeLinear")
def _quantize_linear(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, scale, zero_point = required(inputs), required(inputs, 1), optional(inputs, 2)
    if not _is_float(_element(b, x)) and _element(b, x) != I32:
        raise b.fail(f"x of type {_element(b, x)} cannot be quantized (float or int32 only)")
    if attrs.get("precision"):
        raise b.fail("the precision attribute is not supported")
    target = _quantized_type(b, zero_point, attrs)
    axis, block = _axis(b, attrs, x), int(attrs.get("block_size", 0))
    return [quantize(b, x, scale, zero_point, target, axis, block)]


@converter("DequantizeLinear")
def _dequantize_linear(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, scale, zero_point = required(inputs), required(inputs, 1), optional(inputs, 2)
    _check_integer_input(b, x, "x", _QUANTIZED_INPUTS)
    if zero_point is not None and _element(b, zero_point) != _element(b, x):
        raise b.fail(f"zero point of type {_element(b, zero_point)} for x of {_element(b, x)}")
    target = _element(b, scale)
    if attrs.get("output_dtype"):
        code = int(attrs["output_dtype"])
        target = _element(b, np.zeros((), helper.tensor_dtype_to_np_dtype(code)))
    axis, block = _axis(b, attrs, x), int(attrs.get("block_size", 0))
    return [dequantize(b, x, scale, zero_point, target, axis, block)]


# ---- integer matmul and conv ----------------------------------------------------------------


def _as_int32(b: Builder, x: Value, zero_point: Value | None, zp_shape: Sequence[int]) -> Value:
    """x - zero_point in int32 (zero point reshaped to `zp_shape` unless a scalar)."""
    wide = b.cast(x, I32)
    if zero_point is None:
        return wide
    if math.prod(shape_of(zero_point)) == 1:
        zero_point = b.reshape(zero_point, [])
    else:
        zero_point = b.reshape(zero_point, zp_shape)
    return b.binary(graph.SubOp, wide, b.cast(zero_point, I32))


def _zero_point_shape(
    b: Builder, zero_point: Value | None, size: int, shape: list[int]
) -> list[int]:
    if zero_point is not None and math.prod(shape_of(zero_point)) not in (1, size):
        raise b.fail(
            f"zero point of shape {rules.format_shape(shape_of(zero_point))}: expected one "
            f"value or {size}"
        )
    return shape


def _integer_matmul(
    b: Builder, a: Value, a_zp: Value | None, c: Value, c_zp: Value | None
) -> Value:
    """(a - a_zp) @ (c - c_zp) in int32; a per-row a_zp and a per-column c_zp (ONNX)."""
    for value, what in ((a, "A"), (c, "B")):
        _check_integer_input(b, value, what, tuple(_RANGES))
    a_shape, c_shape = shape_of(a), shape_of(c)
    if len(a_shape) < 1 or len(c_shape) < 1:
        raise b.fail("MatMul operands must have rank >= 1")
    rows = a_shape[-2] if len(a_shape) > 1 else 1
    a_zp_shape = _zero_point_shape(b, a_zp, rows, [rows, 1])
    c_zp_shape = _zero_point_shape(b, c_zp, c_shape[-1], [c_shape[-1]])
    lhs = _as_int32(b, a, a_zp, a_zp_shape)
    rhs = _as_int32(b, c, c_zp, c_zp_shape)
    return onnx_nn.matmul(b, [lhs, rhs], {})[0]


@converter("MatMulInteger")
def _matmul_integer(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    a, c = required(inputs), required(inputs, 1)
    return [_integer_matmul(b, a, optional(inputs, 2), c, optional(inputs, 3))]


def _integer_conv(
    b: Builder, x: Value, x_zp: Value | None, w: Value, w_zp: Value | None, attrs: Attrs
) -> Value:
    """ONNX Conv of (x - x_zp) and (w - w_zp) in int32 (w_zp per output channel)."""
    for value, what in ((x, "x"), (w, "w")):
        _check_integer_input(b, value, what, tuple(_RANGES))
    if x_zp is not None and math.prod(shape_of(x_zp)) != 1:
        raise b.fail("x zero point must be one value (per-tensor)")
    rank = len(shape_of(w))
    channels = shape_of(w)[0]
    w_zp_shape = _zero_point_shape(b, w_zp, channels, [channels, *[1] * (rank - 1)])
    xi = _as_int32(b, x, x_zp, [])
    wi = _as_int32(b, w, w_zp, w_zp_shape)
    # Padding reads the zero point, which is 0 once subtracted.
    conv_attrs = {k: v for k, v in attrs.items() if k != "kernel_shape"}
    return onnx_nn.conv(b, [xi, wi], conv_attrs)[0]


@converter("ConvInteger")
def _conv_integer(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, w = required(inputs), required(inputs, 1)
    return [_integer_conv(b, x, optional(inputs, 2), w, optional(inputs, 3), attrs)]


def _scalar_scale(b: Builder, scale: Value, what: str) -> Value:
    if math.prod(shape_of(scale)) != 1:
        raise b.fail(f"{what} must be one value (per-tensor)")
    return b.reshape(scale, [])


def _requantize(
    b: Builder,
    accumulated: Value,
    multiplier: Value,
    zero_point: Value | None,
    target: Attribute,
) -> Value:
    """saturate(round(accumulated * multiplier + zero_point)) computed in f64 (the
    reference's int32 * float promotion), cast to `target`."""
    value = b.binary(graph.MulOp, b.cast(accumulated, F64), b.cast(multiplier, F64))
    if zero_point is not None:
        value = b.binary(graph.AddOp, value, b.cast(zero_point, F64))
    low, high = _RANGES[target]
    value = b.binary(graph.MaxOp, value, np.array(low, np.float64))
    value = b.binary(graph.MinOp, value, np.array(high, np.float64))
    return b.cast(b.unary(graph.RoundOp, value), target)


def _scale_ratio(b: Builder, first: Value, second: Value, output: Value) -> Value:
    """first * second / output in the scales' promoted type, as the reference forms it."""
    element = _promoted(_promoted(_element(b, first), _element(b, second)), _element(b, output))
    product = b.binary(graph.MulOp, b.cast(first, element), b.cast(second, element))
    return b.binary(graph.DivOp, product, b.cast(output, element))


def _output_type(b: Builder, zero_point: Value | None, like: Value) -> Attribute:
    element = _element(b, zero_point if zero_point is not None else like)
    if element not in _RANGES:
        raise b.fail(f"output type {element} is not supported (only u8/i8/u16/i16)")
    return element


@converter("QLinearMatMul")
def _qlinear_matmul(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    a, a_scale, a_zp = required(inputs), required(inputs, 1), optional(inputs, 2)
    c, c_scale, c_zp = required(inputs, 3), required(inputs, 4), optional(inputs, 5)
    y_scale, y_zp = required(inputs, 6), optional(inputs, 7)
    target = _output_type(b, y_zp, a)
    scales = [_scalar_scale(b, s, w) for s, w in ((a_scale, "a_scale"), (y_scale, "y_scale"))]
    c_shape = shape_of(c)
    if math.prod(shape_of(c_scale)) == 1:
        c_scale = b.reshape(c_scale, [])
    else:  # per output column
        c_scale = b.reshape(c_scale, [c_shape[-1]])
    accumulated = _integer_matmul(b, a, a_zp, c, c_zp)
    ratio = _scale_ratio(b, scales[0], c_scale, scales[1])
    if y_zp is not None:
        y_zp = b.reshape(_scalar_scale(b, y_zp, "y_zero_point"), [])
    return [_requantize(b, accumulated, ratio, y_zp, target)]


@converter("QLinearConv")
def _qlinear_conv(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, x_scale, x_zp = required(inputs), required(inputs, 1), optional(inputs, 2)
    w, w_scale, w_zp = required(inputs, 3), required(inputs, 4), optional(inputs, 5)
    y_scale, y_zp, bias = required(inputs, 6), optional(inputs, 7), optional(inputs, 8)
    target = _output_type(b, y_zp, x)
    x_scale = _scalar_scale(b, x_scale, "x_scale")
    y_scale = _scalar_scale(b, y_scale, "y_scale")
    rank = len(shape_of(x))
    channels = shape_of(w)[0]
    if math.prod(shape_of(w_scale)) == 1:
        w_scale = b.reshape(w_scale, [])
    elif math.prod(shape_of(w_scale)) == channels:
        w_scale = b.reshape(w_scale, [channels, *[1] * (rank - 2)])
    else:
        raise b.fail(f"w_scale has {math.prod(shape_of(w_scale))} values for {channels} channels")
    accumulated = _integer_conv(b, x, x_zp, w, w_zp, attrs)
    if bias is not None:
        _check_integer_input(b, bias, "B", (I32,))
        accumulated = onnx_nn.add_bias(b, accumulated, bias)
    if y_zp is not None:
        y_zp = _scalar_scale(b, y_zp, "y_zero_point")
    return [_requantize(b, accumulated, _scale_ratio(b, x_scale, w_scale, y_scale), y_zp, target)]


# ---- dynamic quantization -------------------------------------------------------------------


@converter("DynamicQuantizeLinear")
def _dynamic_quantize_linear(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """uint8 quantization over x's range widened to hold 0: scale = (max - min) / 255 (1
    when equal), zero point = saturate(round(-min / scale)), y = saturate(round(x / scale)
    + zero point), as ONNX's function body computes it (in f32)."""
    x = required(inputs)
    if _element(b, x) != F32:
        raise b.fail(f"x of type {_element(b, x)} is not supported (float32 only)")
    axes = list(range(len(shape_of(x))))
    high = b.binary(graph.MaxOp, _reduce(b, graph.ReduceMaxOp, x, axes), np.array(0, np.float32))
    low = b.binary(graph.MinOp, _reduce(b, graph.ReduceMinOp, x, axes), np.array(0, np.float32))
    spread = b.binary(graph.SubOp, high, low)
    equal = b.compare("eq", spread, np.array(0, np.float32))
    spread = b.op(graph.SelectOp, [equal, np.array(1, np.float32), spread], [], F32)
    scale = b.binary(graph.DivOp, spread, np.array(255, np.float32))
    initial = b.binary(graph.SubOp, np.array(0, np.float32), b.binary(graph.DivOp, low, scale))
    initial = b.binary(
        graph.MinOp,
        b.binary(graph.MaxOp, initial, np.array(0, np.float32)),
        np.array(255, np.float32),
    )
    u8 = IntegerType(8, Signedness.UNSIGNED)
    zero_point = b.cast(b.unary(graph.RoundOp, initial), u8)
    ratio = b.binary(graph.DivOp, x, scale)
    return [_round_clamp_cast(b, ratio, zero_point, u8), scale, zero_point]


def _reduce(b: Builder, op_type: type[graph.ReduceOp], x: Value, axes: list[int]) -> Value:
    if not axes:
        return x
    return b.reduce(op_type, x, axes, False)
