"""Builders of ATen's matmul, convolution, pooling, normalisation and embedding ops.

Convolution and pooling go through the ONNX front end's converters (onnx_nn: Conv,
MaxPool, AveragePool), which already put every case graph.conv2d and the pooling ops do
not cover natively (1-D, 3-D, dilated pooling) onto graph ops; an ATen call only has to
spell its attributes the ONNX way. Normalisations become the compound graph ops
(layer_norm, batch_norm), which graph-decompose opens and graph-fuse stitches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Builder, Value, f64_attr, i64_attr, shape_of
from graphfuse.frontend.onnx_ops import CONVERTERS
from graphfuse.frontend.torch_fx.aten_call import NUMPY_DTYPES, Call, int_list

# ---- matmul ---------------------------------------------------------------------------


def _merged_from(value: Value, kept: int) -> Value:
    """`value`, or the tensor a chain of reshapes made it from by merging leading dims
    only (its last `kept` dims unchanged)."""
    while isinstance(value, SSAValue) and isinstance(value.owner, graph.ReshapeOp):
        source = value.owner.input
        if shape_of(source)[-kept:] != shape_of(value)[-kept:]:
            break
        value = source
    return value


def _product(b: Builder, lhs: Value, rhs: Value, shape: Sequence[int]) -> Value:
    """lhs @ rhs with torch's flattening undone: ATen computes a linear layer on [B, T, K]
    as a 2-D mm of its [B*T, K] view, and attention's bmm on [B*H, T, K] views. graphfuse
    fuses the producers of a matmul's operands into it, and reads a transpose through a
    merge of dims slower than the batched form (the ONNX import's), so the matmul takes
    the unmerged tensors and its result is reshaped to torch's shape."""
    rank = len(shape_of(lhs))
    source = _merged_from(lhs, 1)
    if rank == 3:
        source = _merged_from(lhs, 2)
        right = _merged_from(rhs, 2)
        if shape_of(source)[:-2] != shape_of(right)[:-2]:
            source, right = lhs, rhs
        rhs = right
    elif len(shape_of(rhs)) != 2:
        source = lhs
    product = b.op(
        graph.MatmulOp, [source, rhs], rules.matmul_shape(shape_of(source), shape_of(rhs))
    )
    return b.reshape(product, shape)


def matmul(b: Builder, call: Call) -> Value:
    """mm and bmm."""
    return _product(b, call.args[0], call.args[1], call.shape)


def addmm(b: Builder, call: Call) -> Value:
    """addmm(bias, a, b, beta=1, alpha=1) = beta * bias + alpha * (a @ b)."""
    bias, lhs, rhs = call.args[0], call.args[1], call.args[2]
    product: Value = _product(b, lhs, rhs, call.shape)
    alpha, beta = call.kwargs.get("alpha", 1), call.kwargs.get("beta", 1)
    if alpha != 1:
        product = b.binary(graph.MulOp, product, call.scalar(alpha))
    if beta == 0:
        return product
    if beta != 1:
        bias = b.binary(graph.MulOp, bias, call.scalar(beta))
    return b.binary(graph.AddOp, product, bias)


# ---- convolution and pooling ----------------------------------------------------------


def _onnx_pads(padding: Sequence[int]) -> list[int]:
    """ATen's symmetric padding per spatial dim as ONNX pads (all begins, then all ends)."""
    return [*padding, *padding]


def convolution(b: Builder, call: Call) -> Value:
    """convolution(x, w, bias, stride, padding, dilation, transposed=False, output_padding,
    groups) as ONNX Conv."""
    x, w, bias = call.args[0], call.args[1], call.args[2]
    spatial = len(shape_of(x)) - 2
    attrs = {
        "strides": int_list(call.args[3], spatial),
        "pads": _onnx_pads(int_list(call.args[4], spatial)),
        "dilations": int_list(call.args[5], spatial),
        "group": int(call.args[8]),
    }
    return CONVERTERS["Conv"](b, [x, w, bias], attrs)[0]


def not_transposed(node: Any) -> bool:
    return not node.args[6]


def _pool_attrs(call: Call, kernel: list[int]) -> dict[str, Any]:
    stride = call.arg(2, "stride") or kernel
    return {
        "kernel_shape": kernel,
        "strides": int_list(stride, len(kernel)),
        "pads": _onnx_pads(int_list(call.arg(3, "padding", 0), len(kernel))),
    }


def max_pool(b: Builder, call: Call) -> tuple[Value, ...]:
    """max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode=False): the
    values only (inference never reads the indices)."""
    kernel = int_list(call.args[1], 2)
    attrs = {**_pool_attrs(call, kernel), "dilations": int_list(call.arg(4, "dilation", 1), 2)}
    return (CONVERTERS["MaxPool"](b, [call.args[0]], attrs)[0],)


def avg_pool(b: Builder, call: Call) -> Value:
    """avg_pool2d(x, kernel, stride, padding, ceil_mode=False, count_include_pad=True,
    divisor_override=None)."""
    kernel = int_list(call.args[1], 2)
    attrs = _pool_attrs(call, kernel)
    attrs["count_include_pad"] = int(bool(call.arg(5, "count_include_pad", True)))
    return CONVERTERS["AveragePool"](b, [call.args[0]], attrs)[0]


def adaptive_avg_pool(b: Builder, call: Call) -> Value:
    """_adaptive_avg_pool2d where each output cell averages an equal, disjoint window."""
    x = call.args[0]
    spatial = shape_of(x)[2:]
    out = int_list(call.args[1], 2)
    if list(out) == [1, 1]:
        return b.reduce(graph.ReduceMeanOp, x, [2, 3], True)
    kernel = [s // o for s, o in zip(spatial, out, strict=True)]
    attrs = {"kernel_shape": kernel, "strides": kernel, "pads": [0, 0, 0, 0]}
    return CONVERTERS["AveragePool"](b, [x], attrs)[0]


def pool_without_ceil(node: Any) -> bool:
    """ceil_mode (argument 5 of max_pool2d_with_indices, 4 of avg_pool2d) is False and
    avg_pool2d has no divisor_override."""
    is_max = "max_pool" in str(node.target)
    ceil_at = 5 if is_max else 4
    ceil = node.args[ceil_at] if len(node.args) > ceil_at else node.kwargs.get("ceil_mode", False)
    divisor = None if is_max or len(node.args) <= 6 else node.args[6]
    return not ceil and divisor is None and node.kwargs.get("divisor_override") is None


def equal_windows(node: Any) -> bool:
    """An adaptive pooling whose windows are equal and disjoint (input a multiple of the
    output)."""
    source = node.args[0].meta.get("val")
    if source is None or source.dim() != 4:
        return False
    out = int_list(node.args[1], 2)
    return all(int(s) % o == 0 for s, o in zip(source.shape[2:], out, strict=True))


# ---- normalisation ----------------------------------------------------------------------


def _ones_or(value: Value | None, count: Sequence[int], call: Call, fill: float) -> Value:
    if value is not None:
        return value
    return np.full(count, fill, NUMPY_DTYPES[call.dtype])


def layer_norm(b: Builder, call: Call) -> tuple[Value, ...]:
    """native_layer_norm(x, normalized_shape, weight, bias, eps) -> (out, mean, rstd); only
    `out` is computed."""
    x, normalized = call.args[0], list(call.args[1])
    scale = _ones_or(call.args[2], normalized, call, 1.0)
    bias = _ones_or(call.args[3], normalized, call, 0.0)
    axis = len(shape_of(x)) - len(normalized)
    out = b.op(
        graph.LayerNormOp,
        [x, scale, bias],
        call.shape,
        axis=i64_attr(axis),
        epsilon=f64_attr(call.args[4]),
    )
    return (out,)


def batch_norm(b: Builder, call: Call) -> tuple[Value, ...]:
    """_native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var,
    momentum, eps) -> (out, ...); only `out` is computed."""
    x = call.args[0]
    channels = [shape_of(x)[1]]
    scale = _ones_or(call.args[1], channels, call, 1.0)
    bias = _ones_or(call.args[2], channels, call, 0.0)
    out = b.op(
        graph.BatchNormOp,
        [x, scale, bias, call.args[3], call.args[4]],
        call.shape,
        epsilon=f64_attr(call.args[6]),
    )
    return (out,)


def embedding(b: Builder, call: Call) -> Value:
    """embedding(weight, indices, ...): rows of the table (padding_idx only matters for
    gradients)."""
    return CONVERTERS["Gather"](b, [call.args[0], call.args[1]], {"axis": 0})[0]
