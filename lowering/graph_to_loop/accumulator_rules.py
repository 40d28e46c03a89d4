"""Value rules of the ops computed with an accumulator: reductions, matmul, conv2d, pooling.

Each element is a `loop.reduce` over the op's reduction space (reduced dims, K, the
window's taps), built where the element is needed: inline at the output point when the
op is computed there, else in the loop that materialises it. Operand copies made before
the kernel's loops (`operand_layouts`) are read where they exist, so the sum walks
contiguous memory and needs no padding test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, i64
from xdsl.ir import Attribute, SSAValue

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import shape_of, tensor_type_of
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.loop.emitter import Emitter, Index, compute_type, is_float, point_index
from graphfuse.lowering.graph_to_loop import index_maps
from graphfuse.lowering.graph_to_loop.element_builder import ElementBuilder
from graphfuse.lowering.graph_to_loop.value_rules import ValueRules

RULES = ValueRules()
"""The rules of this module."""

_REDUCE_KINDS: dict[type[graph.ReduceOp], loop.ReduceKind] = {
    graph.ReduceSumOp: loop.ReduceKind.ADD,
    graph.ReduceMeanOp: loop.ReduceKind.ADD,
    graph.ReduceMaxOp: loop.ReduceKind.MAX,
    graph.ReduceMinOp: loop.ReduceKind.MIN,
    graph.ReduceProdOp: loop.ReduceKind.MUL,
}
_UNSIGNED_KINDS = {
    loop.ReduceKind.MAX: loop.ReduceKind.UMAX,
    loop.ReduceKind.MIN: loop.ReduceKind.UMIN,
}
"""Max and min of unsigned integers compare unsigned."""


def _kind(kind: loop.ReduceKind, element: Attribute) -> loop.ReduceKind:
    """`kind` as it combines elements of tensor element type `element`."""
    return _UNSIGNED_KINDS.get(kind, kind) if graph.is_unsigned(element) else kind


def _accumulate(
    em: Emitter,
    kind: loop.ReduceKind,
    bounds: Sequence[int],
    typ: Attribute,
    body: Callable[[tuple[Index, ...]], SSAValue],
) -> SSAValue:
    """A loop.reduce over `bounds` whose body yields `body(loop indices)`."""
    init = {
        loop.ReduceKind.ADD: lambda: em.constant(0, typ),
        loop.ReduceKind.MUL: lambda: em.constant(1, typ),
        loop.ReduceKind.MAX: lambda: em.lowest(typ),
        loop.ReduceKind.MIN: lambda: em.highest(typ),
        loop.ReduceKind.UMAX: lambda: em.lowest(typ, unsigned=True),
        loop.ReduceKind.UMIN: lambda: em.highest(typ, unsigned=True),
    }[kind]()
    if 0 in bounds:
        return init
    reduce = loop.ReduceOp(kind, bounds, init)
    with em.inside(reduce.body.block):
        element = body(point_index(reduce))
        em.add(loop.YieldOp(element))
    return em.emit(reduce)


@RULES.value(graph.ReduceOp)
def _reduce(builder: ElementBuilder, op: graph.ReduceOp, index: tuple[Index, ...]) -> SSAValue:
    em = builder.em
    in_shape = shape_of(op.input)
    # Sorted: the loop over reduced dims follows dim order, as _reduced_index reads it.
    axes = sorted(rules.normalize_axes(op.axes.get_values(), len(in_shape)))
    keepdims = op.keepdims is not None
    element = tensor_type_of(op.result).get_element_type()
    typ = compute_type(element)
    keep = builder.unkept_rows.pop(op.input, None)

    def body(loop_index: tuple[Index, ...]) -> SSAValue:
        at = _reduced_index(index, loop_index, axes, len(in_shape), keepdims)
        element = builder.value_at(op.input, at)
        if keep is not None:
            em.add(loop.StoreOp(element, keep, [em.index_value(i) for i in at]))
        return element

    kind = _kind(_REDUCE_KINDS[type(op)], element)
    total = _accumulate(em, kind, [in_shape[a] for a in axes], typ, body)
    if keep is not None:
        builder.row_buffers[op.input] = keep
    if not isinstance(op, graph.ReduceMeanOp):
        return total
    count = math.prod(in_shape[a] for a in axes)
    if is_float(typ):
        return em.emit(arith.DivfOp(total, em.constant(float(count), typ)))
    return em.emit(arith.DivSIOp(total, em.constant(max(count, 1), typ)))


def _reduced_index(
    out: Sequence[Index],
    loop_index: Sequence[Index],
    axes: Sequence[int],
    rank: int,
    keepdims: bool,
) -> tuple[Index, ...]:
    """The input index of a reduction: reduced dims from the loop, the rest from `out`."""
    result: list[Index] = []
    outer = iter(out)
    inner = iter(loop_index)
    for dim in range(rank):
        if dim in axes:
            result.append(next(inner))
            if keepdims:
                next(outer)
        else:
            result.append(next(outer))
    return tuple(result)


def _multiply(em: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    return em.emit(arith.MulfOp(a, b) if is_float(a.type) else arith.MuliOp(a, b))


@RULES.value(graph.MatmulOp)
def _matmul(builder: ElementBuilder, op: graph.MatmulOp, index: tuple[Index, ...]) -> SSAValue:
    lhs_shape, rhs_shape = shape_of(op.lhs), shape_of(op.rhs)
    batch, m, n = index[:-2], index[-2], index[-1]
    lhs_batch = index_maps.broadcast(batch, lhs_shape[:-2])
    rhs_batch = index_maps.broadcast(batch, rhs_shape[:-2])
    typ = compute_type(tensor_type_of(op.result).get_element_type())

    transposed = builder.copy_of(op.rhs, "transposed")

    def body(k: tuple[Index, ...]) -> SSAValue:
        a = builder.value_at(op.lhs, (*lhs_batch, m, k[0]))
        if transposed is not None:
            b = builder.load(transposed, (*rhs_batch, n, k[0]))
        else:
            b = builder.value_at(op.rhs, (*rhs_batch, k[0], n))
        return _multiply(builder.em, a, b)

    return _accumulate(builder.em, loop.ReduceKind.ADD, [lhs_shape[-1]], typ, body)


def _window_position(
    em: Emitter, out: Index, tap: Index, stride: int, dilation: int, pad: int
) -> Index:
    return em.iadd(em.isub(em.imul(out, stride), pad), em.imul(tap, dilation))


def _window_leaves(out: int, stride: int, taps: int, dilation: int, pad: int, size: int) -> bool:
    """Whether a window position (out * stride + tap * dilation - pad) can fall outside
    [0, size): only with padding before, or a last window reaching past the end."""
    return pad > 0 or (out - 1) * stride + (taps - 1) * dilation - pad >= size


def _taps_inside(em: Emitter, out: Index, stride: int, taps: int, pad: int, size: int) -> Index:
    """How many of the window's taps at output position `out` fall inside [0, size)."""
    start = em.isub(em.imul(out, stride), pad)
    if isinstance(start, int):
        return min(start + taps, size) - max(start, 0)
    end = em.emit(arith.MinSIOp(em.index_value(em.iadd(start, taps)), em.index_value(size)))
    first = em.emit(arith.MaxSIOp(em.index_value(start), em.index_value(0)))
    return em.emit(arith.SubiOp(end, first))


def _clamp_stays_in_window(out: int, stride: int, taps: int, pad: int, size: int) -> bool:
    """Whether every window overlaps the input [0, size) on this axis, so that a window
    position clamped into the input is a position of the same window: the first window
    ends at or past 0 (pad < taps) and the last starts before `size`."""
    return pad < taps and (out - 1) * stride - pad <= size - 1


@RULES.value(graph.Conv2dOp)
def _conv2d(builder: ElementBuilder, op: graph.Conv2dOp, index: tuple[Index, ...]) -> SSAValue:
    em = builder.em
    n, co, oh, ow = index
    channels = shape_of(op.input)[1]
    out_channels, group_channels, kh, kw = shape_of(op.weight)
    groups = op.groups.value.data
    sh, sw = op.strides.get_values()
    dh, dw = op.dilations.get_values()
    top, left = op.padding.get_values()[:2]
    # The first input channel of this output channel's group (0 without groups: no
    # index arithmetic on `co`, so the input's loads do not depend on it).
    group_base = (
        0 if groups == 1 else em.imul(em.idiv(co, out_channels // groups), channels // groups)
    )
    typ = compute_type(tensor_type_of(op.result).get_element_type())
    zero = em.constant(0, typ)

    rows = builder.copy_of(op.input, "nchw_padded", op.padding.get_values())
    if rows is not None:
        # A depthwise convolution on its input's rows, padding written out: unchecked.
        def on_rows(taps: tuple[Index, ...]) -> SSAValue:
            c, i, j = taps
            ih = _window_position(em, oh, i, sh, dh, 0)
            iw = _window_position(em, ow, j, sw, dw, 0)
            x = builder.load(rows, (n, em.iadd(group_base, c), ih, iw))
            return _multiply(em, x, builder.value_at(op.weight, (co, c, i, j)))

        return _accumulate(em, loop.ReduceKind.ADD, [group_channels, kh, kw], typ, on_rows)
    points = builder.copy_of(op.input, "nchw_subsampled", strides=(sh, sw))
    if points is not None:
        # A strided 1x1 convolution on the points it reads, copied out: a GEMM whose
        # columns (y, x) are contiguous, as at stride 1.
        def on_points(taps: tuple[Index, ...]) -> SSAValue:
            c, i, j = taps
            x = builder.load(points, (n, em.iadd(group_base, c), oh, ow))
            return _multiply(em, x, builder.value_at(op.weight, (co, c, i, j)))

        return _accumulate(em, loop.ReduceKind.ADD, [group_channels, kh, kw], typ, on_points)
    padded = builder.copy_of(op.input, "nhwc_padded", op.padding.get_values())
    weights = builder.copy_of(op.weight, "ohwi")
    if padded is not None:
        # Channels innermost, padding already written out: a contiguous dot product.
        # (Without a weight copy, loop-tile-matmul packs the weights from their own.)
        def channels_last(taps: tuple[Index, ...]) -> SSAValue:
            i, j, c = taps
            ih = _window_position(em, oh, i, sh, dh, 0)
            iw = _window_position(em, ow, j, sw, dw, 0)
            x = builder.load(padded, (n, ih, iw, em.iadd(group_base, c)))
            if weights is None:
                return _multiply(em, x, builder.value_at(op.weight, (co, c, i, j)))
            return _multiply(em, x, builder.load(weights, (co, i, j, c)))

        bounds = [kh, kw, group_channels]
        return _accumulate(em, loop.ReduceKind.ADD, bounds, typ, channels_last)

    # Only rows and columns can leave the input, and only where padding (or a window
    # past the input's end) lets them: a 1x1 or unpadded window reads plain loads.
    height, width = shape_of(op.input)[2:]
    out_height, out_width = shape_of(op.result)[2:]
    checked = (
        False,
        False,
        _window_leaves(out_height, sh, kh, dh, top, height),
        _window_leaves(out_width, sw, kw, dw, left, width),
    )

    def body(taps: tuple[Index, ...]) -> SSAValue:
        c, i, j = taps
        ih = _window_position(em, oh, i, sh, dh, top)
        iw = _window_position(em, ow, j, sw, dw, left)
        x = builder.guarded(op.input, (n, em.iadd(group_base, c), ih, iw), zero, checked)
        w = builder.value_at(op.weight, (co, c, i, j))
        return _multiply(em, x, w)

    return _accumulate(em, loop.ReduceKind.ADD, [group_channels, kh, kw], typ, body)


@RULES.value(graph.Pool2dOp)
def _pool(builder: ElementBuilder, op: graph.Pool2dOp, index: tuple[Index, ...]) -> SSAValue:
    em = builder.em
    n, c, oh, ow = index
    kh, kw = op.kernel.get_values()
    sh, sw = op.strides.get_values()
    top, left = op.padding.get_values()[:2]
    element = tensor_type_of(op.result).get_element_type()
    typ = compute_type(element)
    is_max = isinstance(op, graph.MaxPool2dOp)
    fill = em.lowest(typ, graph.is_unsigned(element)) if is_max else em.constant(0, typ)

    def position(taps: tuple[Index, ...]) -> tuple[Index, ...]:
        return (
            n,
            c,
            _window_position(em, oh, taps[0], sh, 1, top),
            _window_position(em, ow, taps[1], sw, 1, left),
        )

    height, width = shape_of(op.input)[2:]
    out_height, out_width = shape_of(op.result)[2:]
    leaves = (
        _window_leaves(out_height, sh, kh, 1, top, height),
        _window_leaves(out_width, sw, kw, 1, left, width),
    )
    # Only rows and columns can leave the input (batch and channel are the output's own).
    checked = (False, False, *leaves)
    nearest = is_max and _clamp_stays_in_window(out_height, sh, kh, top, height)
    nearest = nearest and _clamp_stays_in_window(out_width, sw, kw, left, width)

    def body(taps: tuple[Index, ...]) -> SSAValue:
        if nearest:
            # A tap past the input reads the input's nearest row or column, which is in
            # the same window: the maximum is the same, with no compare and select.
            n_, c_, ih, iw = position(taps)
            ih = em.iclamp(ih, height) if leaves[0] else ih
            iw = em.iclamp(iw, width) if leaves[1] else iw
            return builder.value_at(op.input, (n_, c_, ih, iw))
        return builder.guarded(op.input, position(taps), fill, checked)

    kind = _kind(loop.ReduceKind.MAX, element) if is_max else loop.ReduceKind.ADD
    total = _accumulate(em, kind, [kh, kw], typ, body)
    if is_max:
        return total
    if isinstance(op, graph.AvgPool2dOp) and op.count_include_pad is not None:
        return em.emit(arith.DivfOp(total, em.constant(float(kh * kw), typ)))

    # The taps inside the input, per axis: min(start + taps, size) - max(start, 0).
    rows = _taps_inside(em, oh, sh, kh, top, height)
    columns = _taps_inside(em, ow, sw, kw, left, width)
    if isinstance(rows, int) and isinstance(columns, int):
        count = em.constant(float(rows * columns), typ)
    else:
        product = em.emit(arith.MuliOp(em.index_value(rows), em.index_value(columns)))
        wide = em.emit(arith.IndexCastOp(product, i64))
        count = em.emit(arith.SIToFPOp(wide, cast(AnyFloat, typ)))  # pooling is of floats
    return em.emit(arith.DivfOp(total, count))
