"""ONNX data-movement and index operators as graph ops.

Reshape, transpose, slice, pad, gather and their kin map onto one graph op each. The index
operators graphfuse has no op for (ArgMax, TopK's smallest, Trilu, Tile, GatherElements,
ScatterElements/ND, CumSum, Einsum, ReverseSequence, Pad's edge/reflect/wrap ...) are built
from those it has. Shapes are static, so every index pattern that does not depend on the
data (an iota, a triangular mask, each element's position in a flattened tensor) is a NumPy
constant computed here; what does depend on it (computed indices, where a maximum lies) is
compare, select, gather and reductions. A scatter with computed indices compares every
target with every output row (quadratic: refused past SCATTER_LIMIT pairs). Ops whose output
shape depends on input values (NonZero, Unique, Compress, NonMaxSuppression) are refused.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Array,
    Builder,
    Value,
    element_of,
    f64_attr,
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

# ---- data movement ----------------------------------------------------------------------


@converter("Reshape")
def _reshape(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    target = b.ints(required(inputs, 1), "the shape input")
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
    x = required(inputs)
    shape = shape_of(x)
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    return [b.reshape(x, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


def _axes(b: Builder, inputs: Inputs, attrs: Attrs) -> list[int] | None:
    if optional(inputs, 1) is not None:
        return b.ints(inputs[1], "axes")
    return list(attrs["axes"]) if "axes" in attrs else None


@converter("Squeeze")
def _squeeze(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
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
    x = required(inputs)
    axes = _axes(b, inputs, attrs) or []
    rank = len(shape_of(x)) + len(axes)
    inserted = {rules.normalize_axis(a, rank) for a in axes}
    dims = iter(shape_of(x))
    return [b.reshape(x, [1 if i in inserted else next(dims) for i in range(rank)])]


@converter("Transpose")
def _transpose(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    perm = list(attrs.get("perm", reversed(range(len(shape_of(x))))))
    return [b.transpose(x, perm)]


@converter("Expand")
def _expand(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    target = rules.broadcast_shapes(shape_of(x), b.ints(required(inputs, 1), "the shape input"))
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


def _slice_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX's clamping of one axis's start and end: into [0, dim] for a positive step,
    [-1, dim - 1] (end) and [0, dim - 1] (start) for a negative one."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


@converter("Slice")
def _slice(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Positive steps are one strided slice; an axis with a negative step is a gather of
    its (known) indices in the order the step visits them."""
    x = required(inputs)
    shape = list(shape_of(x))
    starts_in = b.ints(required(inputs, 1), "starts")
    ends_in = b.ints(required(inputs, 2), "ends")
    axes_in = b.ints(inputs[3], "axes") if optional(inputs, 3) is not None else None
    steps_in = b.ints(inputs[4], "steps") if optional(inputs, 4) is not None else None
    axes = axes_in if axes_in is not None else list(range(len(starts_in)))
    steps = steps_in if steps_in is not None else [1] * len(starts_in)
    starts, sizes, strides = [0] * len(shape), list(shape), [1] * len(shape)
    backwards: dict[int, Array] = {}
    for axis, start, end, step in zip(axes, starts_in, ends_in, steps, strict=True):
        axis = rules.normalize_axis(axis, len(shape))
        if step == 0:
            raise b.fail(f"Slice step 0 on axis {axis}")
        low, high = _slice_bounds(start, end, step, shape[axis])
        if step < 0:
            backwards[axis] = np.arange(low, high, step, dtype=np.int64)
            continue
        starts[axis] = low
        sizes[axis] = max(0, -(-(high - low) // step))
        strides[axis] = step
    result = _slice_value(b, x, starts, sizes, strides)
    for axis, picked in backwards.items():
        result = _take(b, result, picked, axis)
    return [result]


@converter("Split")
def _split(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    shape = list(shape_of(x))
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape))
    if optional(inputs, 1) is not None:
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


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


_PAD_MODES = ("constant", "edge", "reflect", "wrap")


@converter("Pad")
def _pad(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Constant padding is graph.pad (after a slice for negative pads); edge, reflect and
    wrap read each output position from a known source index: a gather per padded axis."""
    mode = _text(attrs.get("mode", "constant"))
    if mode not in _PAD_MODES:
        raise b.fail(f"Pad mode '{mode}' is not supported (only {', '.join(_PAD_MODES)})")
    x = required(inputs)
    rank = len(shape_of(x))
    if optional(inputs, 1) is not None:
        pads = b.ints(inputs[1], "pads")
    else:
        pads = [int(p) for p in attrs["pads"]]  # opset < 11
    axes = b.ints(inputs[3], "axes") if optional(inputs, 3) is not None else list(range(rank))
    low, high = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        axis = rules.normalize_axis(axis, rank)
        low[axis], high[axis] = pads[i], pads[i + len(axes)]
    x = _crop(b, x, low, high)
    low, high = [max(0, p) for p in low], [max(0, p) for p in high]
    if mode == "constant":
        value = optional(inputs, 2)
        return [_pad_constant(b, x, low, high, attrs.get("value", 0.0) if value is None else value)]
    for axis in range(rank):
        if low[axis] or high[axis]:
            source = _pad_source(mode, shape_of(x)[axis], low[axis], high[axis])
            x = _take(b, x, source, axis)
    return [x]


def _crop(b: Builder, x: Value, low: Sequence[int], high: Sequence[int]) -> Value:
    """x less the negative pads (removed before any padding, as onnxruntime does)."""
    cut_low = [max(0, -p) for p in low]
    cut_high = [max(0, -p) for p in high]
    sizes = [d - a - c for d, a, c in zip(shape_of(x), cut_low, cut_high, strict=True)]
    return _slice_value(b, x, cut_low, sizes, [1] * len(sizes))


def _pad_source(mode: str, dim: int, low: int, high: int) -> Array:
    """For each output position along a padded axis, the input position it copies (NumPy's
    pad modes, which ONNX follows)."""
    source = np.arange(-low, dim + high, dtype=np.int64)
    if mode == "edge":
        return np.clip(source, 0, dim - 1)
    if mode == "wrap":
        return np.mod(source, dim)
    if dim == 1:  # reflect
        return np.zeros_like(source)
    period = 2 * (dim - 1)
    folded = np.mod(source, period)
    return np.where(folded < dim, folded, period - folded)


def _pad_constant(
    b: Builder, x: Value, low: Sequence[int], high: Sequence[int], value: Value | float
) -> Value:
    """graph.pad; a computed pad value fills the border through a select on the (known)
    border mask."""
    sizes = shape_of(x)
    if not any(low) and not any(high):
        return x
    padded_shape = rules.pad_shape(sizes, low, high)
    known = not isinstance(value, SSAValue)
    fill = float(np.asarray(value).reshape(-1)[0]) if known else 0.0
    padded = b.op(
        graph.PadOp,
        [x],
        padded_shape,
        low=i64_array(low),
        high=i64_array(high),
        value=f64_attr(fill),
    )
    if isinstance(value, SSAValue):
        inside = np.zeros(padded_shape, np.bool_)
        inside[tuple(slice(p, p + d) for p, d in zip(low, sizes, strict=True))] = True
        border = b.reshape(value, [1] * len(padded_shape))
        return _select(b, inside, padded, border)
    return padded


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
    data, indices = required(inputs, 0), required(inputs, 1)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape_of(data)))
    return [_take(b, data, indices, axis)]


# ---- index arithmetic ---------------------------------------------------------------------
# Helpers that compute in NumPy when every operand is known and emit graph ops otherwise,
# so a known index pattern never reaches the graph.

I64 = IntegerType(64)

_NUMPY_BINARY: dict[type[Operation], Callable[[Array, Array], Array]] = {
    graph.AddOp: np.add,
    graph.SubOp: np.subtract,
    graph.MulOp: np.multiply,
    graph.MaxOp: np.maximum,
    graph.MinOp: np.minimum,
}
_NUMPY_REDUCE: dict[type[Operation], Callable[..., Array]] = {
    graph.ReduceSumOp: np.sum,
    graph.ReduceMaxOp: np.max,
    graph.ReduceMinOp: np.min,
}
_NUMPY_COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "eq": np.equal,
    "lt": np.less,
    "le": np.less_equal,
    "ge": np.greater_equal,
}


def _binary(b: Builder, op_type: type[Operation], x: Value, y: Value) -> Value:
    if isinstance(x, SSAValue) or isinstance(y, SSAValue):
        return b.binary(op_type, x, y)
    return np.asarray(_NUMPY_BINARY[op_type](x, y))


def _compare(b: Builder, predicate: str, x: Value, y: Value) -> Value:
    if isinstance(x, SSAValue) or isinstance(y, SSAValue):
        return b.compare(predicate, x, y)
    return np.asarray(_NUMPY_COMPARE[predicate](x, y))


def _reduce(
    b: Builder, op_type: type[Operation], x: Value, axes: Sequence[int], keepdims: bool
) -> Value:
    if isinstance(x, SSAValue):
        return b.reduce(op_type, x, axes, keepdims)
    return np.asarray(_NUMPY_REDUCE[op_type](x, axis=tuple(axes), keepdims=keepdims))


def _select(b: Builder, condition: Value, on_true: Value, on_false: Value) -> Value:
    """Elementwise `condition ? on_true : on_false` (on_true and on_false of one type)."""
    if (
        not isinstance(condition, SSAValue)
        and not isinstance(on_true, SSAValue)
        and not isinstance(on_false, SSAValue)
    ):
        return np.where(condition, on_true, on_false)
    on_true, on_false = b.same_element(on_true, on_false)
    element = element_of(on_true if isinstance(on_true, SSAValue) else on_false, b.node)
    shape = rules.broadcast_shapes(shape_of(condition), shape_of(on_true), shape_of(on_false))
    return b.op(graph.SelectOp, [condition, on_true, on_false], shape, element)


def _broadcast(b: Builder, x: Value, shape: Sequence[int]) -> Value:
    if tuple(shape) == shape_of(x):
        return x
    if not isinstance(x, SSAValue):
        return np.broadcast_to(x, shape).copy()
    return b.op(graph.BroadcastToOp, [x], shape)


def _append(b: Builder, op: Operation) -> Operation:
    """Append an op of several results (Builder.op makes ops of one), verified first and
    tied to the node it comes from, as Builder does with its own."""
    op.verify()
    b.block.add_op(op)
    b.origin[op] = b.node
    return op


def _iota(count: int, axis: int, rank: int) -> Array:
    """0 .. count-1 laid along `axis` of an array of rank `rank`, size 1 elsewhere."""
    shape = [1] * rank
    shape[axis] = count
    return np.arange(count, dtype=np.int64).reshape(shape)


def _row_major_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def _index(b: Builder, indices: Value, dim: int | Array) -> Value:
    """Indices as i64 with negative ones counted from the end (index + dim, as ONNX says)."""
    indices = b.cast(indices, I64)
    dim_array = np.asarray(dim, np.int64)
    if not isinstance(indices, SSAValue):
        return np.where(indices < 0, indices + dim_array, indices)
    negative = b.compare("lt", indices, np.array(0, np.int64))
    return _select(b, negative, b.binary(graph.AddOp, indices, dim_array), indices)


def _scaled_sum(b: Builder, terms: Sequence[tuple[Value, int]], shape: Sequence[int]) -> Value:
    """sum(value * scale) broadcast to `shape` (zeros for no terms), with no op for a unit
    scale. Known terms are small iotas, so no constant of the full shape is made."""
    total: Value | None = None
    for value, scale in terms:
        scaled = value if scale == 1 else _binary(b, graph.MulOp, value, np.array(scale, np.int64))
        total = scaled if total is None else _binary(b, graph.AddOp, total, scaled)
    if total is None:
        return np.zeros(shape, np.int64)
    return _broadcast(b, total, shape)


def _element_positions(b: Builder, indices: Value, shape: Sequence[int], axis: int) -> Value:
    """The position in `shape` flattened that each index points at, the index standing
    for its own coordinate along `axis` (GatherElements, ScatterElements)."""
    index_shape = shape_of(indices)
    strides = _row_major_strides(shape)
    terms: list[tuple[Value, int]] = [(_index(b, indices, shape[axis]), strides[axis])]
    for d, size in enumerate(index_shape):
        if d != axis and size > 1:
            terms.append((_iota(size, d, len(index_shape)), strides[d]))
    return _scaled_sum(b, terms, index_shape)


def _tuple_positions(b: Builder, indices: Value, dims: Sequence[int]) -> Value:
    """Index tuples (the last axis of `indices`) as positions in `dims` flattened, each
    component's negative values counted from the end of its dimension (GatherND, ScatterND)."""
    index_shape = shape_of(indices)
    outer = list(index_shape[:-1])
    strides = _row_major_strides(dims)
    terms: list[tuple[Value, int]] = []
    for j in range(index_shape[-1]):
        if isinstance(indices, SSAValue):
            starts = [j if i == len(outer) else 0 for i in range(len(index_shape))]
            part = _slice_value(b, indices, starts, [*outer, 1], [1] * len(index_shape))
            component = b.reshape(part, outer)
        else:
            component = np.asarray(indices[..., j])
        terms.append((_index(b, component, dims[j]), strides[j]))
    return _scaled_sum(b, terms, outer)


@converter("GatherElements")
def _gather_elements(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    data, indices = required(inputs, 0), required(inputs, 1)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape_of(data)))
    if len(shape_of(indices)) != len(shape_of(data)):
        raise b.fail(
            f"indices of rank {len(shape_of(indices))} for data of rank {len(shape_of(data))}"
        )
    return [_take_along(b, data, indices, axis)]


def _take_along(b: Builder, data: Value, indices: Value, axis: int) -> Value:
    """numpy.take_along_axis: one gather from `data` flattened at computed positions."""
    shape = shape_of(data)
    positions = _element_positions(b, indices, shape, axis)
    return _take(b, b.reshape(data, [math.prod(shape)]), positions, 0)


@converter("GatherND")
def _gather_nd(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Index tuples into the k dims after the batch dims: one gather over the batch and
    those dims flattened, at positions computed from the tuples (known or not)."""
    data, indices = required(inputs, 0), required(inputs, 1)
    batch = int(attrs.get("batch_dims", 0))
    shape, index_shape = shape_of(data), shape_of(indices)
    k = index_shape[-1]
    if index_shape[:batch] != shape[:batch] or batch + k > len(shape):
        raise b.fail(
            f"indices {rules.format_shape(index_shape)} do not fit data "
            f"{rules.format_shape(shape)} with batch_dims={batch}"
        )
    dims = shape[batch : batch + k]
    outer = index_shape[:-1]
    terms: list[tuple[Value, int]] = [(_tuple_positions(b, indices, dims), 1)]
    strides = _row_major_strides(shape[: batch + k])
    for d in range(batch):
        terms.append((_iota(outer[d], d, len(outer)), strides[d]))
    positions = _scaled_sum(b, terms, outer)
    flat = b.reshape(data, [math.prod(shape[: batch + k]), *shape[batch + k :]])
    return [_take(b, flat, positions, 0)]


# ---- scatter ------------------------------------------------------------------------------

SCATTER_LIMIT = 1 << 24
"""The most (output row, update) pairs a scatter with computed indices compares."""

_REDUCTIONS = ("none", "add", "mul", "max", "min")


@converter("ScatterElements", "Scatter")
def _scatter_elements(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    data, indices, updates = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    shape = shape_of(data)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape))
    if shape_of(updates) != shape_of(indices) or len(shape_of(indices)) != len(shape):
        raise b.fail(
            f"indices {rules.format_shape(shape_of(indices))} and updates "
            f"{rules.format_shape(shape_of(updates))} must have one shape, of the data's rank"
        )
    count = math.prod(shape_of(indices))
    targets = b.reshape(_element_positions(b, indices, shape, axis), [count])
    flat = b.reshape(data, [math.prod(shape)])
    scattered = _scatter_rows(b, flat, targets, b.reshape(updates, [count]), _reduction(b, attrs))
    return [b.reshape(scattered, shape)]


@converter("ScatterND")
def _scatter_nd(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    data, indices, updates = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    shape, index_shape = shape_of(data), shape_of(indices)
    k = index_shape[-1]
    rest = list(shape[k:])
    count = math.prod(index_shape[:-1])
    if k > len(shape) or shape_of(updates) != (*index_shape[:-1], *rest):
        raise b.fail(
            f"updates {rules.format_shape(shape_of(updates))} do not fit indices "
            f"{rules.format_shape(index_shape)} into data {rules.format_shape(shape)}"
        )
    targets = b.reshape(_tuple_positions(b, indices, shape[:k]), [count])
    rows = b.reshape(data, [math.prod(shape[:k]), *rest])
    spread = b.reshape(updates, [count, *rest])
    return [b.reshape(_scatter_rows(b, rows, targets, spread, _reduction(b, attrs)), shape)]


def _reduction(b: Builder, attrs: Attrs) -> str:
    reduction = _text(attrs.get("reduction", "none"))
    if reduction not in _REDUCTIONS:
        raise b.fail(f"reduction '{reduction}' is not one of {', '.join(_REDUCTIONS)}")
    return reduction


def _scatter_rows(b: Builder, rows: Value, targets: Value, updates: Value, reduction: str) -> Value:
    """rows [R, ...] with update j ([n, ...]) written to (or combined into) row targets[j].

    Updates are applied in order, as ONNX's reference does: with no reduction the last of
    several updates to one row wins.
    """
    if isinstance(targets, SSAValue):
        return _scatter_computed(b, rows, targets, updates, reduction)
    count = shape_of(rows)[0]
    if targets.size and not (targets.min() >= 0 and targets.max() < count):
        raise b.fail(f"a scatter index is out of range for {count} rows")
    ones = [1] * (len(shape_of(rows)) - 1)
    combine = _COMBINE.get(reduction)
    result = rows
    for layer in _scatter_layers(targets, count, reduction):
        source = np.zeros(count, np.int64)
        source[targets[layer]] = layer
        received = np.zeros(count, np.bool_)
        received[targets[layer]] = True
        picked = _take(b, updates, source, 0)
        new = picked if combine is None else _binary(b, combine, result, picked)
        result = new if received.all() else _select(b, received.reshape(count, *ones), new, result)
    return result


_COMBINE: dict[str, type[Operation]] = {
    "add": graph.AddOp,
    "mul": graph.MulOp,
    "max": graph.MaxOp,
    "min": graph.MinOp,
}


def _scatter_layers(targets: Array, count: int, reduction: str) -> list[Array]:
    """Known targets as layers of update numbers, each row receiving at most one update per
    layer and its updates in order: with no reduction only the last per row, else the
    k-th update of every row in layer k."""
    numbers = np.arange(len(targets), dtype=np.int64)
    if reduction == "none":
        last = np.full(count, -1, np.int64)
        np.maximum.at(last, targets, numbers)
        return [last[last >= 0]]
    order = np.argsort(targets, kind="stable")
    starts = np.flatnonzero(np.diff(targets[order], prepend=-1))
    run_start = np.repeat(starts, np.diff(np.append(starts, len(targets))))
    occurrence = np.empty(len(targets), np.int64)
    occurrence[order] = numbers - run_start
    return [np.flatnonzero(occurrence == k) for k in range(int(occurrence.max()) + 1)]


def _scatter_computed(
    b: Builder, rows: Value, targets: SSAValue, updates: Value, reduction: str
) -> Value:
    """Every computed target compared with every row: the one-hot mask selects what each
    row receives, reduced over the updates."""
    count, updates_count = shape_of(rows)[0], shape_of(targets)[0]
    rest = list(shape_of(rows)[1:])
    pairs = count * updates_count * (math.prod(rest) if reduction != "none" else 1)
    if pairs > SCATTER_LIMIT:
        raise b.fail(
            f"scattering {updates_count} updates into {count} rows with computed indices "
            f"compares {pairs} pairs, more than graphfuse's limit of {SCATTER_LIMIT}"
        )
    hit = b.compare("eq", b.reshape(targets, [1, updates_count]), _iota(count, 0, 2))
    if reduction == "none":
        order = _iota(updates_count, 1, 2)
        chosen = _select(b, hit, order, np.array(-1, np.int64))
        return _scatter_last(b, rows, _reduce(b, graph.ReduceMaxOp, chosen, [1], False), updates)
    hit = b.reshape(hit, [count, updates_count, *[1] * len(rest)])
    spread = b.reshape(updates, [1, updates_count, *rest])
    if reduction in ("max", "min"):
        own = b.reshape(rows, [count, 1, *rest])
        reduce_op = graph.ReduceMaxOp if reduction == "max" else graph.ReduceMinOp
        received = _reduce(b, reduce_op, _select(b, hit, spread, own), [1], False)
        return _binary(b, _COMBINE[reduction], rows, received)
    dtype = numpy_dtype(element_of(rows, b.node))
    chosen = _select(b, hit, spread, np.array(1 if reduction == "mul" else 0, dtype))
    if reduction == "add":
        return _binary(b, graph.AddOp, rows, _reduce(b, graph.ReduceSumOp, chosen, [1], False))
    return _binary(b, graph.MulOp, rows, _reduce_product(b, chosen, 1))


def _scatter_last(b: Builder, rows: Value, last: Value, updates: Value) -> Value:
    """Each row replaced by update last[row], or kept where last[row] is -1."""
    count = shape_of(rows)[0]
    ones = [1] * (len(shape_of(rows)) - 1)
    received = _compare(b, "ge", last, np.array(0, np.int64))
    picked = _take(b, updates, _binary(b, graph.MaxOp, last, np.array(0, np.int64)), 0)
    return _select(b, b.reshape(received, [count, *ones]), picked, rows)


def _reduce_product(b: Builder, x: Value, axis: int) -> Value:
    """The product along `axis` (which is dropped), graph.reduce_* having no product: the
    two halves multiplied, log2(n) times, an odd length padded with a 1 first."""
    while shape_of(x)[axis] > 1:
        shape = list(shape_of(x))
        if shape[axis] % 2:
            high = [1 if i == axis else 0 for i in range(len(shape))]
            shape[axis] += 1
            x = b.op(
                graph.PadOp,
                [x],
                shape,
                low=i64_array([0] * len(shape)),
                high=i64_array(high),
                value=f64_attr(1.0),
            )
        half = shape[axis] // 2
        sizes = [half if i == axis else d for i, d in enumerate(shape)]
        upper = [half if i == axis else 0 for i in range(len(shape))]
        ones = [1] * len(shape)
        first = _slice_value(b, x, [0] * len(shape), sizes, ones)
        x = b.binary(graph.MulOp, first, _slice_value(b, x, upper, sizes, ones))
    return b.reshape(x, [d for i, d in enumerate(shape_of(x)) if i != axis])


# ---- positions of extremes, ranking -------------------------------------------------------


def _arg_extreme(
    b: Builder, x: Value, axis: int, reduce_op: type[Operation], last: bool, keepdims: bool
) -> Value:
    """The index of the first (or last) element along `axis` equal to the axis's maximum
    (or minimum): a compare with the reduced value, then the least (or greatest) iota
    among the equal ones."""
    rank, count = len(shape_of(x)), shape_of(x)[axis]
    hit = b.compare("eq", x, b.reduce(reduce_op, x, [axis], True))
    if numpy_dtype(element_of(x, b.node)).kind == "f":
        # The reduction propagates NaN, which equals nothing: NaN positions are the hits
        # then (the first NaN, as NumPy's argmax).
        hit = _select(b, b.compare("eq", x, x), hit, np.array(True))
    miss = np.array(-1 if last else count, np.int64)
    candidates = _select(b, hit, _iota(count, axis, rank), miss)
    pick = graph.ReduceMaxOp if last else graph.ReduceMinOp
    return _reduce(b, pick, candidates, [axis], keepdims)


@converter("ArgMax", "ArgMin")
def _arg_max_min(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape_of(x)))
    reduce_op = graph.ReduceMaxOp if b.op_type == "ArgMax" else graph.ReduceMinOp
    last = bool(attrs.get("select_last_index", 0))
    return [_arg_extreme(b, x, axis, reduce_op, last, bool(attrs.get("keepdims", 1)))]


@converter("Hardmax")
def _hardmax(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """1 at the first maximum along `axis`, 0 elsewhere (opset 13: one axis)."""
    x = required(inputs)
    rank = len(shape_of(x))
    axis = rules.normalize_axis(attrs.get("axis", -1), rank)
    first = _arg_extreme(b, x, axis, graph.ReduceMaxOp, False, True)
    hit = _compare(b, "eq", first, _iota(shape_of(x)[axis], axis, rank))
    return [b.cast(hit, element_of(x, b.node))]


@converter("TopK")
def _top_k(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """graph.top_k (largest first, the lower index first among equals, as ONNX); the
    smallest are the largest of the input in reversed order. Results are always sorted, which
    sorted=0 (any order) allows."""
    x = required(inputs)
    k_input = optional(inputs, 1)
    k = b.ints(k_input, "k")[0] if k_input is not None else int(attrs["k"])
    shape = shape_of(x)
    axis = rules.normalize_axis(attrs.get("axis", -1), len(shape))
    if not 1 <= k <= shape[axis]:
        raise b.fail(f"k={k} must be in [1, {shape[axis]}] (graphfuse has no empty tensors)")
    largest = bool(attrs.get("largest", 1))
    source = b.tensor(x if largest else _order_reversed(b, x))
    out_shape = [k if i == axis else d for i, d in enumerate(shape)]
    element = element_of(source, b.node)
    op = _append(
        b,
        graph.TopKOp.create(
            operands=[source],
            result_types=[TensorType(element, out_shape), TensorType(I64, out_shape)],
            properties={"k": i64_attr(k), "axis": i64_attr(axis)},
        ),
    )
    values: Value = op.results[0]
    if not largest:
        values = _order_reversed(b, values)
    return [values, op.results[1]]


def _order_reversed(b: Builder, x: Value) -> Value:
    """x mapped onto values in the opposite order, its own inverse: -x for floats, -1 - x
    for integers (which, unlike -x, does not overflow at the least integer)."""
    dtype = numpy_dtype(element_of(x, b.node))
    if dtype.kind == "f":
        return b.unary(graph.NegOp, x)
    return b.binary(graph.SubOp, np.array(-1, dtype), x)


# ---- masks, tiling, blocks ----------------------------------------------------------------


@converter("Trilu")
def _trilu(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """The upper (or lower) triangle of the last two dims from diagonal k: a select with
    a known mask."""
    x = required(inputs)
    k_input = optional(inputs, 1)
    k = b.ints(k_input, "k")[0] if k_input is not None else 0
    shape = shape_of(x)
    if len(shape) < 2:
        raise b.fail(f"Trilu needs rank 2 or more, not {len(shape)}")
    rows, columns = np.indices(shape[-2:])
    offset = columns - rows
    keep = offset >= k if attrs.get("upper", 1) else offset <= k
    if keep.all():
        return [x]
    zero = np.zeros((), numpy_dtype(element_of(x, b.node)))
    return [_select(b, keep, x, zero)]


@converter("Tile")
def _tile(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Each repeated dim d becomes [1, d], broadcast to [r, d], merged to r * d."""
    x = required(inputs)
    repeats = b.ints(required(inputs, 1), "repeats")
    shape = shape_of(x)
    if len(repeats) != len(shape):
        raise b.fail(f"{len(repeats)} repeats for a tensor of rank {len(shape)}")
    split: list[int] = []
    spread: list[int] = []
    for dim, repeat in zip(shape, repeats, strict=True):
        split += [1, dim] if repeat != 1 else [dim]
        spread += [repeat, dim] if repeat != 1 else [dim]
    final = [d * r for d, r in zip(shape, repeats, strict=True)]
    if final == list(shape):
        return [x]
    return [b.reshape(_broadcast(b, b.reshape(x, split), spread), final)]


def _blocks(b: Builder, x: Value, attrs: Attrs) -> tuple[tuple[int, ...], int, str]:
    shape = shape_of(x)
    if len(shape) != 4:
        raise b.fail(f"{b.op_type} needs a 4-D (NCHW) input, not rank {len(shape)}")
    mode = _text(attrs.get("mode", "DCR"))
    if mode not in ("DCR", "CRD"):
        raise b.fail(f"mode '{mode}' is not DCR or CRD")
    return shape, int(attrs["blocksize"]), mode


@converter("DepthToSpace")
def _depth_to_space(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    (n, c, h, w), size, mode = _blocks(b, x, attrs)
    if c % (size * size):
        raise b.fail(f"{c} channels are not a multiple of blocksize² = {size * size}")
    depth = c // (size * size)
    if mode == "DCR":
        split, perm = [n, size, size, depth, h, w], [0, 3, 4, 1, 5, 2]
    else:
        split, perm = [n, depth, size, size, h, w], [0, 1, 4, 2, 5, 3]
    moved = b.transpose(b.reshape(x, split), perm)
    return [b.reshape(moved, [n, depth, h * size, w * size])]


@converter("SpaceToDepth")
def _space_to_depth(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    (n, c, h, w), size, mode = _blocks(b, x, attrs)
    if h % size or w % size:
        raise b.fail(f"{h}x{w} is not a multiple of blocksize {size}")
    split = [n, c, h // size, size, w // size, size]
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    moved = b.transpose(b.reshape(x, split), perm)
    return [b.reshape(moved, [n, c * size * size, h // size, w // size])]


@converter("EyeLike")
def _eye_like(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """A known array: ones on diagonal k of the input's (static) 2-D shape."""
    from onnx import helper

    shape = shape_of(required(inputs))
    if len(shape) != 2:
        raise b.fail(f"EyeLike needs a 2-D input, not rank {len(shape)}")
    if "dtype" in attrs:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["dtype"]))
    else:
        dtype = numpy_dtype(element_of(required(inputs), b.node))
    return [np.eye(shape[0], shape[1], int(attrs.get("k", 0)), dtype=dtype)]


@converter("OneHot")
def _one_hot(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """values[1] where an index (negative ones from the end) equals the position along the
    new axis, values[0] elsewhere."""
    indices, values = required(inputs, 0), required(inputs, 2)
    depth = b.ints(required(inputs, 1), "depth")[0]
    rank = len(shape_of(indices)) + 1
    axis = rules.normalize_axis(attrs.get("axis", -1), rank)
    wrapped = _index(b, indices, depth)
    outer = list(shape_of(indices))
    wrapped = b.reshape(wrapped, [*outer[:axis], 1, *outer[axis:]])
    hit = _compare(b, "eq", wrapped, _iota(depth, axis, rank))
    if isinstance(values, SSAValue):
        off = _slice_value(b, values, [0], [1], [1])
        on = _slice_value(b, values, [1], [1], [1])
    else:
        off, on = values.reshape(-1)[0:1], values.reshape(-1)[1:2]
    return [_select(b, hit, on, off)]


@converter("ReverseSequence")
def _reverse_sequence(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Each batch entry's first lens[b] time steps reversed: a gather along the time axis
    at `lens - 1 - t` where `t < lens`, `t` elsewhere."""
    x, lens = required(inputs, 0), required(inputs, 1)
    shape = shape_of(x)
    rank = len(shape)
    batch_axis = rules.normalize_axis(attrs.get("batch_axis", 1), rank)
    time_axis = rules.normalize_axis(attrs.get("time_axis", 0), rank)
    lens = b.reshape(
        b.cast(lens, I64), [shape[batch_axis] if i == batch_axis else 1 for i in range(rank)]
    )
    time = _iota(shape[time_axis], time_axis, rank)
    reversed_time = _binary(
        b, graph.SubOp, _binary(b, graph.SubOp, lens, np.array(1, np.int64)), time
    )
    source = _select(b, _compare(b, "lt", time, lens), reversed_time, time)
    return [_take_along(b, x, _broadcast(b, source, shape), time_axis)]


# ---- cumulative sums and products ---------------------------------------------------------


@converter("CumSum", "CumProd")
def _cumulative(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """A log-step (Hillis-Steele) scan: y combined with y shifted by 1, 2, 4, ... places,
    the identity shifted in; exclusive shifts the result once more."""
    x = required(inputs)
    axis = rules.normalize_axis(b.ints(required(inputs, 1), "axis")[0], len(shape_of(x)))
    product = b.op_type == "CumProd"
    combine = graph.MulOp if product else graph.AddOp
    identity = 1.0 if product else 0.0
    reverse = bool(attrs.get("reverse", 0))
    result = x
    step = 1
    while step < shape_of(x)[axis]:
        result = b.binary(combine, result, _shift(b, result, axis, step, identity, reverse))
        step *= 2
    if attrs.get("exclusive", 0):
        result = _shift(b, result, axis, 1, identity, reverse)
    return [result]


def _shift(b: Builder, x: Value, axis: int, by: int, fill: float, reverse: bool) -> Value:
    """x moved `by` places along `axis` toward its end (its start when `reverse`), `fill`
    coming in behind."""
    shape = list(shape_of(x))
    rank = len(shape)
    if by >= shape[axis]:
        return np.full(shape, fill, numpy_dtype(element_of(x, b.node)))
    starts = [by if reverse and i == axis else 0 for i in range(rank)]
    sizes = [d - by if i == axis else d for i, d in enumerate(shape)]
    kept = _slice_value(b, x, starts, sizes, [1] * rank)
    gap = [by if i == axis else 0 for i in range(rank)]
    low, high = ([0] * rank, gap) if reverse else (gap, [0] * rank)
    return b.op(
        graph.PadOp, [kept], shape, low=i64_array(low), high=i64_array(high), value=f64_attr(fill)
    )


# ---- einsum -------------------------------------------------------------------------------


def _einsum_terms(b: Builder, equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, an ellipsis spelt out in letters the
    equation does not use (right-aligned, as broadcasting); the implicit output is the
    ellipsis then the letters used once, in alphabetical order."""
    text = equation.replace(" ", "")
    left, arrow, output = text.partition("->")
    terms = left.split(",")
    if len(terms) != len(ranks):
        raise b.fail(f"equation '{equation}' has {len(terms)} operands, the node {len(ranks)}")
    spare = [c for c in string.ascii_letters if c not in text]
    own = [r - (len(t) - 3) if "..." in t else 0 for t, r in zip(terms, ranks, strict=True)]
    dots = "".join(spare[: max(own, default=0)])
    terms = [
        t.replace("...", dots[len(dots) - e :] if e else "")
        for t, e in zip(terms, own, strict=True)
    ]
    for term, rank in zip(terms, ranks, strict=True):
        if len(term) != rank or not all(c.isalpha() for c in term):
            raise b.fail(f"subscripts '{term}' do not fit an operand of rank {rank}")
    letters = "".join(terms)
    if not arrow:
        once = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in dots)
        return terms, dots + "".join(once)
    output = output.replace("...", dots)
    if len(set(output)) != len(output) or not set(output) <= set(letters):
        raise b.fail(f"output subscripts '{output}' must be distinct subscripts of the operands")
    return terms, output


def _einsum_sizes(b: Builder, operands: Sequence[Value], terms: Sequence[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for value, term in zip(operands, terms, strict=True):
        for letter, size in zip(term, shape_of(value), strict=True):
            known = sizes.setdefault(letter, size)
            if known != size and 1 not in (known, size):
                raise b.fail(f"subscript '{letter}' stands for sizes {known} and {size}")
            sizes[letter] = max(known, size)
    return sizes


@converter("Einsum")
def _einsum(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Diagonals (a repeated subscript) by gather, subscripts no one else needs summed,
    then operands contracted left to right as batched matmuls, and the result transposed
    to the output's order."""
    operands = [v for v in inputs if v is not None]
    terms, output = _einsum_terms(b, _text(attrs["equation"]), [len(shape_of(v)) for v in operands])
    sizes = _einsum_sizes(b, operands, terms)
    prepared: list[tuple[Value, str]] = []
    for i, (value, term) in enumerate(zip(operands, terms, strict=True)):
        value, term = _einsum_diagonal(b, value, term)
        needed = set(output).union(*(terms[j] for j in range(len(terms)) if j != i))
        prepared.append(_einsum_sum(b, value, term, needed))
    result, term = prepared[0]
    for i in range(1, len(prepared)):
        needed = set(output).union(*(t for _, t in prepared[i + 1 :]))
        result, term = _einsum_pair(b, (result, term), prepared[i], needed, sizes)
    result, term = _einsum_sum(b, result, term, set(output))
    result = b.transpose(result, [term.index(c) for c in output])
    return [_broadcast(b, result, [sizes[c] for c in output])]


def _einsum_diagonal(b: Builder, x: Value, term: str) -> tuple[Value, str]:
    """A subscript repeated within one operand keeps the diagonal: both axes moved last,
    merged, and every (n + 1)-th element taken."""
    while len(set(term)) < len(term):
        letter = next(c for c in term if term.count(c) > 1)
        first = term.index(letter)
        second = term.index(letter, first + 1)
        others = [i for i in range(len(term)) if i not in (first, second)]
        shape = shape_of(x)
        size = min(shape[first], shape[second])
        moved = b.transpose(x, [*others, first, second])
        merged = b.reshape(moved, [*(shape[i] for i in others), shape[first] * shape[second]])
        diagonal = np.arange(size, dtype=np.int64) * (shape[second] + 1)
        x = _take(b, merged, diagonal, len(others))
        term = "".join(term[i] for i in others) + letter
    return x, term


def _einsum_sum(b: Builder, x: Value, term: str, needed: set[str]) -> tuple[Value, str]:
    axes = [i for i, c in enumerate(term) if c not in needed]
    if not axes:
        return x, term
    return b.reduce(graph.ReduceSumOp, x, axes, False), "".join(c for c in term if c in needed)


def _einsum_pair(
    b: Builder,
    lhs: tuple[Value, str],
    rhs: tuple[Value, str],
    needed: set[str],
    sizes: dict[str, int],
) -> tuple[Value, str]:
    """Two operands as one matmul [batch, left, summed] x [batch, summed, right]."""
    (x, xt), (y, yt) = lhs, rhs
    batch = [c for c in xt if c in yt and c in needed]
    summed = [c for c in xt if c in yt and c not in needed]
    left = [c for c in xt if c not in yt]
    right = [c for c in yt if c not in xt]

    def arranged(value: Value, term: str, order: list[str]) -> Value:
        moved = b.transpose(value, [term.index(c) for c in order])
        return _broadcast(b, moved, [sizes[c] for c in order])

    def extent(letters: list[str]) -> int:
        return math.prod(sizes[c] for c in letters)

    lead = [extent(batch)] if batch else []
    a = b.reshape(arranged(x, xt, batch + left + summed), [*lead, extent(left), extent(summed)])
    c = b.reshape(arranged(y, yt, batch + summed + right), [*lead, extent(summed), extent(right)])
    product = b.op(graph.MatmulOp, [a, c], [*lead, extent(left), extent(right)])
    letters = batch + left + right
    return b.reshape(product, [sizes[c] for c in letters]), "".join(letters)


# ---- refused: shapes from values ----------------------------------------------------------

_VALUE_SHAPED = ("NonZero", "Unique", "Compress", "NonMaxSuppression")


@converter(*_VALUE_SHAPED)
def _value_shaped(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    raise b.fail(
        f"{b.op_type}'s output shape depends on its input values; graphfuse compiles "
        "static shapes only"
    )


@converter("ConstantOfShape")
def _constant_of_shape(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Known shapes are folded before any converter runs; a computed one is refused."""
    shape = required(inputs)
    if isinstance(shape, SSAValue):
        raise b.fail(
            "the output shape is the input's values, so "
            + b.must_be_constant(shape, "the shape input")
        )
    from onnx import numpy_helper

    value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    return [np.full(b.ints(shape, "the shape input"), value.reshape(-1)[0], value.dtype)]


# ---- KV-cache update ------------------------------------------------------------------------


@converter("TensorScatter")
def _tensor_scatter(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """present[n, ..., j, ...] = update[n, ..., j - w[n], ...] where 0 <= j - w[n] < the
    update's length along `axis` (j - w[n] taken modulo the cache's length in circular
    mode), past_cache elsewhere: a gather from the update at computed positions and a
    select, w being write_indices (zeros when omitted), one per batch entry (axis 0)."""
    cache, update, write = required(inputs, 0), required(inputs, 1), optional(inputs, 2)
    shape, rank = shape_of(cache), len(shape_of(cache))
    axis = rules.normalize_axis(attrs.get("axis", -2), rank)
    mode = _text(attrs.get("mode", "linear"))
    u_shape = shape_of(update)
    if axis == 0 or mode not in ("linear", "circular"):
        raise b.fail(f"axis {axis} with mode '{mode}' is not a cache update (axis >= 1)")
    if len(u_shape) != rank or any(
        u != s for d, (u, s) in enumerate(zip(u_shape, shape, strict=True)) if d != axis
    ):
        raise b.fail(f"update {rules.format_shape(u_shape)} does not fit the cache's shape")
    size, count = shape[axis], u_shape[axis]
    if count > size:
        raise b.fail(f"update of length {count} is longer than the cache ({size})")
    start: Value = np.zeros([1] * rank, np.int64)
    if write is not None:
        start = b.reshape(b.cast(write, I64), [shape[0], *[1] * (rank - 1)])
    offset = _binary(b, graph.SubOp, _iota(size, axis, rank), start)
    if mode == "circular":
        offset = _modulo(b, offset, size)
    inside = _select(
        b,
        _compare(b, "ge", offset, np.array(0, np.int64)),
        _compare(b, "lt", offset, np.array(count, np.int64)),
        np.array(False),
    )
    clamped = _binary(b, graph.MaxOp, offset, np.array(0, np.int64))
    clamped = _binary(b, graph.MinOp, clamped, np.array(count - 1, np.int64))
    gathered = _take_along(b, update, _broadcast(b, clamped, shape), axis)
    return [_select(b, inside, gathered, cache)]


def _modulo(b: Builder, x: Value, size: int) -> Value:
    if not isinstance(x, SSAValue):
        return np.mod(x, size)
    return b.binary(graph.ModOp, x, np.array(size, np.int64))


# ---- determinant ----------------------------------------------------------------------------

DET_LIMIT = 16
"""The largest matrix Det takes: elimination is unrolled, n steps over n x n tensors."""


@converter("Det")
def _det(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Gaussian elimination with partial pivoting, unrolled over the static size: at step
    k the row holding the largest |a[i, k]| (i >= k, the first of equals) is swapped into
    row k through selects, the rows below lose their multiple of it, and the determinant
    is the product of the pivots, negated once per real swap (0 when a column is zero)."""
    x = required(inputs)
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise b.fail(f"Det needs square matrices in the last two dims, got {shape}")
    n = shape[-1]
    if n > DET_LIMIT:
        raise b.fail(f"Det of {n}x{n} matrices is not supported (at most {DET_LIMIT}x{DET_LIMIT})")
    if not np.issubdtype(numpy_dtype(element_of(x, b.node)), np.floating):
        raise b.fail("Det takes floating-point matrices only")
    batch, rank = list(shape[:-2]), len(shape)
    one = np.array(1, numpy_dtype(element_of(x, b.node)))
    rows = _iota(n, rank - 2, rank)
    det: Value = one
    matrix = x
    for k in range(n):
        matrix, pivot, swapped = _pivot_step(b, matrix, k, rows)
        flip = _select(b, swapped, -one, one)
        det = _binary(b, graph.MulOp, det, _binary(b, graph.MulOp, pivot, flip))
    return [b.reshape(det, batch)]


def _pivot_step(b: Builder, matrix: Value, k: int, rows: Array) -> tuple[Value, Value, Value]:
    """One elimination step: the matrix with its pivot row in row k and zeros below the
    diagonal in column k, the pivot ([..., 1, 1]) and whether rows were swapped."""
    shape = shape_of(matrix)
    rank, n = len(shape), shape[-1]
    lead = [0] * (rank - 2)
    column = _slice_value(b, matrix, [*lead, 0, k], [*shape[:-2], n, 1], [1] * rank)
    magnitude = b.unary(graph.AbsOp, column)
    candidate = rows >= k
    magnitude = _select(b, candidate, magnitude, np.array(-1.0, np.float32))
    largest = _reduce(b, graph.ReduceMaxOp, magnitude, [rank - 2], True)
    at_largest = _compare(b, "eq", magnitude, largest)
    position = _select(b, at_largest, rows, np.array(n, np.int64))
    pivot_row = _reduce(b, graph.ReduceMinOp, position, [rank - 2], True)  # [..., 1, 1]
    is_pivot = _compare(b, "eq", rows, pivot_row)  # [..., n, 1]
    zero = np.array(0, numpy_dtype(element_of(matrix, b.node)))
    chosen = _reduce(b, graph.ReduceSumOp, _select(b, is_pivot, matrix, zero), [rank - 2], True)
    row_k = _slice_value(b, matrix, [*lead, k, 0], [*shape[:-2], 1, n], [1] * rank)
    is_k = rows == k
    swapped = _select(b, is_k, chosen, _select(b, is_pivot, row_k, matrix))
    pivot = _slice_value(b, chosen, [*lead, 0, k], [*shape[:-2], 1, 1], [1] * rank)
    # A zero pivot means a zero column: the determinant is 0 and nothing is eliminated.
    safe = _select(b, _compare(b, "eq", pivot, zero), zero + 1, pivot)
    entries = _slice_value(b, swapped, [*lead, 0, k], [*shape[:-2], n, 1], [1] * rank)
    factors = _select(b, rows > k, _binary(b, graph.DivOp, entries, safe), zero)
    eliminated = _binary(b, graph.SubOp, swapped, _binary(b, graph.MulOp, factors, chosen))
    was_swapped = b.compare("ne", pivot_row, np.array(k, np.int64))
    return eliminated, pivot, was_swapped
