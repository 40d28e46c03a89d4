"""Builders of ATen's elementwise, shape, reduction and mask ops (see aten_table).

Shape ops take their result shape from torch's trace (a view's -1 is already resolved) and
fold on known arrays, so a frozen weight's transpose costs nothing at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    f64_attr,
    i64_array,
    i64_attr,
    shape_of,
)
from graphfuse.frontend.onnx_nn import strided_slice
from graphfuse.frontend.onnx_ops import CONVERTERS
from graphfuse.frontend.torch_fx.aten_call import (
    NUMPY_DTYPES,
    Build,
    Call,
    dims,
    element_of_dtype,
    is_value,
)

# ---- elementwise ----------------------------------------------------------------------


def unary(op_type: type[Operation]) -> Build:
    def build(b: Builder, call: Call) -> Value:
        return b.unary(op_type, call.args[0])

    return build


def operand(call: Call, value: Any) -> Value:
    """A tensor operand, or a Python scalar as a known array of the result's dtype."""
    return value if is_value(value) else call.scalar(value)


def binary(op_type: type[Operation]) -> Build:
    """add/sub (with `alpha` scaling the second operand), mul, div, maximum, ..."""

    def build(b: Builder, call: Call) -> Value:
        lhs, rhs = operand(call, call.args[0]), operand(call, call.args[1])
        alpha = call.arg(2, "alpha", 1)
        if alpha != 1:
            rhs = b.binary(graph.MulOp, rhs, call.scalar(alpha))
        return b.binary(op_type, lhs, rhs)

    return build


def compare(predicate: str) -> Build:
    def build(b: Builder, call: Call) -> Value:
        lhs: Value = call.args[0]
        rhs = call.args[1]
        right = rhs if is_value(rhs) else np.asarray(rhs, numpy_dtype(element_of(lhs, b.node)))
        return b.compare(predicate, lhs, right)

    return build


def logical_not(b: Builder, call: Call) -> Value:
    return b.compare("eq", call.args[0], np.asarray(False))


def where(b: Builder, call: Call) -> Value:
    condition: Value = call.args[0]
    on_true, on_false = operand(call, call.args[1]), operand(call, call.args[2])
    if isinstance(on_true, np.ndarray) and isinstance(on_false, SSAValue):
        on_true = b.known_as(on_true, on_false)
    elif isinstance(on_false, np.ndarray) and isinstance(on_true, SSAValue):
        on_false = b.known_as(on_false, on_true)
    if (
        isinstance(condition, np.ndarray)
        and isinstance(on_true, np.ndarray)
        and isinstance(on_false, np.ndarray)
    ):
        return np.where(condition, on_true, on_false)
    element = element_of(on_true, b.node)
    return b.op(graph.SelectOp, [condition, on_true, on_false], call.shape, element)


def gelu(b: Builder, call: Call) -> Value:
    approximate = graph.GeluApproximation(call.arg(1, "approximate", "none"))
    return b.op(
        graph.GeluOp,
        [call.args[0]],
        call.shape,
        approximate=graph.GeluApproximationAttr(approximate),
    )


def softmax(op_type: type[Operation]) -> Build:
    """_softmax / _log_softmax (x, dim, half_to_float)."""

    def build(b: Builder, call: Call) -> Value:
        rank = len(call.shape)
        axis = call.args[1] % rank if rank else 0
        return b.op(op_type, [call.args[0]], call.shape, axis=i64_attr(axis))

    return build


def clamp(b: Builder, call: Call) -> Value:
    """clamp(x, min, max) and hardtanh(x, min_val, max_val); either bound may be None."""
    x: Value = call.args[0]
    low, high = call.arg(1, "min"), call.arg(2, "max")
    if low is not None:
        x = b.binary(graph.MaxOp, x, operand(call, low))
    if high is not None:
        x = b.binary(graph.MinOp, x, operand(call, high))
    return x


def pow_scalar(b: Builder, call: Call) -> Value:
    x, exponent = call.args[0], call.args[1]
    if exponent == 2:
        return b.binary(graph.MulOp, x, x)
    if exponent == 0.5:
        return b.unary(graph.SqrtOp, x)
    return b.binary(graph.PowOp, x, call.scalar(exponent))


def identity(b: Builder, call: Call) -> Value:
    """clone, alias, contiguous: values have no layout in the graph dialect."""
    return call.args[0]


def to_copy(b: Builder, call: Call) -> Value:
    """_to_copy: a cast to the result's dtype (layout and device changes are no-ops)."""
    return b.cast(call.args[0], element_of_dtype(call.dtype, b.node))


def full(b: Builder, call: Call) -> Value:
    """full(size, value) / full_like(x, value): a known array."""
    return np.full(call.shape, call.args[1], NUMPY_DTYPES[call.dtype])


# ---- shape ----------------------------------------------------------------------------


def reshape(b: Builder, call: Call) -> Value:
    """view, _unsafe_view, reshape, squeeze, unsqueeze: the traced result shape."""
    return b.reshape(call.args[0], call.shape)


def permute(b: Builder, call: Call) -> Value:
    x = call.args[0]
    rank = len(shape_of(x))
    return b.transpose(x, [d % rank for d in call.args[1]])


def transpose_2d(b: Builder, call: Call) -> Value:
    """t(x): swap the two dims of a matrix (a vector stays)."""
    x = call.args[0]
    return b.transpose(x, [1, 0]) if len(shape_of(x)) == 2 else x


def expand(b: Builder, call: Call) -> Value:
    x: Value = call.args[0]
    if shape_of(x) == call.shape:
        return x
    if not isinstance(x, SSAValue):
        return np.broadcast_to(x, call.shape).copy()
    return b.op(graph.BroadcastToOp, [x], call.shape)


def _slice_bounds(size: int, start: int | None, end: int | None, step: int) -> tuple[int, int]:
    """Python's slice rules (what ATen's slice does): the first index and the count."""
    first, stop, _ = slice(start, end, step).indices(size)
    return first, len(range(first, stop, step))


def slice_tensor(b: Builder, call: Call) -> Value:
    """slice.Tensor(x, dim, start, end, step)."""
    x: Value = call.args[0]
    shape = shape_of(x)
    dim: int = call.arg(1, "dim", 0) % len(shape)
    step: int = call.arg(4, "step", 1)
    first, count = _slice_bounds(shape[dim], call.arg(2, "start"), call.arg(3, "end"), step)
    return _slice_dim(b, x, dim, first, count, step)


def _slice_dim(b: Builder, x: Value, dim: int, first: int, count: int, step: int) -> Value:
    shape = shape_of(x)
    starts, sizes, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], sizes[dim], strides[dim] = first, count, step
    return strided_slice(b, x, starts, sizes, strides)


def select(b: Builder, call: Call) -> Value:
    """select.int(x, dim, index): one slice, its dim dropped."""
    x: Value = call.args[0]
    shape = shape_of(x)
    dim: int = call.args[1] % len(shape)
    index: int = call.args[2] % shape[dim]
    return b.reshape(_slice_dim(b, x, dim, index, 1, 1), call.shape)


def split(b: Builder, call: Call) -> tuple[Value, ...]:
    """split.Tensor(x, size, dim) and split_with_sizes(x, sizes, dim)."""
    x: Value = call.args[0]
    shape = shape_of(x)
    dim: int = call.arg(2, "dim", 0) % len(shape)
    sizes: int | Sequence[int] = call.args[1]
    if isinstance(sizes, int):
        sizes = [min(sizes, shape[dim] - start) for start in range(0, shape[dim], sizes)]
    parts: list[Value] = []
    start = 0
    for size in sizes:
        parts.append(_slice_dim(b, x, dim, start, size, 1))
        start += size
    return tuple(parts)


def cat(b: Builder, call: Call) -> Value:
    values: list[Value] = list(call.args[0])
    axis = call.arg(1, "dim", 0) % len(call.shape)
    return CONVERTERS["Concat"](b, [*values], {"axis": axis})[0]


def constant_pad(b: Builder, call: Call) -> Value:
    """constant_pad_nd(x, pad, value): pad pairs from the last dim backwards."""
    x: Value = call.args[0]
    pad: Sequence[int] = call.args[1]
    rank = len(shape_of(x))
    low, high = [0] * rank, [0] * rank
    for pair in range(len(pad) // 2):
        low[rank - 1 - pair], high[rank - 1 - pair] = pad[2 * pair], pad[2 * pair + 1]
    value = float(call.arg(2, "value", 0.0))
    if not isinstance(x, SSAValue):
        return np.pad(x, list(zip(low, high, strict=True)), constant_values=value)
    return b.op(
        graph.PadOp,
        [x],
        call.shape,
        low=i64_array(low),
        high=i64_array(high),
        value=f64_attr(value),
    )


# ---- reductions -----------------------------------------------------------------------


def reduce(op_type: type[Operation], keepdim_at: int = 2) -> Build:
    """sum.dim_IntList / mean.dim / amax / amin (x, dim, keepdim)."""

    def build(b: Builder, call: Call) -> Value:
        x = call.args[0]
        axes = dims(call.arg(1, "dim"), len(shape_of(x)))
        return b.reduce(op_type, x, axes, bool(call.arg(keepdim_at, "keepdim", False)))

    return build


def var(b: Builder, call: Call) -> Value:
    """var.correction(x, dim, correction=1, keepdim): mean of squared deviations over
    count - correction."""
    x = call.args[0]
    shape = shape_of(x)
    axes = dims(call.arg(1, "dim"), len(shape))
    correction = call.kwargs.get("correction")
    correction = 1 if correction is None else correction
    keepdim = bool(call.kwargs.get("keepdim", False))
    centred = b.binary(graph.SubOp, x, b.reduce(graph.ReduceMeanOp, x, axes, True))
    total = b.reduce(graph.ReduceSumOp, b.binary(graph.MulOp, centred, centred), axes, keepdim)
    count = int(np.prod([shape[a] for a in axes])) - correction
    return b.binary(graph.DivOp, total, call.scalar(max(count, 0)))


def any_dim(b: Builder, call: Call) -> Value:
    """any.dim / any.dims on a mask: the maximum of it as 0/1 floats, compared with 0."""
    x = call.args[0]
    axes = dims(call.arg(1, "dim"), len(shape_of(x)))
    as_float = b.cast(x, Float32Type())
    top = b.reduce(graph.ReduceMaxOp, as_float, axes, bool(call.arg(2, "keepdim", False)))
    return b.compare("ne", top, np.asarray(0.0, np.float32))


def pads_not_negative(node: Any) -> bool:
    """constant_pad_nd that pads (a negative pad crops; left to eager)."""
    return all(int(p) >= 0 for p in node.args[1])
