"""StableHLO data movement as graph ops: constant, iota, broadcast_in_dim, reshape,
transpose, slice, dynamic_slice (known starts), pad (interior padding too), concatenate,
reverse, and gather in numpy.take's form (embedding lookups).

Known values (constants, iotas and what is computed from them here) stay NumPy arrays:
a splat or an iota is a broadcast view that costs nothing until a graph op reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import BFloat16Type
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import Value, i64_attr, shape_of
from graphfuse.frontend.onnx_nn import pad_or_crop, strided_slice
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp, is_known
from graphfuse.frontend.stablehlo.reading import dense_to_numpy, stablehlo
from graphfuse.frontend.stablehlo.table import converts


@converts("stablehlo.constant")
def _constant(b: HloBuilder, op: HloOp) -> list[Value]:
    array = dense_to_numpy(op.attr("value"), op.label)
    element = op.result_element()
    if isinstance(element, BFloat16Type):  # no NumPy dtype says bf16: a constant now
        return [b.tensor(np.array(array, order="C"), element)]
    return [array]


@converts("stablehlo.iota")
def _iota(b: HloBuilder, op: HloOp) -> list[Value]:
    shape, axis = op.result_shape(), op.int("iota_dimension", 0)
    element = op.result_element()
    line = np.arange(shape[axis], dtype=numpy_dtype(element))
    lined = line.reshape([-1 if i == axis else 1 for i in range(len(shape))])
    array = np.broadcast_to(lined, shape)
    if isinstance(element, BFloat16Type):
        return [b.tensor(np.array(array, order="C"), element)]
    return [array]


@converts("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(b: HloBuilder, op: HloOp) -> list[Value]:
    """Operand dim i lands on result dim dims[i]: transpose so dims increase, put unit
    dims between them, then broadcast."""
    x, dims = op.operands[0], op.ints("broadcast_dimensions")
    shape = op.result_shape()
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = b.transpose(x, order)
    placed = dict(zip(sorted(dims), shape_of(x), strict=True))
    x = b.reshape(x, [placed.get(i, 1) for i in range(len(shape))])
    return [b.broadcast_to(x, shape)]


@converts("stablehlo.reshape")
def _reshape(b: HloBuilder, op: HloOp) -> list[Value]:
    return [b.reshape(op.operands[0], op.result_shape())]


@converts("stablehlo.transpose")
def _transpose(b: HloBuilder, op: HloOp) -> list[Value]:
    return [b.transpose(op.operands[0], op.ints("permutation"))]


@converts("stablehlo.slice")
def _slice(b: HloBuilder, op: HloOp) -> list[Value]:
    x = op.operands[0]
    starts = op.ints("start_indices")
    strides = op.ints("strides", [1] * len(starts))
    return [strided_slice(b, x, starts, op.result_shape(), strides)]


@converts("stablehlo.dynamic_slice")
def _dynamic_slice(b: HloBuilder, op: HloOp) -> list[Value]:
    """A slice whose starts are known at import, clamped into the operand as StableHLO
    says; starts computed from the inputs are refused."""
    x, *indices = op.operands
    sizes = op.ints("slice_sizes")
    starts = [
        min(max(b.ints(i, f"start index #{n}")[0], 0), dim - size)
        for n, (i, dim, size) in enumerate(zip(indices, shape_of(x), sizes, strict=True))
    ]
    return [strided_slice(b, x, starts, sizes, [1] * len(sizes))]


def _scalar(b: HloBuilder, value: Value, what: str) -> float:
    if isinstance(value, SSAValue):
        raise b.fail(f"{what} must be a constant, not computed")
    return float(np.asarray(value).reshape(-1)[0])


def interior_pad(b: HloBuilder, x: Value, interior: Sequence[int], fill: float) -> Value:
    """`interior[i]` fills between neighbours along axis i: each element gets the fills
    after it (a unit axis padded at its end), the last one's are cut off again."""
    for axis, count in enumerate(interior):
        if count == 0 or shape_of(x)[axis] <= 1:
            continue
        shape = list(shape_of(x))
        split = [*shape[: axis + 1], 1, *shape[axis + 1 :]]
        high = [0] * len(split)
        high[axis + 1] = count
        spread = pad_or_crop(b, b.reshape(x, split), [0] * len(split), high, fill)
        shape[axis] *= count + 1
        flat = b.reshape(spread, shape)
        shape[axis] -= count
        x = strided_slice(b, flat, [0] * len(shape), shape, [1] * len(shape))
    return x


@converts("stablehlo.pad")
def _pad_op(b: HloBuilder, op: HloOp) -> list[Value]:
    x, value = op.operands
    fill = _scalar(b, value, "the padding value")
    x = interior_pad(b, x, op.ints("interior_padding"), fill)
    return [pad_or_crop(b, x, op.ints("edge_padding_low"), op.ints("edge_padding_high"), fill)]


@converts("stablehlo.concatenate")
def _concatenate(b: HloBuilder, op: HloOp) -> list[Value]:
    axis = op.int("dimension", 0)
    if all(is_known(v) for v in op.operands):
        return [np.concatenate([np.asarray(v) for v in op.operands], axis)]
    values = [b.tensor(v) for v in op.operands]
    return [b.op(graph.ConcatOp, values, op.result_shape(), axis=i64_attr(axis))]


@converts("stablehlo.reverse")
def _reverse(b: HloBuilder, op: HloOp) -> list[Value]:
    """Reversed axes as gathers of the indices n-1 .. 0 (the graph has no reverse)."""
    x = op.operands[0]
    for axis in op.ints("dimensions"):
        if is_known(x):
            x = np.flip(np.asarray(x), axis)
            continue
        size = shape_of(x)[axis]
        if size > 1:
            indices = np.arange(size - 1, -1, -1, dtype=np.int64)
            x = b.op(graph.GatherOp, [x, indices], shape_of(x), axis=i64_attr(axis))
    return [x]


@converts("stablehlo.optimization_barrier")
def _barrier(b: HloBuilder, op: HloOp) -> list[Value]:
    del b
    return list(op.operands)


def _take_axis(b: HloBuilder, op: HloOp, data_rank: int) -> int:
    """The axis of a gather that is numpy.take (JAX's x[i] and jnp.take): one index per
    row picks a whole slice along one collapsed axis; any other gather is refused."""
    numbers = stablehlo.GatherDimensionNumbers(op.attr("dimension_numbers"))
    axes: list[int] = list(numbers.start_index_map)
    if numbers.operand_batching_dims or axes != list(numbers.collapsed_slice_dims):
        raise b.fail("only a gather of whole slices along one axis (numpy.take) is supported")
    if len(axes) != 1:
        raise b.fail(f"a gather indexing {len(axes)} axes at once is not supported (only one)")
    shape = shape_of(op.operands[0])
    full = [1 if i == axes[0] else shape[i] for i in range(data_rank)]
    if op.ints("slice_sizes") != full:
        raise b.fail("only a gather of whole slices along one axis (numpy.take) is supported")
    return axes[0]


@converts("stablehlo.gather")
def _gather(b: HloBuilder, op: HloOp) -> list[Value]:
    """numpy.take along the gathered axis, then the result dims moved where StableHLO puts
    them (offset_dims: the data's other dims; the rest: the indices' dims). Out-of-range
    indices are clamped as StableHLO clamps them (negative ones differ: graph.gather
    counts them from the end; JAX has made them non-negative before)."""
    data, indices = op.operands
    rank = len(shape_of(data))
    axis = _take_axis(b, op, rank)
    numbers = stablehlo.GatherDimensionNumbers(op.attr("dimension_numbers"))
    index_shape = list(shape_of(indices))
    vector_dim: int = numbers.index_vector_dim
    if vector_dim < len(index_shape):
        del index_shape[vector_dim]
    indices = b.reshape(indices, index_shape)
    count = len(index_shape)
    taken_shape = rules.gather_shape(shape_of(data), index_shape, axis)
    taken = b.op(graph.GatherOp, [data, indices], taken_shape, axis=i64_attr(axis))
    offsets: list[int] = list(numbers.offset_dims)
    perm: list[int] = []
    batch = 0
    for position in range(len(taken_shape)):
        if position in offsets:
            k = offsets.index(position)  # the k-th data dim that is not the gathered axis
            perm.append(k if k < axis else k + count)
        else:
            perm.append(axis + batch)
            batch += 1
    return [b.transpose(taken, perm)]
