"""ONNX matmul, convolution, pooling, Resize and normalization operators as graph-dialect ops.

Only graph ops that already exist are used: N-D convolution and pooling are rewritten onto
graph.conv2d / max_pool2d / avg_pool2d where they fit (1-D gets a unit spatial dimension,
the fast path real models take) and otherwise into strided slices of the padded input that
fuse into one kernel. ConvTranspose is a stride-1 convolution of the zero-inserted input
with the flipped, transposed kernel. Resize works out, with NumPy at import time, which
input positions and weights every output position reads along each resized axis (static
shapes make them constants); the graph then holds gathers and weighted sums.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerType, UnitAttr
from xdsl.ir import Attribute, SSAValue

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

# ---- matmul -------------------------------------------------------------------------------


@converter("MatMul")
def matmul(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
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


# ---- helpers: known arrays stay NumPy, SSA values become graph ops ------------------------


def _text(attrs: Attrs, name: str, default: str) -> str:
    value = attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _dtype(b: Builder, x: Value) -> np.dtype[Any]:
    return numpy_dtype(element_of(x, f"node {b.node}"))


def _is_float(b: Builder, x: Value) -> bool:
    return np.issubdtype(_dtype(b, x), np.floating)


def strided_slice(
    b: Builder, x: Value, starts: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> Value:
    """`sizes[i]` elements of `x` along each axis i, from `starts[i]` on every `strides[i]`-th
    (positive strides); sliced at import time when `x` is known, else a graph.slice."""
    shape = shape_of(x)
    if list(sizes) == list(shape) and not any(starts):
        return x
    if not isinstance(x, SSAValue):
        index = tuple(
            slice(a, a + (n - 1) * s + 1, s) for a, n, s in zip(starts, sizes, strides, strict=True)
        )
        return x[index]
    return b.op(graph.SliceOp, [x], sizes, starts=i64_array(starts), strides=i64_array(strides))


def pad_or_crop(
    b: Builder, x: Value, low: Sequence[int], high: Sequence[int], value: float = 0.0
) -> Value:
    """Constant padding; a negative amount crops instead (ONNX's and StableHLO's pad)."""
    shape = shape_of(x)
    crop_low = [max(-lo, 0) for lo in low]
    sizes = [d - cl - max(-hi, 0) for d, cl, hi in zip(shape, crop_low, high, strict=True)]
    x = strided_slice(b, x, crop_low, sizes, [1] * len(shape))
    low, high = [max(lo, 0) for lo in low], [max(hi, 0) for hi in high]
    if not any(low) and not any(high):
        return x
    if not isinstance(x, SSAValue):
        return np.pad(x, list(zip(low, high, strict=True)), constant_values=value)
    out = rules.pad_shape(shape_of(x), low, high)
    return b.op(
        graph.PadOp, [x], out, low=i64_array(low), high=i64_array(high), value=f64_attr(value)
    )


def _transpose(b: Builder, x: Value, perm: Sequence[int]) -> Value:
    if not isinstance(x, SSAValue):
        return np.transpose(x, perm)
    return b.transpose(x, perm)


def _take(b: Builder, x: Value, indices: Array, axis: int) -> Value:
    """numpy.take with known indices: a slice when they are an evenly spaced run."""
    flat = [int(i) for i in np.asarray(indices).reshape(-1)]
    shape = list(shape_of(x))
    out_shape = [*shape[:axis], *indices.shape, *shape[axis + 1 :]]
    step = flat[1] - flat[0] if len(flat) > 1 else 1
    if step > 0 and flat == list(range(flat[0], flat[0] + step * len(flat), step)):
        starts = [flat[0] if i == axis else 0 for i in range(len(shape))]
        sizes = [len(flat) if i == axis else d for i, d in enumerate(shape)]
        strides = [step if i == axis else 1 for i in range(len(shape))]
        return b.reshape(strided_slice(b, x, starts, sizes, strides), out_shape)
    if not isinstance(x, SSAValue):
        return np.take(x, indices, axis)
    return b.op(graph.GatherOp, [x, np.asarray(indices, np.int64)], out_shape, axis=i64_attr(axis))


def _flip(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    if not isinstance(x, SSAValue):
        return np.flip(x, tuple(axes)).copy()
    for axis in axes:
        size = shape_of(x)[axis]
        if size > 1:
            x = _take(b, x, np.arange(size - 1, -1, -1, dtype=np.int64), axis)
    return x


def _concat(b: Builder, values: Sequence[Value], axis: int) -> Value:
    if len(values) == 1:
        return values[0]
    shape = rules.concat_shape([shape_of(v) for v in values], axis)
    return b.op(graph.ConcatOp, values, shape, axis=i64_attr(axis))


def _constant_like(b: Builder, array: Array, like: Value) -> Array:
    return np.asarray(array).astype(_dtype(b, like))


def _trailing(array: Array, rank: int) -> Array:
    """`array` with unit dimensions added after it up to `rank` (to broadcast along dim 0
    of the trailing dims)."""
    return array.reshape(array.shape + (1,) * (rank - array.ndim))


def _sum(b: Builder, values: Sequence[Value]) -> Value:
    total = values[0]
    for value in values[1:]:
        total = b.binary(graph.AddOp, total, value)
    return total


# ---- windows: strides, dilations, pads and output sizes of conv and pooling ---------------


@dataclass(frozen=True)
class _Window:
    """One sliding window over the spatial dims: `begin`/`end` pads, `out` positions.

    `reach[i]` is how far the last window reaches past the end padding (ceil_mode): those
    positions are outside the input and, for average pooling, never counted.
    """

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]
    reach: tuple[int, ...]

    def extent(self, i: int) -> int:
        return (self.kernel[i] - 1) * self.dilations[i] + 1

    def with_unit_dim(self) -> _Window:
        """The same window with a unit spatial dimension in front (1-D as 2-D)."""
        return _Window(
            (1, *self.kernel),
            (1, *self.strides),
            (1, *self.dilations),
            (0, *self.begin),
            (0, *self.end),
            (1, *self.out),
            (0, *self.reach),
        )

    def taps(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.kernel)))

    def positions(self, i: int, tap: int) -> Array:
        """Input positions (unpadded coordinates) that tap `tap` reads along dim i."""
        return np.arange(self.out[i]) * self.strides[i] - self.begin[i] + tap * self.dilations[i]


def _spatial_list(b: Builder, attrs: Attrs, name: str, count: int, default: int) -> list[int]:
    values = list(attrs.get(name) or [default] * count)
    if len(values) != count:
        raise b.fail(f"{name} has {len(values)} entries, expected {count} (one per spatial dim)")
    return [int(v) for v in values]


def _same_pads(
    b: Builder, auto_pad: str, spatial: Sequence[int], strides: Sequence[int], extents: list[int]
) -> tuple[list[int], list[int], list[int]]:
    out = [math.ceil(size / s) for size, s in zip(spatial, strides, strict=True)]
    begin: list[int] = []
    end: list[int] = []
    for size, s, e, o in zip(spatial, strides, extents, out, strict=True):
        total = max((o - 1) * s + e - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return begin, end, out


def _window(
    b: Builder, attrs: Attrs, spatial: Sequence[int], kernel: Sequence[int], ceil: bool = False
) -> _Window:
    """The window of a Conv or pooling node: ONNX pads or auto_pad, ceil_mode's output size
    (a last window must start inside the input or its begin padding)."""
    n = len(spatial)
    if len(kernel) != n:
        raise b.fail(f"kernel has {len(kernel)} spatial dims, the input {n}")
    strides = _spatial_list(b, attrs, "strides", n, 1)
    dilations = _spatial_list(b, attrs, "dilations", n, 1)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    auto_pad = _text(attrs, "auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end, out = _same_pads(b, auto_pad, spatial, strides, extents)
    else:
        pads = [0] * 2 * n if auto_pad == "VALID" else _spatial_list(b, attrs, "pads", 2 * n, 0)
        begin, end = pads[:n], pads[n:]
        out: list[int] = []
        for size, s, e, lo, hi in zip(spatial, strides, extents, begin, end, strict=True):
            span = size + lo + hi - e
            count = (-(-span // s) if ceil else span // s) + 1
            if ceil and (count - 1) * s >= size + lo:
                count -= 1
            out.append(count)
    if min(out) < 1:
        raise b.fail(f"the window does not fit the input ({rules.format_shape(spatial)})")
    reach = [
        max(0, (o - 1) * s + e - (size + lo + hi))
        for o, s, e, size, lo, hi in zip(out, strides, extents, spatial, begin, end, strict=True)
    ]
    return _Window(
        tuple(int(k) for k in kernel),
        tuple(strides),
        tuple(dilations),
        tuple(begin),
        tuple(end),
        tuple(out),
        tuple(reach),
    )


def _window_taps(b: Builder, x: Value, win: _Window, fill: float) -> list[Value]:
    """For each kernel tap, the strided slice of the padded input it reads at every output
    position ([N, C, *out]); padding (and ceil_mode's reach) reads `fill`."""
    lead = list(shape_of(x)[:2])
    padded = pad_or_crop(
        b,
        x,
        [0, 0, *win.begin],
        [0, 0, *(e + r for e, r in zip(win.end, win.reach, strict=True))],
        fill,
    )
    slices: list[Value] = []
    for tap in win.taps():
        starts = [0, 0, *(t * d for t, d in zip(tap, win.dilations, strict=True))]
        slices.append(strided_slice(b, padded, starts, [*lead, *win.out], [1, 1, *win.strides]))
    return slices


# ---- convolution --------------------------------------------------------------------------


def _conv2d(b: Builder, x: Value, w: Value, win: _Window, groups: int) -> Value:
    padding = [*win.begin, *win.end]
    out = rules.conv2d_shape(shape_of(x), shape_of(w), win.strides, padding, win.dilations, groups)
    return b.op(
        graph.Conv2dOp,
        [x, w],
        out,
        strides=i64_array(win.strides),
        padding=i64_array(padding),
        dilations=i64_array(win.dilations),
        groups=i64_attr(groups),
    )


def _conv_nd(b: Builder, x: Value, w: Value, win: _Window, groups: int) -> Value:
    """N-D convolution (no bias) on graph.conv2d: 1-D with a unit dim, 3-D and up with
    the leading ("depth") kernel taps stacked into the channels."""
    shape, w_shape = shape_of(x), shape_of(w)
    if len(shape) == 4:
        return _conv2d(b, x, w, win, groups)
    if len(shape) == 3:
        x4 = b.reshape(x, [shape[0], shape[1], 1, shape[2]])
        w4 = b.reshape(w, [w_shape[0], w_shape[1], 1, w_shape[2]])
        result = _conv2d(b, x4, w4, win.with_unit_dim(), groups)
        return b.reshape(result, [shape[0], w_shape[0], win.out[0]])
    return _conv_depth(b, x, w, win, groups)


def _conv_depth(b: Builder, x: Value, w: Value, win: _Window, groups: int) -> Value:
    """A convolution over k > 2 spatial dims as one conv2d over the last two: each output
    depth position becomes a batch entry whose channels are the depth taps it reads
    (grouped as [group, tap, channel] so that groups still work)."""
    shape, w_shape = shape_of(x), shape_of(w)
    n, c, depth = shape[0], shape[1], len(shape) - 4
    o, cg = w_shape[0], w_shape[1]
    plane = shape[-2:]
    depth_win = _Window(
        win.kernel[:depth],
        win.strides[:depth],
        win.dilations[:depth],
        win.begin[:depth],
        win.end[:depth],
        win.out[:depth],
        (0,) * depth,
    )
    padded = pad_or_crop(b, x, [0, 0, *depth_win.begin, 0, 0], [0, 0, *depth_win.end, 0, 0])
    taps = depth_win.taps()
    stacked: list[Value] = []
    for tap in taps:
        starts = [0, 0, *(t * d for t, d in zip(tap, depth_win.dilations, strict=True)), 0, 0]
        sizes = [n, c, *depth_win.out, *plane]
        part = strided_slice(b, padded, starts, sizes, [1, 1, *depth_win.strides, 1, 1])
        stacked.append(b.reshape(part, [n, 1, c, *depth_win.out, *plane]))
    p, outs = len(taps), math.prod(depth_win.out)
    joined = b.reshape(_concat(b, stacked, 1), [n, p, groups, c // groups, *depth_win.out, *plane])
    perm = [0, *range(4, 4 + depth), 2, 1, 3, 4 + depth, 5 + depth]
    x2 = b.reshape(_transpose(b, joined, perm), [n * outs, c * p, *plane])
    w_perm = [0, *range(2, 2 + depth), 1, 2 + depth, 3 + depth]
    w2 = b.reshape(_transpose(b, w, w_perm), [o, p * cg, *w_shape[-2:]])
    plane_win = _Window(
        win.kernel[depth:],
        win.strides[depth:],
        win.dilations[depth:],
        win.begin[depth:],
        win.end[depth:],
        win.out[depth:],
        (0, 0),
    )
    result = _conv2d(b, x2, w2, plane_win, groups)
    result = b.reshape(result, [n, *depth_win.out, o, *win.out[depth:]])
    return _transpose(b, result, [0, depth + 1, *range(1, depth + 1), depth + 2, depth + 3])


def add_bias(b: Builder, result: Value, bias: Value | None) -> Value:
    """`result` (N, C, ...) plus a per-channel `bias` (C), if there is one."""
    if bias is None:
        return result
    rank = len(shape_of(result))
    return b.binary(graph.AddOp, result, b.reshape(bias, [shape_of(bias)[0], *[1] * (rank - 2)]))


def _check_conv_shapes(b: Builder, x: Value, w: Value, channels: int, groups: int) -> None:
    if len(shape_of(x)) < 3:
        raise b.fail(f"{b.op_type} needs an input of rank >= 3, got {len(shape_of(x))}")
    if len(shape_of(w)) != len(shape_of(x)):
        raise b.fail(f"weight rank {len(shape_of(w))} differs from input rank")
    if groups < 1 or shape_of(x)[1] % groups or channels % groups:
        raise b.fail(f"group {groups} does not divide the channels")


@converter("Conv")
def conv(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, w, bias = required(inputs, 0), required(inputs, 1), optional(inputs, 2)
    groups = int(attrs.get("group", 1))
    _check_conv_shapes(b, x, w, shape_of(w)[0], groups)
    if shape_of(w)[1] * groups != shape_of(x)[1]:
        raise b.fail(
            f"weight has {shape_of(w)[1]} channels per group, expected {shape_of(x)[1] // groups}"
        )
    win = _window(b, attrs, shape_of(x)[2:], shape_of(w)[2:])
    return [add_bias(b, _conv_nd(b, x, w, win, groups), bias)]


def _transposed_pads(
    b: Builder, attrs: Attrs, natural: list[int], spatial: Sequence[int], strides: list[int]
) -> tuple[list[int], list[int]]:
    """ConvTranspose's begin and end pads (output_shape and auto_pad set them)."""
    n = len(natural)
    auto_pad = _text(attrs, "auto_pad", "NOTSET")
    target: list[int] | None = None
    if "output_shape" in attrs:
        target = [int(v) for v in attrs["output_shape"]][-n:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [size * s for size, s in zip(spatial, strides, strict=True)]
    if target is None:
        pads = [0] * 2 * n if auto_pad == "VALID" else _spatial_list(b, attrs, "pads", 2 * n, 0)
        return pads[:n], pads[n:]
    totals = [nat - t for nat, t in zip(natural, target, strict=True)]
    if auto_pad == "SAME_UPPER":
        return [t // 2 for t in totals], [t - t // 2 for t in totals]
    return [t - t // 2 for t in totals], [t // 2 for t in totals]


def _zero_insert(b: Builder, x: Value, strides: Sequence[int]) -> Value:
    """x with strides[i] - 1 zeros after every element of spatial dim i (trailing ones
    included): [N, C, S] -> [N, C, S * s]."""
    shape = shape_of(x)
    if all(s == 1 for s in strides):
        return x
    split: list[int] = list(shape[:2])
    low: list[int] = [0, 0]
    high: list[int] = [0, 0]
    for size, s in zip(shape[2:], strides, strict=True):
        split += [size, 1] if s > 1 else [size]
        low += [0, 0] if s > 1 else [0]
        high += [0, s - 1] if s > 1 else [0]
    spread = pad_or_crop(b, b.reshape(x, split), low, high)
    return b.reshape(
        spread, [*shape[:2], *(d * s for d, s in zip(shape[2:], strides, strict=True))]
    )


@converter("ConvTranspose")
def _conv_transpose(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """y = conv(zero-inserted x, flipped kernel with in/out channels swapped per group),
    padded by (K - 1) * d less ONNX's pads; negative amounts crop."""
    x, w, bias = required(inputs, 0), required(inputs, 1), optional(inputs, 2)
    groups = int(attrs.get("group", 1))
    _check_conv_shapes(b, x, w, shape_of(w)[1] * groups, groups)
    shape, w_shape = shape_of(x), shape_of(w)
    if w_shape[0] != shape[1]:
        raise b.fail(f"weight has {w_shape[0]} input channels, the input {shape[1]}")
    n, spatial, kernel = len(shape) - 2, shape[2:], w_shape[2:]
    strides = _spatial_list(b, attrs, "strides", n, 1)
    dilations = _spatial_list(b, attrs, "dilations", n, 1)
    extra = _spatial_list(b, attrs, "output_padding", n, 0)
    natural = [
        s * (size - 1) + e + (k - 1) * d + 1
        for s, size, e, k, d in zip(strides, spatial, extra, kernel, dilations, strict=True)
    ]
    begin, end = _transposed_pads(b, attrs, natural, spatial, strides)
    out = [nat - lo - hi for nat, lo, hi in zip(natural, begin, end, strict=True)]
    if min(out) < 1:
        raise b.fail(f"output size {out} is empty")
    low = [(k - 1) * d - lo for k, d, lo in zip(kernel, dilations, begin, strict=True)]
    high = [
        (k - 1) * d - hi + e - (s - 1)
        for k, d, hi, e, s in zip(kernel, dilations, end, extra, strides, strict=True)
    ]
    spread = _zero_insert(b, x, strides)
    crop_low, crop_high = [0, 0, *(min(v, 0) for v in low)], [0, 0, *(min(v, 0) for v in high)]
    spread = pad_or_crop(b, spread, crop_low, crop_high)
    c, og = shape[1], w_shape[1]
    flipped = b.reshape(w, [groups, c // groups, og, *kernel])
    flipped = _transpose(b, flipped, [0, 2, 1, *range(3, 3 + n)])
    flipped = _flip(b, b.reshape(flipped, [groups * og, c // groups, *kernel]), range(2, 2 + n))
    win = _Window(
        tuple(kernel),
        (1,) * n,
        tuple(dilations),
        tuple(max(v, 0) for v in low),
        tuple(max(v, 0) for v in high),
        tuple(out),
        (0,) * n,
    )
    return [add_bias(b, _conv_nd(b, spread, flipped, win, groups), bias)]


# ---- pooling ------------------------------------------------------------------------------


def _pool_window(b: Builder, x: Value, attrs: Attrs) -> _Window:
    if len(shape_of(x)) < 3:
        raise b.fail(f"{b.op_type} needs an input of rank >= 3, got {len(shape_of(x))}")
    if "kernel_shape" not in attrs:
        raise b.fail("kernel_shape is missing")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    return _window(b, attrs, shape_of(x)[2:], kernel, bool(attrs.get("ceil_mode", 0)))


def _native_pool(
    b: Builder, x: Value, win: _Window, op_type: type[graph.Pool2dOp], include_pad: bool
) -> Value | None:
    """The pooling as graph.max_pool2d/avg_pool2d where those compute it (rank 3 or 4, no
    dilation; ceil_mode's reach is extra end padding, which they never count unless
    count_include_pad would count it too); None otherwise."""
    shape = shape_of(x)
    if len(shape) not in (3, 4) or any(d != 1 for d in win.dilations):
        return None
    if include_pad and any(win.reach):
        return None
    x4, win4 = x, win
    if len(shape) == 3:
        x4, win4 = b.reshape(x, [shape[0], shape[1], 1, shape[2]]), win.with_unit_dim()
    padding = [*win4.begin, *(e + r for e, r in zip(win4.end, win4.reach, strict=True))]
    out = rules.pool2d_shape(shape_of(x4), win4.kernel, win4.strides, padding)
    if tuple(out[2:]) != win4.out:
        return None
    properties: dict[str, Attribute] = {
        "kernel": i64_array(win4.kernel),
        "strides": i64_array(win4.strides),
        "padding": i64_array(padding),
    }
    if include_pad:
        properties["count_include_pad"] = UnitAttr()
    result = b.op(op_type, [x4], out, **properties)
    return b.reshape(result, [*shape[:2], *win.out])


def _lowest(b: Builder, x: Value) -> float:
    dtype = _dtype(b, x)
    if np.issubdtype(dtype, np.floating):
        return -math.inf
    return float(np.iinfo(dtype).min)


def _window_max(b: Builder, x: Value, win: _Window) -> Value:
    slices = _window_taps(b, x, win, _lowest(b, x))
    result = slices[0]
    for part in slices[1:]:
        result = b.binary(graph.MaxOp, result, part)
    return result


def _window_counts(shape: Sequence[int], win: _Window, include_pad: bool) -> Array:
    """How many taps of each window read the input (or, include_pad, the input or its
    explicit pads, never ceil_mode's reach): ONNX AveragePool's divisors, [*out]."""
    counts = np.ones((), np.int64)
    for i, size in enumerate(shape):
        low, high = (-win.begin[i], size + win.end[i]) if include_pad else (0, size)
        taps = np.stack([win.positions(i, t) for t in range(win.kernel[i])])
        per_dim = ((taps >= low) & (taps < high)).sum(axis=0)
        counts = np.multiply.outer(counts, per_dim)
    return counts


@converter("MaxPool")
def _max_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    win = _pool_window(b, x, attrs)
    if len(b.outputs) > 1 and b.outputs[1]:
        return list(_max_pool_indices(b, x, win, int(attrs.get("storage_order", 0))))
    native = _native_pool(b, x, win, graph.MaxPool2dOp, False)
    return [native if native is not None else _window_max(b, x, win)]


def _max_pool_indices(
    b: Builder, x: Value, win: _Window, storage_order: int
) -> tuple[Value, Value]:
    """Values and flat indices of each window's (first) maximum: a running max over the
    taps, with the index of the tap that won. Indices count row-major (storage_order 0)
    or column-major (1) over the unpadded spatial dims, then channel and batch."""
    shape = shape_of(x)
    spatial = shape[2:]
    order = range(len(spatial)) if storage_order else range(len(spatial) - 1, -1, -1)
    steps = [0] * len(spatial)
    step = 1
    for i in order:
        steps[i], step = step, step * spatial[i]
    best: Value | None = None
    index: Value | None = None
    for tap, part in zip(win.taps(), _window_taps(b, x, win, _lowest(b, x)), strict=True):
        flat = np.zeros(win.out, np.int64)
        for i, t in enumerate(tap):
            flat = flat + _trailing(win.positions(i, t) * steps[i], len(spatial) - i)
        if best is None or index is None:
            best, index = part, flat
            continue
        wins = b.compare("gt", part, best)
        element = element_of(part, b.node)
        best = b.op(graph.SelectOp, [wins, part, best], shape_of(part), element)
        index = b.op(graph.SelectOp, [wins, flat, index], shape_of(part), element_of(flat, b.node))
    assert best is not None and index is not None
    base = (np.arange(shape[0] * shape[1], dtype=np.int64) * math.prod(spatial)).reshape(
        shape[0], shape[1], *[1] * len(spatial)
    )
    return best, b.binary(graph.AddOp, index, base)


@converter("AveragePool")
def _avg_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    win = _pool_window(b, x, attrs)
    include_pad = bool(attrs.get("count_include_pad", 0))
    native = _native_pool(b, x, win, graph.AvgPool2dOp, include_pad)
    if native is not None:
        return [native]
    total = _sum(b, _window_taps(b, x, win, 0.0))
    counts = _window_counts(shape_of(x)[2:], win, include_pad)
    return [b.binary(graph.DivOp, total, _constant_like(b, counts, x))]


def _power(b: Builder, x: Value, p: float) -> Value:
    """|x| ** p (x * x for p = 2)."""
    if p == 2:
        return b.binary(graph.MulOp, x, x)
    magnitude = b.unary(graph.AbsOp, x)
    return magnitude if p == 1 else b.binary(graph.PowOp, magnitude, np.array(p, np.float32))


def _root(b: Builder, x: Value, p: float) -> Value:
    if p == 2:
        return b.unary(graph.SqrtOp, x)
    return x if p == 1 else b.binary(graph.PowOp, x, np.array(1.0 / p, np.float32))


@converter("LpPool")
def _lp_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """(sum over the window of |x| ** p) ** (1 / p); padding adds nothing. A window that
    ceil_mode extends past the padded input is scaled up to the full window, as ONNX's
    reference and PyTorch define it (the mean of |x| ** p over its part, times the window
    size)."""
    x = required(inputs)
    win = _pool_window(b, x, attrs)
    p = float(attrs.get("p", 2))
    total = _sum(b, _window_taps(b, _power(b, x, p), win, 0.0))
    counts = _window_counts(shape_of(x)[2:], win, True)
    size = math.prod(win.kernel)
    if np.any(counts != size):
        scale = (size / counts).astype(np.float32)
        total = b.binary(graph.MulOp, total, _constant_like(b, scale, x))
    return [_root(b, total, p)]


@converter("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    axes = list(range(2, len(shape_of(x))))
    if b.op_type == "GlobalLpPool":
        p = float(attrs.get("p", 2))
        return [_root(b, b.reduce(graph.ReduceSumOp, _power(b, x, p), axes, True), p)]
    op_type = graph.ReduceMeanOp if b.op_type == "GlobalAveragePool" else graph.ReduceMaxOp
    return [b.reduce(op_type, x, axes, True)]


# ---- normalization ------------------------------------------------------------------------


@converter("InstanceNormalization")
def _instance_norm(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """(x - mean) / sqrt(var + epsilon) * scale + bias, statistics per sample and channel."""
    x, scale, bias = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    rank = len(shape_of(x))
    if rank < 3:
        raise b.fail(f"InstanceNormalization needs an input of rank >= 3, got {rank}")
    axes = list(range(2, rank))
    centred = b.binary(graph.SubOp, x, b.reduce(graph.ReduceMeanOp, x, axes, True))
    variance = b.reduce(graph.ReduceMeanOp, b.binary(graph.MulOp, centred, centred), axes, True)
    epsilon = np.array(float(attrs.get("epsilon", 1e-5)), np.float32)
    inverse = b.unary(graph.RsqrtOp, b.binary(graph.AddOp, variance, epsilon))
    channels = [shape_of(x)[1], *[1] * (rank - 2)]
    result = b.binary(
        graph.MulOp, centred, b.binary(graph.MulOp, inverse, b.reshape(scale, channels))
    )
    return [b.binary(graph.AddOp, result, b.reshape(bias, channels))]


@converter("LpNormalization")
def _lp_normalization(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise b.fail(f"LpNormalization p={p}: only 1 and 2 are defined")
    axis = rules.normalize_axis(int(attrs.get("axis", -1)), len(shape_of(x)))
    norm = _root(b, b.reduce(graph.ReduceSumOp, _power(b, x, p), [axis], True), p)
    # A zero vector stays zero (ONNX's reference), not 0/0.
    element = element_of(x, b.node)
    zero = np.zeros((), numpy_dtype(element))
    normed = b.binary(graph.DivOp, x, norm)
    empty = b.compare("eq", norm, zero)
    return [b.op(graph.SelectOp, [empty, zero, normed], shape_of(x), element)]


@converter("LRN")
def _lrn(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """x / (bias + alpha / size * (sum of x ** 2 over a window of channels)) ** beta."""
    x = required(inputs)
    shape = shape_of(x)
    if len(shape) < 3:
        raise b.fail(f"LRN needs an input of rank >= 3, got {len(shape)}")
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    zeros = [0] * (len(shape) - 2)
    squares = pad_or_crop(b, b.binary(graph.MulOp, x, x), [0, before, *zeros], [0, after, *zeros])
    parts = [
        strided_slice(b, squares, [0, i, *zeros], shape, [1] * len(shape)) for i in range(size)
    ]
    scaled = b.binary(graph.MulOp, _sum(b, parts), np.array(alpha / size, np.float32))
    base = b.binary(graph.AddOp, scaled, np.array(bias, np.float32))
    return [b.binary(graph.DivOp, x, b.binary(graph.PowOp, base, np.array(beta, np.float32)))]


# ---- Resize -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Resize:
    """Resize's attributes (opset 11-19), with the defaults ONNX gives them."""

    mode: str = "nearest"
    transform: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0

    @staticmethod
    def of(attrs: Attrs) -> _Resize:
        return _Resize(
            _text(attrs, "mode", "nearest"),
            _text(attrs, "coordinate_transformation_mode", "half_pixel"),
            _text(attrs, "nearest_mode", "round_prefer_floor"),
            float(attrs.get("cubic_coeff_a", -0.75)),
            bool(attrs.get("exclude_outside", 0)),
            bool(attrs.get("antialias", 0)),
            float(attrs.get("extrapolation_value", 0.0)),
        )


_TRANSFORMS = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)


def _source_coordinates(
    how: _Resize, size: int, out: int, scale: float, roi: tuple[float, float]
) -> Array:
    """Where each output position samples the input, in input coordinates. As ONNX's
    reference does, the resized length is scale * size, not rounded."""
    y = np.arange(out, dtype=np.float64)
    length = scale * size
    if how.transform == "align_corners":
        return np.zeros(out) if length == 1 else y * (size - 1) / (length - 1)
    if how.transform == "asymmetric":
        return y / scale
    if how.transform == "tf_crop_and_resize":
        start, end = roi
        if length == 1:
            return np.full(out, (end - start) * (size - 1) / 2 + start * (size - 1))
        return y * (end - start) * (size - 1) / (length - 1) + start * (size - 1)
    if how.transform == "pytorch_half_pixel" and length == 1:
        return np.full(out, -0.5)
    offset = 0.0
    if how.transform == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / length)
    return offset + (y + 0.5) / scale - 0.5


def _cubic(distance: Array, a: float) -> Array:
    """Keys' cubic convolution kernel with coefficient a."""
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _nearest_offset(how: _Resize, ratio: Array) -> Array:
    """0 (the position left of x) or 1 (the next); ratio is in (0, 1], 1 when x is whole."""
    choices = {
        "round_prefer_floor": ratio > 0.5,
        "round_prefer_ceil": ratio >= 0.5,
        "floor": ratio == 1,
        "ceil": np.ones_like(ratio, bool),
    }
    return choices[how.nearest_mode].astype(np.int64)


def _filter_taps(how: _Resize, ratio: Array, scale: float) -> tuple[Array, Array]:
    """Tap offsets (from the position left of x) and their weights, [out, taps]."""
    stretch = min(scale, 1.0) if how.antialias else 1.0
    support = 1.0 if how.mode == "linear" else 2.0
    first = int(math.floor(-support / stretch) + 1)
    offsets = np.arange(first, 2 - first)
    distance = (offsets[None, :] - ratio[:, None]) * stretch
    if how.mode == "linear":
        weights = np.clip(1 - np.abs(distance), 0, 1)
    else:
        weights = _cubic(distance, how.cubic_a)
    if how.antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return offsets, weights


def _axis_sampling(
    how: _Resize, size: int, out: int, scale: float, roi: tuple[float, float]
) -> tuple[Array, Array | None, Array | None]:
    """Input indices [out, taps] each output position reads along one axis, their weights
    (None for nearest) and which positions take the extrapolation value (or None)."""
    x = _source_coordinates(how, size, out, scale, roi)
    left = np.ceil(x).astype(np.int64) - 1
    ratio = x - left
    outside = None
    if how.transform == "tf_crop_and_resize":
        outside = (x < 0) | (x > size - 1)
    if how.mode == "nearest":
        index = left + _nearest_offset(how, ratio)
        return np.clip(index, 0, size - 1)[:, None], None, outside
    offsets, weights = _filter_taps(how, ratio, scale)
    index = left[:, None] + offsets[None, :]
    if how.exclude_outside:
        weights = np.where((index < 0) | (index >= size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, size - 1), weights, outside


def _resample_axis(
    b: Builder, x: Value, axis: int, sampling: tuple[Array, Array | None, Array | None], fill: float
) -> Value:
    """Gathers along `axis` at each tap's indices, weighted and summed."""
    index, weights, outside = sampling
    rank = len(shape_of(x))
    if weights is None:
        result = _take(b, x, index[:, 0], axis)
    else:
        parts: list[Value] = []
        for tap in range(index.shape[1]):
            if not weights[:, tap].any():
                continue
            gathered = _take(b, x, index[:, tap], axis)
            weight = _trailing(_constant_like(b, weights[:, tap], x), rank - axis)
            parts.append(b.binary(graph.MulOp, gathered, weight))
        result = _sum(b, parts)
    if outside is not None and outside.any():
        mask = _trailing(outside, rank - axis)
        value = _constant_like(b, np.array(fill), x)
        result = b.op(
            graph.SelectOp, [mask, value, result], shape_of(result), element_of(result, b.node)
        )
    return result


def _floats(b: Builder, value: Value, what: str) -> list[float]:
    """A known float array as a list; an SSA value is refused, naming the input."""
    if isinstance(value, SSAValue):
        raise b.fail(b.must_be_constant(value, what))
    return [float(v) for v in np.asarray(value, np.float64).reshape(-1)]


def _present(value: Value | None) -> Value | None:
    """An optional input given as an empty tensor counts as absent."""
    if value is None or math.prod(shape_of(value)) == 0:
        return None
    return value


def _resize_targets(
    b: Builder, inputs: Inputs, attrs: Attrs, shape: Sequence[int], axes: list[int]
) -> tuple[list[float], list[int]]:
    """Scale and output size per axis in `axes`, from the scales or the sizes input."""
    scales_in, sizes_in = _present(optional(inputs, 2)), _present(optional(inputs, 3))
    if sizes_in is not None:
        sizes = b.ints(sizes_in, "sizes")
        if len(sizes) != len(axes):
            raise b.fail(f"sizes has {len(sizes)} entries, expected {len(axes)}")
        scales = [s / shape[a] for s, a in zip(sizes, axes, strict=True)]
        policy = _text(attrs, "keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            return scales, sizes
        if policy not in ("not_larger", "not_smaller"):
            raise b.fail(f"keep_aspect_ratio_policy {policy!r} is not defined")
        scale = min(scales) if policy == "not_larger" else max(scales)
        return [scale] * len(axes), [int(scale * shape[a] + 0.5) for a in axes]
    if scales_in is None:
        raise b.fail("Resize needs scales or sizes")
    scales = _floats(b, scales_in, "scales")
    if len(scales) != len(axes):
        raise b.fail(f"scales has {len(scales)} entries, expected {len(axes)}")
    if min(scales) <= 0:
        raise b.fail(f"scales must be positive, got {scales}")
    return scales, [int(s * shape[a]) for s, a in zip(scales, axes, strict=True)]


def _resize(
    b: Builder,
    x: Value,
    how: _Resize,
    axes: list[int],
    targets: tuple[list[float], list[int]],
    roi: list[float] | None,
) -> Value:
    if how.mode not in ("nearest", "linear", "cubic"):
        raise b.fail(f"Resize mode {how.mode!r} is not defined")
    if how.transform not in _TRANSFORMS:
        raise b.fail(f"coordinate_transformation_mode {how.transform!r} is not defined")
    if how.mode != "nearest" and not _is_float(b, x):
        raise b.fail(f"Resize mode {how.mode!r} on integers is not supported")
    shape = shape_of(x)
    for i, (axis, scale, out) in enumerate(zip(axes, *targets, strict=True)):
        bounds = (0.0, 1.0) if roi is None else (roi[i], roi[i + len(axes)])
        if math.isclose(scale, 1.0) and out == shape[axis] and bounds == (0.0, 1.0):
            continue
        if out < 1:
            raise b.fail(f"Resize output size {out} on axis {axis} is empty")
        sampling = _axis_sampling(how, shape[axis], out, scale, bounds)
        x = _resample_axis(b, x, axis, sampling, how.extrapolation)
    return x


@converter("Resize")
def _resize_node(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    rank = len(shape_of(x))
    if len(inputs) == 2:  # opset 10: (X, scales), as Upsample
        return _upsample(b, inputs, attrs)
    axes = [rules.normalize_axis(int(a), rank) for a in attrs.get("axes", range(rank))]
    how = _Resize.of(attrs)
    roi_in = _present(optional(inputs, 1))
    roi = None
    if how.transform == "tf_crop_and_resize":
        if roi_in is None:
            raise b.fail("tf_crop_and_resize needs the roi input")
        roi = _floats(b, roi_in, "roi")
        if len(roi) != 2 * len(axes):
            raise b.fail(f"roi has {len(roi)} entries, expected {2 * len(axes)}")
    targets = _resize_targets(b, inputs, attrs, shape_of(x), axes)
    return [_resize(b, x, how, axes, targets, roi)]


@converter("Upsample")
def _upsample(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Upsample (and opset-10 Resize): scales, asymmetric coordinates, nearest rounds down."""
    x = required(inputs)
    rank = len(shape_of(x))
    scales = attrs.get("scales")
    if scales is None:
        scales = _floats(b, required(inputs, 1), "scales")
    how = replace(_Resize.of(attrs), transform="asymmetric", nearest_mode="floor")
    axes = list(range(rank))
    outs = [int(s * d) for s, d in zip(scales, shape_of(x), strict=True)]
    return [_resize(b, x, how, axes, ([float(s) for s in scales], outs), None)]


# ---- Col2Im -------------------------------------------------------------------------------


def _col2im_sources(image: Sequence[int], win: _Window, blocks: Sequence[int]) -> Array:
    """For each image position, the columns (block tap * blocks + block) that add into it,
    [positions, most], padded with the index one past the last column (a zero)."""
    kernel_count, block_count = math.prod(win.kernel), math.prod(blocks)
    sources: list[list[int]] = [[] for _ in range(math.prod(image))]
    for k, tap in enumerate(win.taps()):
        for block, where in enumerate(itertools.product(*(range(n) for n in blocks))):
            position = [
                o * s - lo + t * d
                for o, s, lo, t, d in zip(
                    where, win.strides, win.begin, tap, win.dilations, strict=True
                )
            ]
            if all(0 <= p < size for p, size in zip(position, image, strict=True)):
                flat = int(np.ravel_multi_index(tuple(position), tuple(image)))
                sources[flat].append(k * block_count + block)
    most = max(1, *(len(s) for s in sources))
    table = np.full((len(sources), most), kernel_count * block_count, np.int64)
    for flat, columns in enumerate(sources):
        table[flat, : len(columns)] = columns
    return table


@converter("Col2Im")
def _col2im(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Sum of the sliding blocks into the image: per image position, gathers of the
    columns that cover it (a constant table), summed."""
    x = required(inputs)
    image = b.ints(required(inputs, 1), "image_shape")
    block = b.ints(required(inputs, 2), "block_shape")
    shape = shape_of(x)
    if len(shape) != 3 or len(image) != len(block):
        raise b.fail("Col2Im needs a [N, C * prod(block_shape), L] input")
    win = _window(b, attrs, image, block)
    kernel_count = math.prod(block)
    if shape[1] % kernel_count or math.prod(win.out) != shape[2]:
        raise b.fail(f"input {rules.format_shape(shape)} does not match the blocks {win.out}")
    n, c = shape[0], shape[1] // kernel_count
    columns = b.reshape(x, [n, c, kernel_count * shape[2]])
    columns = pad_or_crop(b, columns, [0, 0, 0], [0, 0, 1])
    table = _col2im_sources(image, win, win.out)
    parts = [_take(b, columns, table[:, t], 2) for t in range(table.shape[1])]
    return [b.reshape(_sum(b, parts), [n, c, *image])]


# ---- GridSample ---------------------------------------------------------------------------


def _floor(b: Builder, x: Value) -> Value:
    """floor(x) from a truncating cast: trunc(x) - 1 where that is above x."""
    element = element_of(x, b.node)
    truncated = b.cast(b.cast(x, IntegerType(64)), element)
    above = b.compare("gt", truncated, x)
    one = _constant_like(b, np.array(1.0), x)
    zero = _constant_like(b, np.array(0.0), x)
    step = b.op(graph.SelectOp, [above, one, zero], shape_of(above), element)
    return b.binary(graph.SubOp, truncated, step)


def _where(b: Builder, condition: Value, on_true: Value, on_false: Value) -> Value:
    on_true, on_false = b.same_element(on_true, on_false)
    shape = rules.broadcast_shapes(shape_of(condition), shape_of(on_true), shape_of(on_false))
    element = element_of(on_true if isinstance(on_true, SSAValue) else on_false, b.node)
    return b.op(graph.SelectOp, [condition, on_true, on_false], shape, element)


def _scalar(b: Builder, value: float, like: Value) -> Array:
    return _constant_like(b, np.array(value), like)


def _reflect(b: Builder, v: Value, low: float, high: float) -> Value:
    """v folded back into [low, high] by mirroring at the borders (ONNX GridSample)."""
    span = high - low
    below = b.compare("lt", v, _scalar(b, low, v))
    above = b.compare("gt", v, _scalar(b, high, v))
    distance = _where(
        b,
        below,
        b.binary(graph.SubOp, _scalar(b, low, v), v),
        b.binary(graph.SubOp, v, _scalar(b, high, v)),
    )
    folds = _floor(b, b.binary(graph.DivOp, distance, _scalar(b, span, v)))
    rest = b.binary(graph.SubOp, distance, b.binary(graph.MulOp, folds, _scalar(b, span, v)))
    half = _floor(b, b.binary(graph.MulOp, folds, _scalar(b, 0.5, v)))
    even = b.compare("eq", folds, b.binary(graph.MulOp, half, _scalar(b, 2.0, v)))
    from_low = b.binary(graph.AddOp, _scalar(b, low, v), rest)
    from_high = b.binary(graph.SubOp, _scalar(b, high, v), rest)
    inside = _where(b, above, _where(b, even, from_high, from_low), v)
    return _where(b, below, _where(b, even, from_low, from_high), inside)


def _clamp(b: Builder, v: Value, low: float, high: float) -> Value:
    v = b.binary(graph.MaxOp, v, _scalar(b, low, v))
    return b.binary(graph.MinOp, v, _scalar(b, high, v))


def _round_half_even(b: Builder, v: Value) -> Value:
    down = _floor(b, v)
    fraction = b.binary(graph.SubOp, v, down)
    half = _floor(b, b.binary(graph.MulOp, down, _scalar(b, 0.5, v)))
    odd = b.compare("ne", down, b.binary(graph.MulOp, half, _scalar(b, 2.0, v)))
    tie = b.compare("eq", fraction, _scalar(b, 0.5, v))
    up = _where(b, tie, odd, b.compare("gt", fraction, _scalar(b, 0.5, v)))
    return b.binary(graph.AddOp, down, _where(b, up, _scalar(b, 1.0, v), _scalar(b, 0.0, v)))


@dataclass(frozen=True)
class _Sampler:
    """GridSample's attributes and one spatial dim's size."""

    padding: str
    align_corners: bool
    size: int

    def borders(self) -> tuple[float, float]:
        return (0.0, self.size - 1.0) if self.align_corners else (-0.5, self.size - 0.5)


def _grid_coordinate(b: Builder, g: Value, s: _Sampler, mode: str) -> Value:
    """The input coordinate a normalized grid value samples, padding mode applied (not for
    cubic, whose taps each get it, as onnxruntime and PyTorch do)."""
    if s.align_corners:
        x = b.binary(
            graph.MulOp,
            b.binary(graph.AddOp, g, _scalar(b, 1.0, g)),
            _scalar(b, (s.size - 1) / 2, g),
        )
    else:
        scaled = b.binary(
            graph.MulOp, b.binary(graph.AddOp, g, _scalar(b, 1.0, g)), _scalar(b, s.size / 2, g)
        )
        x = b.binary(graph.SubOp, scaled, _scalar(b, 0.5, g))
    if mode == "nearest":
        x = _round_half_even(b, x)
    if mode == "cubic":
        return x
    if s.padding == "border":
        return _clamp(b, x, 0.0, s.size - 1.0)
    if s.padding == "reflection":
        return _reflect(b, x, *s.borders())
    return x


def _grid_tap(b: Builder, index: Value, s: _Sampler) -> tuple[Value, Value | None]:
    """A tap's index made readable (clamped, reflected) and, for zeros padding, whether it
    lies inside the input."""
    if s.padding == "zeros":
        inside_low = b.compare("ge", index, _scalar(b, 0.0, index))
        inside_high = b.compare("le", index, _scalar(b, s.size - 1.0, index))
        inside = _where(b, inside_low, inside_high, inside_low)
        return _clamp(b, index, 0.0, s.size - 1.0), inside
    if s.padding == "reflection":
        index = _reflect(b, index, *s.borders())
    truncated = b.cast(b.cast(index, IntegerType(64)), element_of(index, b.node))
    return _clamp(b, truncated, 0.0, s.size - 1.0), None


def _grid_weights(b: Builder, x: Value, mode: str) -> list[tuple[Value, Value | None]]:
    """(tap index, weight) pairs along one dim; weight None for nearest."""
    if mode == "nearest":
        return [(x, None)]
    left = _floor(b, x)
    ratio = b.binary(graph.SubOp, x, left)
    offsets = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
    taps: list[tuple[Value, Value | None]] = []
    for offset in offsets:
        distance = b.binary(graph.SubOp, ratio, _scalar(b, float(offset), x))
        if mode == "linear":
            weight = b.binary(graph.SubOp, _scalar(b, 1.0, x), b.unary(graph.AbsOp, distance))
        else:
            weight = _cubic_weight(b, distance)
        index = b.binary(graph.AddOp, left, _scalar(b, float(offset), x))
        taps.append((index, weight))
    return taps


def _cubic_weight(b: Builder, distance: Value) -> Value:
    """Keys' kernel (a = -0.75) at |distance| < 2, from its two polynomial pieces."""
    a = -0.75
    d = b.unary(graph.AbsOp, distance)

    def poly(coefficients: Sequence[float]) -> Value:
        result: Value = _scalar(b, coefficients[0], d)
        for c in coefficients[1:]:
            result = b.binary(graph.AddOp, b.binary(graph.MulOp, result, d), _scalar(b, c, d))
        return result

    near = poly([a + 2, -(a + 3), 0.0, 1.0])
    far = poly([a, -5 * a, 8 * a, -4 * a])
    return _where(b, b.compare("le", d, _scalar(b, 1.0, d)), near, far)


@converter("GridSample")
def _grid_sample(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Data-dependent sampling: per dim, tap indices and weights computed from the grid;
    per tap combination, one gather from the input laid out as [N * spatial, C]."""
    x, grid = required(inputs, 0), required(inputs, 1)
    shape, grid_shape = shape_of(x), shape_of(grid)
    rank = len(shape)
    if rank < 3 or len(grid_shape) != rank or grid_shape[-1] != rank - 2:
        raise b.fail("GridSample needs X [N, C, *D] and grid [N, *out, len(D)]")
    if not _is_float(b, x) or not _is_float(b, grid):
        raise b.fail("GridSample on integers is not supported")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(
        _text(attrs, "mode", "linear"), _text(attrs, "mode", "linear")
    )
    padding = _text(attrs, "padding_mode", "zeros")
    if mode not in ("nearest", "linear", "cubic") or padding not in (
        "zeros",
        "border",
        "reflection",
    ):
        raise b.fail(f"GridSample mode {mode!r} with padding {padding!r} is not defined")
    n, spatial, out = shape[0], shape[2:], grid_shape[1:-1]
    grid = b.cast(grid, element_of(x, b.node))
    per_dim: list[list[tuple[Value, Value | None, Value | None]]] = []
    for i, size in enumerate(spatial):
        sampler = _Sampler(padding, bool(attrs.get("align_corners", 0)), size)
        component = len(spatial) - 1 - i  # the grid lists x (the last dim) first
        g = strided_slice(
            b, grid, [0] * (rank - 1) + [component], [*grid_shape[:-1], 1], [1] * rank
        )
        g = b.reshape(g, [n, *out])
        coordinate = _grid_coordinate(b, g, sampler, mode)
        per_dim.append(
            [
                (*_grid_tap(b, index, sampler), weight)
                for index, weight in _grid_weights(b, coordinate, mode)
            ]
        )
    table = b.reshape(_transpose(b, x, [0, *range(2, rank), 1]), [n * math.prod(spatial), shape[1]])
    base = (np.arange(n, dtype=np.float64) * math.prod(spatial)).reshape(n, *[1] * len(out))
    parts: list[Value] = []
    for combination in itertools.product(*per_dim):
        parts.append(_grid_gather(b, table, combination, spatial, _constant_like(b, base, x)))
    result = b.reshape(_sum(b, parts), [n, *out, shape[1]])
    return [_transpose(b, result, [0, rank - 1, *range(1, rank - 1)])]


def _grid_gather(
    b: Builder,
    table: Value,
    combination: Sequence[tuple[Value, Value | None, Value | None]],
    spatial: Sequence[int],
    base: Array,
) -> Value:
    """table rows at one tap combination, times its weight (zero outside, zeros padding)."""
    flat: Value = base
    weight: Value | None = None
    for i, (index, inside, tap_weight) in enumerate(combination):
        step = _scalar(b, float(math.prod(spatial[i + 1 :])), index)
        flat = b.binary(graph.AddOp, flat, b.binary(graph.MulOp, index, step))
        if inside is not None:
            kept = tap_weight if tap_weight is not None else _scalar(b, 1.0, index)
            tap_weight = _where(b, inside, kept, _scalar(b, 0.0, index))
        if tap_weight is not None:
            weight = tap_weight if weight is None else b.binary(graph.MulOp, weight, tap_weight)
    count = math.prod(shape_of(flat))
    rows = b.reshape(b.cast(flat, IntegerType(64)), [count])
    gathered = b.op(graph.GatherOp, [table, rows], [count, shape_of(table)[1]], axis=i64_attr(0))
    if weight is None:
        return gathered
    return b.binary(graph.MulOp, gathered, b.reshape(weight, [count, 1]))


# ---- MaxUnpool ----------------------------------------------------------------------------

_UNPOOL_LIMIT = 1 << 24
"""MaxUnpool compares every output position with every index: refused past this many pairs."""


@converter("MaxUnpool")
def _max_unpool(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """y[p] = x[i] where indices[i] == p, else 0: the computed indices are compared with
    every output position (a duplicate index, from overlapping windows, holds one value).
    As ONNX's reference does, indices address the inferred output shape; output_shape then
    pads it at the end."""
    x, indices = required(inputs, 0), required(inputs, 1)
    shape = shape_of(x)
    if len(shape) < 3 or shape_of(indices) != shape:
        raise b.fail("MaxUnpool needs X and I of the same shape [N, C, *D]")
    if not _is_float(b, x):
        raise b.fail("MaxUnpool on integers is not supported")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    n = len(kernel)
    strides = _spatial_list(b, attrs, "strides", n, 1)
    pads = _spatial_list(b, attrs, "pads", 2 * n, 0)
    out = [
        (size - 1) * s - lo - hi + k
        for size, s, lo, hi, k in zip(shape[2:], strides, pads[:n], pads[n:], kernel, strict=True)
    ]
    target = out if optional(inputs, 2) is None else b.ints(inputs[2], "output_shape")[-n:]
    positions, count = math.prod(out), math.prod(shape[2:])
    if shape[0] * shape[1] * positions * count > _UNPOOL_LIMIT:
        raise b.fail(
            f"MaxUnpool to {rules.format_shape(out)} from {count} values per channel is too "
            "large: computed indices are compared with every output position"
        )
    lead = [shape[0], shape[1]]
    flat_x = b.reshape(x, [*lead, 1, count])
    flat_i = b.reshape(b.cast(indices, IntegerType(64)), [*lead, 1, count])
    targets = np.arange(shape[0] * shape[1] * positions, dtype=np.int64).reshape(
        *lead, positions, 1
    )
    hits = b.compare("eq", flat_i, targets)
    zero, one = _scalar(b, 0.0, x), _scalar(b, 1.0, x)
    total = b.reduce(graph.ReduceSumOp, _where(b, hits, flat_x, zero), [3], False)
    matches = b.reduce(graph.ReduceSumOp, _where(b, hits, one, zero), [3], False)
    result = b.binary(graph.DivOp, total, b.binary(graph.MaxOp, matches, one))
    result = b.reshape(result, [*lead, *out])
    grow = [t - o for t, o in zip(target, out, strict=True)]
    return [pad_or_crop(b, result, [0] * len(shape), [0, 0, *grow])]


# ---- sampling at computed positions: DeformConv, RoiAlign ---------------------------------

SAMPLE_LIMIT = 1 << 24
"""The most data reads (4 per bilinear sample) DeformConv and RoiAlign unroll into one
gather; past it the index tensors alone would take hundreds of MiB."""

I64 = IntegerType(64)


def _float_of(b: Builder, x: Value) -> np.dtype[Any]:
    return numpy_dtype(element_of(x, f"node {b.node}"))


def _known(value: float, like: np.dtype[Any]) -> Array:
    return np.array(value, like)


def _stack_last(b: Builder, values: Sequence[Value]) -> Value:
    """values of one shape stacked along a new last axis."""
    shape = shape_of(values[0])
    return _concat(b, [b.reshape(v, [*shape, 1]) for v in values], len(shape))


def _pick(b: Builder, condition: Value, on_true: Value, on_false: Value) -> Value:
    """graph.select with known operands made of the other's element type."""
    on_true, on_false = b.same_element(on_true, on_false)
    like = on_true if isinstance(on_true, SSAValue) else on_false
    shape = rules.broadcast_shapes(shape_of(condition), shape_of(on_true), shape_of(on_false))
    element = element_of(like, f"node {b.node}")
    return b.op(graph.SelectOp, [condition, on_true, on_false], shape, element)


def _corners_zero_outside(b: Builder, coord: Value, size: int) -> tuple[Value, Value]:
    """Bilinear corners of `coord` along an axis of `size` with zero padding (GridSample,
    align_corners): the floor and the next index, each weighted by its distance to the
    other, a weight 0 for a corner outside [0, size). Index and weight get a last axis of
    2; indices are clamped into range (their weight is 0 then)."""
    dtype = _float_of(b, coord)
    low = b.unary(graph.FloorOp, coord)
    frac = b.binary(graph.SubOp, coord, low)
    weights: list[Value] = []
    indices: list[Value] = []
    for corner, weight in ((low, b.binary(graph.SubOp, _known(1, dtype), frac)), (None, frac)):
        at = corner if corner is not None else b.binary(graph.AddOp, low, _known(1, dtype))
        inside = _pick(
            b,
            b.compare("ge", at, _known(0, dtype)),
            b.compare("le", at, _known(size - 1, dtype)),
            np.array(False),
        )
        weights.append(_pick(b, inside, weight, _known(0, dtype)))
        clamped = b.binary(
            graph.MinOp, b.binary(graph.MaxOp, at, _known(0, dtype)), _known(size - 1, dtype)
        )
        indices.append(b.cast(clamped, I64))
    return _stack_last(b, indices), _stack_last(b, weights)


def _corners_roi(b: Builder, coord: Value, size: int) -> tuple[Value, Value]:
    """RoiAlign's bilinear corners along an axis of `size` (ONNX's reference): a sample
    outside [-1, size] weighs 0; otherwise it is clamped to >= 0, and from size - 1 on both
    corners are the last index."""
    dtype = _float_of(b, coord)
    valid = _pick(
        b,
        b.compare("ge", coord, _known(-1, dtype)),
        b.compare("le", coord, _known(size, dtype)),
        np.array(False),
    )
    coord = b.binary(graph.MaxOp, coord, _known(0, dtype))
    low = b.unary(graph.FloorOp, coord)
    at_end = b.compare("ge", low, _known(size - 1, dtype))
    last = _known(size - 1, dtype)
    low = _pick(b, at_end, last, low)
    high = _pick(b, at_end, last, b.binary(graph.AddOp, low, _known(1, dtype)))
    coord = _pick(b, at_end, low, coord)
    frac = b.binary(graph.SubOp, coord, low)
    weights = [b.binary(graph.SubOp, _known(1, dtype), frac), frac]
    weights = [_pick(b, valid, w, _known(0, dtype)) for w in weights]
    return _stack_last(b, [b.cast(low, I64), b.cast(high, I64)]), _stack_last(b, weights)


def _bilinear_reads(
    b: Builder,
    rows: tuple[Value, Value],
    columns: tuple[Value, Value],
    width: int,
    layout: tuple[Sequence[int], Sequence[int]],
) -> tuple[Value, Value]:
    """Positions in a [H, W] plane flattened and weights of the 4 corners of each sample:
    the rows' corner indices and weights ([..., 2]) and the columns' are reshaped to
    `layout` (row, column shapes that broadcast to [..., 2, 2]) and combined."""
    (row_index, row_weight), (column_index, column_weight) = rows, columns
    r_shape, c_shape = layout
    positions = b.binary(
        graph.AddOp,
        b.binary(graph.MulOp, b.reshape(row_index, r_shape), np.array(width, np.int64)),
        b.reshape(column_index, c_shape),
    )
    weights = b.binary(
        graph.MulOp, b.reshape(row_weight, r_shape), b.reshape(column_weight, c_shape)
    )
    return positions, weights


def _gather_flat(b: Builder, x: Value, positions: Value) -> Value:
    """x flattened, read at `positions` (any shape)."""
    return b.op(
        graph.GatherOp,
        [b.reshape(x, [math.prod(shape_of(x))]), positions],
        shape_of(positions),
        axis=i64_attr(0),
    )


def _check_reads(b: Builder, count: int) -> None:
    if count > SAMPLE_LIMIT:
        raise b.fail(
            f"{b.op_type} would read {count} samples, more than graphfuse unrolls ({SAMPLE_LIMIT})"
        )


@converter("DeformConv")
def _deform_conv(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Deformable convolution (2-D): every kernel tap reads the input at its regular
    position plus a learned offset, by bilinear interpolation with zero padding, times the
    mask; the samples form im2col columns that a (grouped) matmul with the weight sums."""
    x, w, offset = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    bias, mask = optional(inputs, 3), optional(inputs, 4)
    if len(shape_of(x)) != 4 or len(shape_of(w)) != 4:
        raise b.fail("DeformConv is supported for 2-D inputs (NCHW) only")
    n, c, h, width = shape_of(x)
    oc, cpg, kh, kw = shape_of(w)
    groups, offset_groups = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    _check_conv_shapes(b, x, w, oc, groups)
    if cpg * groups != c or c % offset_groups:
        raise b.fail(
            f"channels {c} do not split into {groups} groups / {offset_groups} offset groups"
        )
    win = _window(b, attrs, [h, width], [kh, kw])
    oh, ow = win.out
    taps = kh * kw
    if shape_of(offset) != (n, offset_groups * taps * 2, oh, ow):
        raise b.fail(f"offset of shape {rules.format_shape(shape_of(offset))} does not fit")
    _check_reads(b, n * c * taps * oh * ow * 4)
    dtype = _float_of(b, x)
    moved = b.reshape(offset, [n, offset_groups, taps, 2, oh, ow])
    lead = [n, offset_groups, taps, 1, oh, ow]
    dy = b.reshape(
        strided_slice(b, moved, [0] * 6, lead, [1] * 6), [n, offset_groups, taps, oh, ow]
    )
    dx = b.reshape(
        strided_slice(b, moved, [0, 0, 0, 1, 0, 0], lead, [1] * 6), [n, offset_groups, taps, oh, ow]
    )
    tap_rows, tap_columns = np.divmod(np.arange(taps), kw)
    base_y = (tap_rows * win.dilations[0])[:, None, None] + (
        np.arange(oh) * win.strides[0] - win.begin[0]
    )[None, :, None]
    base_x = (tap_columns * win.dilations[1])[:, None, None] + (
        np.arange(ow) * win.strides[1] - win.begin[1]
    )[None, None, :]
    y = b.binary(graph.AddOp, dy, base_y.astype(dtype))
    x_at = b.binary(graph.AddOp, dx, base_x.astype(dtype))
    taps_shape = [n, offset_groups, taps, oh, ow]
    positions, weights = _bilinear_reads(
        b,
        _corners_zero_outside(b, y, h),
        _corners_zero_outside(b, x_at, width),
        width,
        ([*taps_shape, 2, 1], [*taps_shape, 1, 2]),
    )
    per_group = c // offset_groups
    # [N, G, K, oH, oW, 2, 2] -> [N, G, 1, K, oH, oW, 2, 2] to broadcast over channels
    spread = [n, offset_groups, 1, taps, oh, ow, 2, 2]
    planes = (
        np.arange(n)[:, None, None] * c
        + np.arange(offset_groups)[None, :, None] * per_group
        + np.arange(per_group)[None, None, :]
    ) * (h * width)
    full = [n, offset_groups, per_group, taps, oh, ow, 2, 2]
    index = b.binary(
        graph.AddOp,
        b.reshape(positions, spread),
        planes.reshape([n, offset_groups, per_group, 1, 1, 1, 1, 1]),
    )
    values = b.binary(
        graph.MulOp, _gather_flat(b, x, _broadcast_to(b, index, full)), b.reshape(weights, spread)
    )
    if mask is not None:
        values = b.binary(
            graph.MulOp, values, b.reshape(mask, [n, offset_groups, 1, taps, oh, ow, 1, 1])
        )
    sampled = b.reduce(graph.ReduceSumOp, values, [6, 7], False)
    columns = b.reshape(sampled, [n, groups, cpg * taps, oh * ow])
    kernel = b.reshape(w, [1, groups, oc // groups, cpg * taps])
    out = b.op(graph.MatmulOp, [kernel, columns], [n, groups, oc // groups, oh * ow])
    return [add_bias(b, b.reshape(out, [n, oc, oh, ow]), bias)]


def _broadcast_to(b: Builder, x: Value, shape: Sequence[int]) -> Value:
    if tuple(shape) == shape_of(x):
        return x
    return b.op(graph.BroadcastToOp, [x], shape)


@converter("RoiAlign")
def _roi_align(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Each region of interest pooled to output_height x output_width bins, each bin the
    average (or maximum) of sampling_ratio^2 bilinear samples, as ONNX's reference (max
    mode: the largest weighted corner). The sample positions come from the rois' values:
    corners and weights are computed per axis, then one gather reads them all."""
    x, rois, batch = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    if len(shape_of(x)) != 4 or len(shape_of(rois)) != 2 or shape_of(rois)[1] != 4:
        raise b.fail("RoiAlign takes an NCHW input and rois of shape [R, 4]")
    _, c, h, width = shape_of(x)
    count = shape_of(rois)[0]
    ph, pw = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    grid = int(attrs.get("sampling_ratio", 0))
    if grid <= 0:
        raise b.fail(
            "sampling_ratio 0 (adaptive) makes the number of samples depend on the rois' "
            "values; only a fixed sampling_ratio >= 1 is supported"
        )
    _check_reads(b, count * c * ph * pw * grid * grid * 4)
    mode = _text(attrs, "mode", "avg")
    half_pixel = _text(attrs, "coordinate_transformation_mode", "half_pixel") == "half_pixel"
    scale = float(attrs.get("spatial_scale", 1.0))
    dtype = _float_of(b, x)
    rois = b.cast(rois, element_of(x, f"node {b.node}"))
    ys = _roi_samples(b, rois, 1, ph, grid, scale, half_pixel, dtype)
    xs = _roi_samples(b, rois, 0, pw, grid, scale, half_pixel, dtype)
    layout = ([count, ph * grid, 1, 2, 1], [count, 1, pw * grid, 1, 2])
    positions, weights = _bilinear_reads(
        b, _corners_roi(b, ys, h), _corners_roi(b, xs, width), width, layout
    )
    planes = b.binary(
        graph.AddOp,
        b.reshape(b.binary(graph.MulOp, b.cast(batch, I64), np.array(c, np.int64)), [count, 1]),
        np.arange(c, dtype=np.int64)[None, :],
    )
    plane_size = np.array(h * width, np.int64)
    return [_roi_pool(b, x, positions, weights, planes, plane_size, (ph, pw, grid), mode)]


def _roi_samples(
    b: Builder,
    rois: Value,
    column: int,
    pooled: int,
    grid: int,
    scale: float,
    half_pixel: bool,
    dtype: np.dtype[Any],
) -> Value:
    """The sample coordinates along one axis ([R, pooled * grid]): rois' column `column`
    is the start, `column + 2` the end."""
    count = shape_of(rois)[0]
    start = b.reshape(strided_slice(b, rois, [0, column], [count, 1], [1, 1]), [count, 1])
    end = b.reshape(strided_slice(b, rois, [0, column + 2], [count, 1], [1, 1]), [count, 1])
    offset = _known(0.5 if half_pixel else 0.0, dtype)
    start = b.binary(graph.SubOp, b.binary(graph.MulOp, start, _known(scale, dtype)), offset)
    end = b.binary(graph.SubOp, b.binary(graph.MulOp, end, _known(scale, dtype)), offset)
    length = b.binary(graph.SubOp, end, start)
    if not half_pixel:
        length = b.binary(graph.MaxOp, length, _known(1.0, dtype))
    bin_size = b.binary(graph.DivOp, length, _known(pooled, dtype))
    bins = np.repeat(np.arange(pooled), grid).astype(dtype)[None, :]
    steps = np.tile((np.arange(grid) + 0.5), pooled).astype(dtype)[None, :]
    at_bin = b.binary(graph.AddOp, start, b.binary(graph.MulOp, bins, bin_size))
    sub = b.binary(graph.DivOp, bin_size, _known(grid, dtype))
    return b.binary(graph.AddOp, at_bin, b.binary(graph.MulOp, steps, sub))


def _roi_pool(
    b: Builder,
    x: Value,
    positions: Value,
    weights: Value,
    planes: Value,
    plane_size: Array,
    sizes: tuple[int, int, int],
    mode: str,
) -> Value:
    """Read the corners of every sample of every channel, weight them and pool each bin."""
    ph, pw, grid = sizes
    count, c = shape_of(planes)
    # positions and weights: [R, PH*G, PW*G, 2, 2] (row corner, column corner)
    index = b.binary(
        graph.AddOp,
        b.reshape(positions, [count, 1, ph * grid, pw * grid, 2, 2]),
        b.reshape(b.binary(graph.MulOp, planes, plane_size), [count, c, 1, 1, 1, 1]),
    )
    full = [count, c, ph * grid, pw * grid, 2, 2]
    values = _gather_flat(b, x, _broadcast_to(b, index, full))
    values = b.binary(
        graph.MulOp, values, b.reshape(weights, [count, 1, ph * grid, pw * grid, 2, 2])
    )
    binned = b.reshape(values, [count, c, ph, grid, pw, grid, 2, 2])
    if mode == "max":
        return b.reduce(graph.ReduceMaxOp, binned, [3, 5, 6, 7], False)
    if mode != "avg":
        raise b.fail(f"mode '{mode}' is not supported (avg or max)")
    summed = b.reduce(graph.ReduceSumOp, binned, [3, 5, 6, 7], False)
    return b.binary(graph.DivOp, summed, _known(grid * grid, _float_of(b, x)))
