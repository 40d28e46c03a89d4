"""ONNX data-movement operators (reshape, transpose, slice, pad, gather, ...) as graph ops."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
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


@converter("Slice")
def _slice(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    shape = list(shape_of(x))
    starts_in = b.ints(required(inputs, 1), "starts")
    ends_in = b.ints(required(inputs, 2), "ends")
    axes_in = b.ints(inputs[3], "axes") if optional(inputs, 3) is not None else None
    steps_in = b.ints(inputs[4], "steps") if optional(inputs, 4) is not None else None
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


@converter("Pad")
def _pad(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    mode = attrs.get("mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant":
        raise b.fail(f"Pad mode {mode!r} is not supported (only constant)")
    x = required(inputs)
    rank = len(shape_of(x))
    pads = b.ints(required(inputs, 1), "pads")
    value_input = optional(inputs, 2)
    value = 0.0 if value_input is None else float(np.asarray(value_input).reshape(-1)[0])
    axes = b.ints(inputs[3], "axes") if optional(inputs, 3) is not None else list(range(rank))
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
    data, indices = required(inputs, 0), required(inputs, 1)
    axis = rules.normalize_axis(attrs.get("axis", 0), len(shape_of(data)))
    return [_take(b, data, indices, axis)]


@converter("GatherND")
def _gather_nd(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Known index tuples into the leading k dims: one gather over those dims flattened."""
    data, indices = required(inputs, 0), required(inputs, 1)
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
