"""TOSA matmul, convolutions and pooling as graph-dialect ops.

TOSA lays images out NHWC with OHWI (conv2d) and [KH, KW, C, M] (depthwise) weights; the
graph dialect's convolution and pooling are NCHW with OIHW weights. Each op becomes a
transpose to NCHW, the graph op, the bias (added in NCHW, where it fuses into the
convolution's kernel) and a transpose back; graph-simplify composes the transposes
between consecutive convolutions away. Known weights are transposed in NumPy at import.
TOSA pads [top, bottom, left, right]; the graph dialect [top, left, bottom, right].
Only float models are taken: an integer convolution or matmul is quantised arithmetic
(i8 in, i32 accumulated) that the graph dialect's same-type ops do not express.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import AnyFloat
from xdsl.ir import Attribute

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Value, element_of, i64_array, i64_attr, shape_of
from graphfuse.frontend.tosa.tosa_builder import TosaOp
from graphfuse.frontend.tosa.tosa_elementwise import Converter

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


def _float_only(op: TosaOp) -> None:
    element = element_of(op.operands[0], "")
    if not isinstance(element, AnyFloat):
        raise op.fail(
            f"on {element} is quantised arithmetic, which graphfuse does not import "
            "(float TOSA only)"
        )


def _graph_padding(tosa_pad: Sequence[int]) -> list[int]:
    top, bottom, left, right = tosa_pad
    return [top, left, bottom, right]


def _matmul(op: TosaOp) -> list[Value]:
    """[N, H, C] x [N, C, W] -> [N, H, W]; the zero points must be 0."""
    _float_only(op)
    for index, what in ((2, "a_zp"), (3, "b_zp")):
        if len(op.operands) > index:
            op.require_zero(index, what)
    a, b = op.operands[0], op.operands[1]
    shape = rules.matmul_shape(shape_of(a), shape_of(b))
    return [op.builder.op(graph.MatmulOp, [a, b], shape)]


def _convolve(op: TosaOp, weight: Value, groups: int) -> list[Value]:
    """The NCHW convolution of operand 0 with an OIHW weight, plus operand 2 (bias)."""
    _float_only(op)
    op.require_zero(3, "input_zp")
    op.require_zero(4, "weight_zp")
    b = op.builder
    x = b.known_transpose(op.operands[0], TO_NCHW)
    strides, dilations = op.ints("stride"), op.ints("dilation")
    padding = _graph_padding(op.ints("pad"))
    shape = rules.conv2d_shape(shape_of(x), shape_of(weight), strides, padding, dilations, groups)
    result: Value = b.op(
        graph.Conv2dOp,
        [x, weight],
        shape,
        strides=i64_array(strides),
        padding=i64_array(padding),
        dilations=i64_array(dilations),
        groups=i64_attr(groups),
    )
    bias = op.operands[2]
    if not (isinstance(bias, np.ndarray) and not bias.any()):
        bias = b.reshape(bias, [1, shape_of(bias)[0], 1, 1])
        result = b.binary(graph.AddOp, result, bias)
    return [b.known_transpose(result, TO_NHWC)]


def _conv2d(op: TosaOp) -> list[Value]:
    """NHWC input, OHWI weight, bias [O] (or [1], broadcast)."""
    weight = op.builder.known_transpose(op.operands[1], TO_NCHW)
    return _convolve(op, weight, 1)


def _depthwise_conv2d(op: TosaOp) -> list[Value]:
    """Weight [KH, KW, C, M]: output channel c*M + m convolves input channel c alone, so
    a grouped convolution (groups C) with weight [C*M, 1, KH, KW]."""
    b = op.builder
    kh, kw, c, m = shape_of(op.operands[1])
    weight = b.reshape(op.operands[1], [kh, kw, 1, c * m])
    return _convolve(op, b.known_transpose(weight, (3, 2, 0, 1)), c)


def _pool(op: TosaOp, op_type: type[graph.Pool2dOp]) -> list[Value]:
    b = op.builder
    x = b.known_transpose(op.operands[0], TO_NCHW)
    kernel, strides = op.ints("kernel"), op.ints("stride")
    padding = _graph_padding(op.ints("pad"))
    shape = rules.pool2d_shape(shape_of(x), kernel, strides, padding)
    properties: dict[str, Attribute] = {
        "kernel": i64_array(kernel),
        "strides": i64_array(strides),
        "padding": i64_array(padding),
    }
    result = b.op(op_type, [x], shape, **properties)
    return [b.known_transpose(result, TO_NHWC)]


def _max_pool2d(op: TosaOp) -> list[Value]:
    """Padded positions never win (TOSA pads with the lowest value)."""
    return _pool(op, graph.MaxPool2dOp)


def _avg_pool2d(op: TosaOp) -> list[Value]:
    """TOSA divides by the window's positions inside the input (padding not counted),
    graph.avg_pool2d's default."""
    _float_only(op)
    for index, what in ((1, "input_zp"), (2, "output_zp")):
        if len(op.operands) > index:
            op.require_zero(index, what)
    return _pool(op, graph.AvgPool2dOp)


CONVERTERS: dict[str, Converter] = {
    "tosa.matmul": _matmul,
    "tosa.conv2d": _conv2d,
    "tosa.depthwise_conv2d": _depthwise_conv2d,
    "tosa.max_pool2d": _max_pool2d,
    "tosa.avg_pool2d": _avg_pool2d,
}
