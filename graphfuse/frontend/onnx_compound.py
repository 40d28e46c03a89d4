"""ONNX compound operators (softmax, normalizations, gelu) and reductions as graph ops;
compound ops are opened into primitives later, by the front-end rewrites."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerType

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    element_type_of,
    f64_attr,
    i64_attr,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    CONVERTERS,
    Attrs,
    Converter,
    Inputs,
    converter,
    optional,
    required,
)

# ---- compound ---------------------------------------------------------------------------


@converter("Softmax", "LogSoftmax")
def _softmax(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    op_type = graph.SoftmaxOp if b.op_type == "Softmax" else graph.LogSoftmaxOp
    axis = rules.normalize_axis(attrs.get("axis", -1), len(shape_of(x)))
    return [b.op(op_type, [x], shape_of(x), axis=i64_attr(axis))]


@converter("LayerNormalization")
def _layer_norm(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, scale, bias = required(inputs), required(inputs, 1), optional(inputs, 2)
    shape = shape_of(x)
    axis = rules.normalize_axis(attrs.get("axis", -1), len(shape))
    normalized = shape[axis:]
    if shape_of(scale) != normalized:
        scale = b.op(graph.BroadcastToOp, [scale], normalized)
    if bias is None:
        bias = np.zeros(normalized, np.float32)
    elif shape_of(bias) != normalized:
        bias = b.op(graph.BroadcastToOp, [bias], normalized)
    element = element_of(x, f"node {b.node}")  # a default bias is float32, x may not be
    scale, bias = b.cast(scale, element), b.cast(bias, element)
    epsilon = float(attrs.get("epsilon", 1e-5))
    normed = b.op(
        graph.LayerNormOp, [x, scale, bias], shape, axis=i64_attr(axis), epsilon=f64_attr(epsilon)
    )
    if not any(b.outputs[1:]):
        return [normed]
    return [normed, *_layer_norm_statistics(b, x, axis, epsilon, attrs)]


def _layer_norm_statistics(
    b: Builder, x: Value, axis: int, epsilon: float, attrs: Attrs
) -> list[Value]:
    """LayerNormalization's optional Mean and InvStdDev outputs, made only when the model
    reads them: x's mean and 1/sqrt(var + epsilon) over the normalized axes, kept as unit
    dimensions, computed in stash_type (float unless it says otherwise) as ONNX specifies.
    graph.layer_norm computes them too but does not return them."""
    from onnx import helper

    stash = np.dtype(helper.tensor_dtype_to_np_dtype(attrs.get("stash_type", 1)))
    stashed = b.cast(x, element_type_of(stash, f"node {b.node}: stash_type"))
    axes = list(range(axis, len(shape_of(x))))
    mean = b.reduce(graph.ReduceMeanOp, stashed, axes, True)
    centered = b.binary(graph.SubOp, stashed, mean)
    variance = b.reduce(graph.ReduceMeanOp, b.binary(graph.MulOp, centered, centered), axes, True)
    shifted = b.binary(graph.AddOp, variance, np.array(epsilon, stash))
    return [mean, b.binary(graph.DivOp, np.ones((), stash), b.unary(graph.SqrtOp, shifted))]


@converter("BatchNormalization")
def _batch_norm(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    epsilon = f64_attr(attrs.get("epsilon", 1e-5))
    # ONNX types scale and bias (T1), mean and var (T2) apart from x; graph.batch_norm
    # takes one element type, x's.
    element = element_of(x, f"node {b.node}")
    operands = [x, *(b.cast(required(inputs, i), element) for i in range(1, 5))]
    if attrs.get("training_mode", 0):
        return _batch_norm_training(b, operands, epsilon, float(attrs.get("momentum", 0.9)))
    return [b.op(graph.BatchNormOp, operands, shape_of(x), epsilon=epsilon)]


def _batch_norm_training(
    b: Builder, operands: list[Value], epsilon: FloatAttr, momentum: float
) -> list[Value]:
    """Training mode (ONNX opset 14+): Y normalizes x by the batch's own statistics (mean
    and population variance over every axis but the channel axis 1), and the running
    statistics come out as input * momentum + batch statistic * (1 - momentum)."""
    x, scale, bias, mean, var = operands
    shape = shape_of(x)
    if len(shape) < 2:
        raise b.fail(f"BatchNormalization needs an input of rank >= 2, got {len(shape)}")
    axes = [a for a in range(len(shape)) if a != 1]
    batch_mean = b.reduce(graph.ReduceMeanOp, x, axes, False)
    channel_shape = [1, shape[1], *[1] * (len(shape) - 2)]
    centered = b.binary(graph.SubOp, x, b.reshape(batch_mean, channel_shape))
    squares = b.binary(graph.MulOp, centered, centered)
    batch_var = b.reduce(graph.ReduceMeanOp, squares, axes, False)
    normed = b.op(
        graph.BatchNormOp, [x, scale, bias, batch_mean, batch_var], shape, epsilon=epsilon
    )
    dtype = numpy_dtype(element_of(x, f"node {b.node}"))
    keep, take = np.array(momentum, dtype), np.array(1.0 - momentum, dtype)

    def running(old: Value, batch: Value) -> Value:
        return b.binary(
            graph.AddOp, b.binary(graph.MulOp, old, keep), b.binary(graph.MulOp, batch, take)
        )

    return [normed, running(mean, batch_mean), running(var, batch_var)]


# ---- reductions -------------------------------------------------------------------------

_REDUCE: dict[str, type[graph.ReduceOp]] = {
    "ReduceMean": graph.ReduceMeanOp,
    "ReduceSum": graph.ReduceSumOp,
    "ReduceMax": graph.ReduceMaxOp,
    "ReduceMin": graph.ReduceMinOp,
}


def _reduce_converter(op_type: type[graph.ReduceOp]) -> Converter:
    def convert(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
        x = required(inputs)
        axes_input = optional(inputs, 1)
        from_attr = list(attrs.get("axes", []))
        axes = b.ints(axes_input, "axes") if axes_input is not None else from_attr
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(len(shape_of(x))))
        return [_reduce(b, op_type, x, axes, bool(attrs.get("keepdims", 1)))]

    return convert


def _reduce(
    b: Builder, op_type: type[graph.ReduceOp], x: Value, axes: Sequence[int], keepdims: bool
) -> Value:
    """ReduceMax/ReduceMin of booleans (opset 20) are any/all: the same reduction over 0/1
    as i32, since graph reductions take no i1."""
    element = element_of(x, f"node {b.node}")
    if element != IntegerType(1) or op_type not in (graph.ReduceMaxOp, graph.ReduceMinOp):
        return b.reduce(op_type, x, axes, keepdims)
    reduced = b.reduce(op_type, b.cast(x, IntegerType(32)), axes, keepdims)
    return b.cast(reduced, element)


for _name, _op in _REDUCE.items():
    CONVERTERS[_name] = _reduce_converter(_op)
CONVERTERS["ReduceProd"] = _reduce_converter(graph.ReduceProdOp)
