"""Value rules of the data-movement ops and constants: which operand element each reads.

Broadcast, reshape, transpose and slice read their input at their index map
(`index_maps`); pad and concat add a condition, turned into a clamped load and a select so
the loop body stays branch-free; gather reads its index from its `indices` operand.
Splat constants become scalars; others are loaded from a module-level global.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_of, tensor_type_of
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import dense_to_numpy, same_bits, to_element_type
from graphfuse.dialects.loop.emitter import Index, compute_type, is_float
from graphfuse.lowering.graph_to_loop import index_maps
from graphfuse.lowering.graph_to_loop.element_builder import ElementBuilder
from graphfuse.lowering.graph_to_loop.value_rules import Step, ValueRules

RULES = ValueRules()
"""The rules of this module."""


@RULES.value(graph.ConstantOp)
def _constant(builder: ElementBuilder, op: graph.ConstantOp, index: tuple[Index, ...]) -> SSAValue:
    element = tensor_type_of(op.value.get_type()).get_element_type()
    array = dense_to_numpy(op.value)
    flat = array.reshape(-1)
    if same_bits(flat):
        return builder.em.constant(flat[0].item(), compute_type(element))
    name, typ = builder.pool.add(op.value)
    buffer = builder.em.hoist(memref.GetGlobalOp(name, typ))
    return builder.load(buffer, index)


@RULES.step(graph.BroadcastToOp)
def _broadcast_to(
    builder: ElementBuilder, op: graph.BroadcastToOp, index: tuple[Index, ...]
) -> Step:
    return (yield (op.input, index_maps.broadcast(index, shape_of(op.input))))


@RULES.step(graph.ReshapeOp)
def _reshape(builder: ElementBuilder, op: graph.ReshapeOp, index: tuple[Index, ...]) -> Step:
    mapped = index_maps.reshape(builder.em, index, shape_of(op.result), shape_of(op.input))
    return (yield (op.input, mapped))


@RULES.step(graph.TransposeOp)
def _transpose(builder: ElementBuilder, op: graph.TransposeOp, index: tuple[Index, ...]) -> Step:
    return (yield (op.input, index_maps.transpose(index, op.perm.get_values())))


@RULES.step(graph.SliceOp)
def _slice(builder: ElementBuilder, op: graph.SliceOp, index: tuple[Index, ...]) -> Step:
    mapped = index_maps.strided_slice(
        builder.em, index, op.starts.get_values(), op.strides.get_values()
    )
    return (yield (op.input, mapped))


@RULES.step(graph.PadOp)
def _pad(builder: ElementBuilder, op: graph.PadOp, index: tuple[Index, ...]) -> Step:
    lows, highs = op.low.get_values(), op.high.get_values()
    shifted = tuple(builder.em.isub(i, low) for i, low in zip(index, lows, strict=True))
    stored = tensor_type_of(op.result).get_element_type()
    element = compute_type(stored)
    # The fill as the result's type holds it (0.1 in f16 is not 0.1 in f32).
    fill_value = float(to_element_type(np.array(op.value.value.data), stored))
    fill = builder.em.constant(fill_value if is_float(element) else int(fill_value), element)
    padded = [low != 0 or high != 0 for low, high in zip(lows, highs, strict=True)]
    return (yield from builder.guard(op.input, shifted, fill, padded))


@RULES.step(graph.GatherOp)
def _gather(builder: ElementBuilder, op: graph.GatherOp, index: tuple[Index, ...]) -> Step:
    """data at `index` with the dims indices spans replaced by one position on `axis`:
    the index read from `indices` there (a data-dependent index map)."""
    shape = shape_of(op.data)
    axis = rules.normalize_axis(op.axis.value.data, len(shape))
    rank = len(shape_of(op.indices))
    position = _gather_position(builder, op.indices, index[axis : axis + rank], shape[axis])
    return (yield (op.data, (*index[:axis], position, *index[axis + rank :])))


def _gather_position(
    builder: ElementBuilder, indices: SSAValue, at: tuple[Index, ...], dim: int
) -> Index:
    """indices[at] as an index into an axis of extent `dim`: a negative one wrapped
    (+ dim), then clamped into [0, dim - 1] as the reference interpreter does, so the
    load stays inside the buffer. Known when the indices are a constant read at a
    known place, or when the axis has one element."""
    known = _constant_element(indices, at)
    if dim == 1 or known is not None:
        wrapped = 0 if known is None else known + dim if known < 0 else known
        return min(max(wrapped, 0), dim - 1)
    em = builder.em

    def position() -> SSAValue:
        raw = em.emit(arith.IndexCastOp(builder.value_at(indices, at), IndexType()))
        negative = em.emit(arith.CmpiOp(raw, em.index_value(0), "slt"))
        wrapped = em.emit(arith.SelectOp(negative, em.index_value(em.iadd(raw, dim)), raw))
        return em.index_value(em.iclamp(wrapped, dim))

    return em.cached(("gather_position", indices, at, dim), position)


def _constant_element(value: SSAValue, at: tuple[Index, ...]) -> int | None:
    """The integer element of a `graph.constant` at a known index, else None."""
    owner = value.owner
    place = tuple(i for i in at if isinstance(i, int))
    if not isinstance(owner, graph.ConstantOp) or len(place) != len(at):
        return None
    return int(dense_to_numpy(owner.value)[place])


@RULES.step(graph.ConcatOp)
def _concat(builder: ElementBuilder, op: graph.ConcatOp, index: tuple[Index, ...]) -> Step:
    em = builder.em
    axis = rules.normalize_axis(op.axis.value.data, len(index))
    offsets = [0]
    for v in op.inputs:
        offsets.append(offsets[-1] + shape_of(v)[axis])
    position = index[axis]
    if isinstance(position, int):
        k = next(k for k in range(len(op.inputs)) if position < offsets[k + 1])
        local = (*index[:axis], position - offsets[k], *index[axis + 1 :])
        return (yield (op.inputs[k], local))
    result: SSAValue | None = None
    for k in reversed(range(len(op.inputs))):
        v = op.inputs[k]
        local_pos = em.iclamp(em.isub(position, offsets[k]), shape_of(v)[axis])
        part = yield (v, (*index[:axis], local_pos, *index[axis + 1 :]))
        if result is None:
            result = part
            continue
        below = em.emit(arith.CmpiOp(position, em.index_value(offsets[k + 1]), "slt"))
        result = em.emit(arith.SelectOp(below, part, result))
    assert result is not None
    return result
