"""ONNX operators (opset 13 and later) as graph-dialect ops, one converter per op type.

A converter gets the builder, the node's inputs (SSA tensors, known arrays, or None for an
omitted optional input) and its attributes, and returns one value per node output. Ops
whose inputs are all known never get here: the importer folds them with ONNX's reference
evaluator. Semantics follow the ONNX operator specification; where graphfuse has no
equivalent (a negative Slice step, Conv with auto_pad on a non-2-D input, ...) the
converter says so naming the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerType, UnitAttr
from xdsl.ir import Attribute, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    element_type_of,
    f64_attr,
    i64_array,
    i64_attr,
    shape_of,
)

Attrs = dict[str, Any]
Inputs = list[Value | None]
Converter = Callable[[Builder, Inputs, Attrs], list[Value]]

CONVERTERS: dict[str, Converter] = {}


def converter(*names: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
        return fn

    return register


def _x(inputs: Inputs, index: int = 0) -> Value:
    value = inputs[index] if index < len(inputs) else None
    assert value is not None, f"input #{index} is required"
    return value


def _optional(inputs: Inputs, index: int) -> Value | None:
    return inputs[index] if index < len(inputs) else None


# ---- elementwise ------------------------------------------------------------------------

_UNARY: dict[str, type[graph.UnaryOp]] = {
    "Relu": graph.ReluOp,
    "Sigmoid": graph.SigmoidOp,
    "Tanh": graph.TanhOp,
    "Erf": graph.ErfOp,
    "Exp": graph.ExpOp,
    "Log": graph.LogOp,
    "Sqrt": graph.SqrtOp,
    "Neg": graph.NegOp,
    "Abs": graph.AbsOp,
}


def _unary_converter(op_type: type[graph.UnaryOp]) -> Converter:
    return lambda b, inputs, attrs: [b.unary(op_type, _x(inputs))]


for _name, _op in _UNARY.items():
    CONVERTERS[_name] = _unary_converter(_op)

_BINARY: dict[str, type[graph.BinaryOp]] = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
}


def _binary_converter(op_type: type[graph.BinaryOp]) -> Converter:
    return lambda b, inputs, attrs: [b.binary(op_type, _x(inputs, 0), _x(inputs, 1))]


for _name, _op in _BINARY.items():
    CONVERTERS[_name] = _binary_converter(_op)


@converter("Pow")
def _pow(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """ONNX lets the exponent's type differ from the base's (x ** int64 n); graph.pow takes
    one element type, so the exponent follows the base (an integer base stays refused)."""
    base, exponent = _x(inputs, 0), _x(inputs, 1)
    exponent = b.cast(exponent, element_of(base, f"node {b.node}"))
    return [b.binary(graph.PowOp, base, exponent)]


def _variadic(op_type: type[graph.BinaryOp]) -> Converter:
    def convert(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
        result = _x(inputs, 0)
        for other in inputs[1:]:
            assert other is not None
            result = b.binary(op_type, result, other)
        return [result]

    return convert


CONVERTERS["Max"] = _variadic(graph.MaxOp)
CONVERTERS["Min"] = _variadic(graph.MinOp)
CONVERTERS["Sum"] = _variadic(graph.AddOp)

_COMPARE = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}


def _compare_converter(predicate: str) -> Converter:
    return lambda b, inputs, attrs: [b.compare(predicate, _x(inputs, 0), _x(inputs, 1))]


for _name, _predicate in _COMPARE.items():
    CONVERTERS[_name] = _compare_converter(_predicate)


@converter("Not")
def _not(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [b.compare("eq", _x(inputs), np.zeros((), np.bool_))]


@converter("And", "Or")
def _logical(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """a and b = select(a, b, false); a or b = select(a, true, b)."""
    a, c = _x(inputs, 0), _x(inputs, 1)
    if b.op_type == "And":
        chosen, other = c, np.zeros((), np.bool_)
    else:
        chosen, other = np.ones((), np.bool_), c
    shape = rules.broadcast_shapes(shape_of(a), shape_of(c))
    return [b.op(graph.SelectOp, [a, chosen, other], shape, element_of(c, b.node))]


@converter("IsNaN")
def _is_nan(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """x != x, written as (x == x) == false: graph.compare's float predicates are ordered."""
    x = _x(inputs)
    return [b.compare("eq", b.compare("eq", x, x), np.zeros((), np.bool_))]


@converter("Reciprocal")
def _reciprocal(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [b.binary(graph.DivOp, np.ones((), np.float32), _x(inputs))]


@converter("Where")
def _where(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    condition, a, c = _x(inputs, 0), _x(inputs, 1), _x(inputs, 2)
    a, c = b.same_element(a, c)
    if not isinstance(a, SSAValue) and not isinstance(c, SSAValue):
        a = b.tensor(a)
    shape = rules.broadcast_shapes(shape_of(condition), shape_of(a), shape_of(c))
    return [b.op(graph.SelectOp, [condition, a, c], shape, element_of(a, b.node))]


@converter("Clip")
def _clip(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    result = _x(inputs)
    low, high = _optional(inputs, 1), _optional(inputs, 2)
    if low is not None:
        result = b.binary(graph.MaxOp, result, low)
    if high is not None:
        result = b.binary(graph.MinOp, result, high)
    return [result]


@converter("Cast")
def _cast(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    from onnx import helper

    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    return [b.cast(_x(inputs), element_type_of(dtype, f"node {b.node}"))]


@converter("Identity", "Dropout")
def _identity(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [_x(inputs)]


@converter("Gelu")
def _gelu(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    attr = graph.GeluApproximationAttr(graph.GeluApproximation(approximate))
    x = _x(inputs)
    return [b.op(graph.GeluOp, [x], shape_of(x), approximate=attr)]


# ---- compound ---------------------------------------------------------------------------


@converter("Softmax", "LogSoftmax")
def _softmax(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    op_type = graph.SoftmaxOp if b.op_type == "Softmax" else graph.LogSoftmaxOp
    axis = rules.normalize_axis(attrs.get("axis", -1), len(shape_of(x)))
    return [b.op(op_type, [x], shape_of(x), axis=i64_attr(axis))]


@converter("LayerNormalization")
def _layer_norm(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, scale, bias = _x(inputs), _x(inputs, 1), _optional(inputs, 2)
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
    if attrs.get("training_mode", 0):
        raise b.fail("BatchNormalization in training mode is not supported (export in eval)")
    x = _x(inputs)
    epsilon = f64_attr(attrs.get("epsilon", 1e-5))
    # ONNX types scale and bias (T1), mean and var (T2) apart from x; graph.batch_norm
    # takes one element type, x's.
    element = element_of(x, f"node {b.node}")
    operands = [x, *(b.cast(_x(inputs, i), element) for i in range(1, 5))]
    return [b.op(graph.BatchNormOp, operands, shape_of(x), epsilon=epsilon)]


# ---- matmul, conv, pooling --------------------------------------------------------------


@converter("MatMul")
def _matmul(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """numpy.matmul: a 1-D operand is a matrix with a unit dimension put in front (lhs) or
    after (rhs) and taken out of the result again, as graph.matmul needs rank >= 2."""
    lhs, rhs = _x(inputs, 0), _x(inputs, 1)
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
    a, w, c = _x(inputs, 0), _x(inputs, 1), _optional(inputs, 2)
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
    x, w, bias = _x(inputs, 0), _x(inputs, 1), _optional(inputs, 2)
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
    x = _x(inputs)
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
    x = _x(inputs)
    axes = list(range(2, len(shape_of(x))))
    op_type = graph.ReduceMeanOp if b.op_type == "GlobalAveragePool" else graph.ReduceMaxOp
    return [b.reduce(op_type, x, axes, True)]


# ---- reductions -------------------------------------------------------------------------

_REDUCE: dict[str, type[graph.ReduceOp]] = {
    "ReduceMean": graph.ReduceMeanOp,
    "ReduceSum": graph.ReduceSumOp,
    "ReduceMax": graph.ReduceMaxOp,
    "ReduceMin": graph.ReduceMinOp,
}


def _reduce_converter(op_type: type[graph.ReduceOp]) -> Converter:
    def convert(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
        x = _x(inputs)
        axes_input = _optional(inputs, 1)
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


# ---- data movement ----------------------------------------------------------------------


@converter("Reshape")
def _reshape(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    target = b.ints(_x(inputs, 1), "the shape input")
    shape = shape_of(x)
    if not attrs.get("allowzero", 0):
        target = [shape[i] if t == 0 else t for i, t in enumerate(target)]
    if -1 in target:
        known = math.prod(t for t in target if t != -1)
        target[target.index(-1)] = math.prod(shape) // known if known else 0
    if math.prod(target) != math.prod(shape):
        raise b.fail(f"cannot reshape {rules.format_shape(shape)} to {target}")
    return [b.reshape(x, target)]


@converter("Flatten")
def _flatten(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    shape = shape_of(x)
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    return [b.reshape(x, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


def _axes(b: Builder, inputs: Inputs, attrs: Attrs) -> list[int] | None:
    if _optional(inputs, 1) is not None:
        return b.ints(inputs[1], "axes")
    return list(attrs["axes"]) if "axes" in attrs else None


@converter("Squeeze")
def _squeeze(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    shape = shape_of(x)
    axes = _axes(b, inputs, attrs)
    drop = (
        {rules.normalize_axis(a, len(shape)) for a in axes}
        if axes is not None
        else {i for i, d in enumerate(shape) if d == 1}
    )
    return [b.reshape(x, [d for i, d in enumerate(shape) if i not in drop])]


@converter("Unsqueeze")
def _unsqueeze(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    axes = _axes(b, inputs, attrs) or []
    rank = len(shape_of(x)) + len(axes)
    inserted = {rules.normalize_axis(a, rank) for a in axes}
    dims = iter(shape_of(x))
    return [b.reshape(x, [1 if i in inserted else next(dims) for i in range(rank)])]


@converter("Transpose")
def _transpose(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    perm = list(attrs.get("perm", reversed(range(len(shape_of(x))))))
    return [b.transpose(x, perm)]


@converter("Expand")
def _expand(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    target = rules.broadcast_shapes(shape_of(x), b.ints(_x(inputs, 1), "the shape input"))
    if target == shape_of(x):
        return [x]
    return [b.op(graph.BroadcastToOp, [x], target)]


@converter("Concat")
def _concat(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    values = [v for v in inputs if v is not None and math.prod(shape_of(v)) > 0]
    if len(values) == 1:
        return [values[0]]
    shape = rules.concat_shape([shape_of(v) for v in values], attrs["axis"])
    axis = rules.normalize_axis(attrs["axis"], len(shape))
    first = next((v for v in values if isinstance(v, SSAValue)), values[0])
    values = [b.same_element(first, v)[1] for v in values]
    return [b.op(graph.ConcatOp, values, shape, axis=i64_attr(axis))]


def _slice_value(
    b: Builder, x: Value, starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]
) -> Value:
    if list(sizes) == list(shape_of(x)):
        return x
    return b.op(graph.SliceOp, [x], sizes, starts=i64_array(starts), strides=i64_array(steps))


@converter("Slice")
def _slice(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    shape = list(shape_of(x))
    starts_in = b.ints(_x(inputs, 1), "starts")
    ends_in = b.ints(_x(inputs, 2), "ends")
    axes_in = b.ints(inputs[3], "axes") if _optional(inputs, 3) is not None else None
    steps_in = b.ints(inputs[4], "steps") if _optional(inputs, 4) is not None else None
    axes = axes_in if axes_in is not None else list(range(len(starts_in)))
    steps = steps_in if steps_in is not None else [1] * len(starts_in)
    starts, sizes, strides = [0] * len(shape), list(shape), [1] * len(shape)
    for axis, start, end, step in zip(axes, starts_in, ends_in, steps, strict=True):
        axis = rules.normalize_axis(axis, len(shape))
        if step < 1:
            raise b.fail(f"Slice step {step} on axis {axis}: only positive steps are supported")
        dim = shape[axis]
        start = min(max(start + dim if start < 0 else start, 0), dim)
        end = min(max(end + dim if end < 0 else end, 0), dim)
        starts[axis] = start
        sizes[axis] = max(0, -(-(end - start) // step))
        strides[axis] = step
    return [_slice_value(b, x, starts, sizes, strides)]


@converter("Split")
def _split(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = _x(inputs)
    shape = list(shape_of(x))
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape))
    if _optional(inputs, 1) is not None:
        parts = b.ints(inputs[1], "split")
    elif "split" in attrs:
        parts = list(attrs["split"])
    else:
        count = int(attrs.get("num_outputs", len(b.outputs)))
        chunk = -(-shape[axis] // count)
        parts = [min(chunk, shape[axis] - i * chunk) for i in range(count)]
    results: list[Value] = []
    offset = 0
    for size in parts:
        starts = [offset if i == axis else 0 for i in range(len(shape))]
        sizes = [size if i == axis else d for i, d in enumerate(shape)]
        results.append(_slice_value(b, x, starts, sizes, [1] * len(shape)))
        offset += size
    return results


@converter("Pad")
def _pad(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    mode = attrs.get("mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant":
        raise b.fail(f"Pad mode {mode!r} is not supported (only constant)")
    x = _x(inputs)
    rank = len(shape_of(x))
    pads = b.ints(_x(inputs, 1), "pads")
    value_input = _optional(inputs, 2)
    value = 0.0 if value_input is None else float(np.asarray(value_input).reshape(-1)[0])
    axes = b.ints(inputs[3], "axes") if _optional(inputs, 3) is not None else list(range(rank))
    low, high = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        axis = rules.normalize_axis(axis, rank)
        low[axis], high[axis] = pads[i], pads[i + len(axes)]
    if min(low + high) < 0:
        raise b.fail("negative pads are not supported")
    shape = rules.pad_shape(shape_of(x), low, high)
    return [
        b.op(
            graph.PadOp, [x], shape, low=i64_array(low), high=i64_array(high), value=f64_attr(value)
        )
    ]


def _take(b: Builder, data: Value, indices: Value, axis: int) -> Value:
    """numpy.take(data, indices, axis): a slice when the indices are a known range, else
    graph.gather."""
    shape = list(shape_of(data))
    out_shape = [*shape[:axis], *shape_of(indices), *shape[axis + 1 :]]
    if not isinstance(indices, SSAValue):
        flat = [i + shape[axis] if i < 0 else i for i in b.ints(indices, "indices")]
        if flat and flat == list(range(flat[0], flat[0] + len(flat))):
            starts = [flat[0] if i == axis else 0 for i in range(len(shape))]
            sizes = [len(flat) if i == axis else d for i, d in enumerate(shape)]
            return b.reshape(_slice_value(b, data, starts, sizes, [1] * len(shape)), out_shape)
    return b.op(graph.GatherOp, [data, indices], out_shape, axis=i64_attr(axis))


@converter("Gather")
def _gather(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    data, indices = _x(inputs, 0), _x(inputs, 1)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape_of(data)))
    return [_take(b, data, indices, axis)]


@converter("GatherND")
def _gather_nd(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Known index tuples into the leading k dims: one gather over those dims flattened."""
    data, indices = _x(inputs, 0), _x(inputs, 1)
    if attrs.get("batch_dims", 0):
        raise b.fail("GatherND with batch_dims is not supported")
    if isinstance(indices, SSAValue):
        raise b.fail("GatherND with computed indices is not supported")
    shape = shape_of(data)
    k = indices.shape[-1]
    leading = shape[:k]
    tuples = np.asarray(indices, np.int64).reshape(-1, k)
    tuples = np.where(tuples < 0, tuples + np.array(leading), tuples)
    linear = np.ravel_multi_index(tuple(tuples.T), leading) if k else np.zeros(len(tuples))
    flat = b.reshape(data, [int(np.prod(leading)), *shape[k:]])
    linear = np.asarray(linear, np.int64).reshape(indices.shape[:-1])
    return [_take(b, flat, linear, 0)]
