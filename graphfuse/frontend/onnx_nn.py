"""ONNX matmul, convolution and pooling operators as graph-dialect ops."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Attribute

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    i64_array,
    i64_attr,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    Attrs,
    Inputs,
    converter,
    optional,
    required,
)

# ---- matmul, conv, pooling --------------------------------------------------------------


@converter("MatMul")
def _matmul(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """numpy.matmul: a 1-D operand is a matrix with a unit dimension put in front (lhs) or
    after (rhs) and taken out of the result again, as graph.matmul needs rank >= 2."""
    lhs, rhs = required(inputs, 0), required(inputs, 1)
    lhs_vector, rhs_vector = len(shape_of(lhs)) == 1, len(shape_of(rhs)) == 1
    if lhs_vector:
        lhs = b.reshape(lhs, [1, *shape_of(lhs)])
    if rhs_vector:
        rhs = b.reshape(rhs, [*shape_of(rhs), 1])
    shape = rules.matmul_shape(shape_of(lhs), shape_of(rhs))
    result = b.op(graph.MatmulOp, [lhs, rhs], shape)
    added = {len(shape) - 2} if lhs_vector else set[int]()
    added |= {len(shape) - 1} if rhs_vector else set()
    return [b.reshape(result, [d for i, d in enumerate(shape) if i not in added])]


@converter("Gemm")
def _gemm(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    a, w, c = required(inputs, 0), required(inputs, 1), optional(inputs, 2)
    if attrs.get("transA", 0):
        a = b.transpose(a, [1, 0])
    if attrs.get("transB", 0):
        w = b.transpose(w, [1, 0])
    result: Value = b.op(graph.MatmulOp, [a, w], rules.matmul_shape(shape_of(a), shape_of(w)))
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        result = b.binary(graph.MulOp, result, np.array(alpha, np.float32))
    if c is not None:
        if beta != 1.0:
            c = b.binary(graph.MulOp, c, np.array(beta, np.float32))
        result = b.binary(graph.AddOp, result, c)
    return [result]


def _window_padding(
    b: Builder,
    attrs: Attrs,
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """graphfuse's [top, left, bottom, right] from ONNX pads or auto_pad."""
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("NOTSET", "VALID"):
        pads = list(attrs.get("pads", [0, 0, 0, 0])) if auto_pad == "NOTSET" else [0] * 4
        return [pads[0], pads[1], pads[2], pads[3]]
    begin: list[int] = []
    end: list[int] = []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = math.ceil(size / s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return [begin[0], begin[1], end[0], end[1]]


def _require_2d(b: Builder, x: Value) -> tuple[int, ...]:
    shape = shape_of(x)
    if len(shape) != 4:
        raise b.fail(f"{b.op_type} on a rank-{len(shape)} input: only 2-D (NCHW) is supported")
    return shape


@converter("Conv")
def _conv(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, w, bias = required(inputs, 0), required(inputs, 1), optional(inputs, 2)
    shape = _require_2d(b, x)
    kernel = shape_of(w)[2:]
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    groups = int(attrs.get("group", 1))
    padding = _window_padding(b, attrs, shape[2:], kernel, strides, dilations)
    out = rules.conv2d_shape(shape, shape_of(w), strides, padding, dilations, groups)
    result: Value = b.op(
        graph.Conv2dOp,
        [x, w],
        out,
        strides=i64_array(strides),
        padding=i64_array(padding),
        dilations=i64_array(dilations),
        groups=i64_attr(groups),
    )
    if bias is not None:
        result = b.binary(graph.AddOp, result, b.reshape(bias, [shape_of(bias)[0], 1, 1]))
    return [result]


def _pool(b: Builder, inputs: Inputs, attrs: Attrs, op_type: type[graph.Pool2dOp]) -> Value:
    x = required(inputs)
    shape = _require_2d(b, x)
    if attrs.get("ceil_mode", 0):
        raise b.fail("ceil_mode=1 is not supported")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise b.fail("pooling with dilations is not supported")
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1, 1]))
    padding = _window_padding(b, attrs, shape[2:], kernel, strides, [1, 1])
    out = rules.pool2d_shape(shape, kernel, strides, padding)
    properties: dict[str, Attribute] = {
        "kernel": i64_array(kernel),
        "strides": i64_array(strides),
        "padding": i64_array(padding),
    }
    if op_type is graph.AvgPool2dOp and attrs.get("count_include_pad", 0):
        properties["count_include_pad"] = UnitAttr()
    return b.op(op_type, [x], out, **properties)


@converter("MaxPool")
def _max_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    if len(b.outputs) > 1 and b.outputs[1]:
        raise b.fail("MaxPool's Indices output is not supported")
    return [_pool(b, inputs, attrs, graph.MaxPool2dOp)]


@converter("AveragePool")
def _avg_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [_pool(b, inputs, attrs, graph.AvgPool2dOp)]


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    axes = list(range(2, len(shape_of(x))))
    op_type = graph.ReduceMeanOp if b.op_type == "GlobalAveragePool" else graph.ReduceMaxOp
    return [b.reduce(op_type, x, axes, True)]
