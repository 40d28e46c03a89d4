"""A kernel's zero-padded operand copy as a fill and a plain copy of the interior.

convert-graph-to-loop gives a convolution a copy of its input with the padding written
out (NCHW with padded rows for a depthwise convolution, NHWC for the others): one nest over
the padded shape that clamps each padded index into the source, loads, and selects zero
outside. The clamped index is not affine, so LLVM leaves the nest scalar, one float per
iteration with its compares and select: 63% of a depthwise 3x3 [1,144,56,56] kernel. Here
such a nest becomes nests storing zeros over the padding (vectorised fills of the border
slabs) and one over the source's extents that copies the interior, indexed by plain
offsets (vectorised along the rows where the copy keeps their order).

The nest taken: one load whose indices are nest indices, constants or clamps
`min(max(i + c, 0), E - 1)` (c = 0: `min(max(i, 0), E - 1)`) of a nest index i, a select
of that load or zero on exactly the conjunction of `i + c >= 0` and `i + c < E` over the
clamps, and one store of it at the nest's own indices, in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.nest_indices import andi_tests, clamped, constant, own_index, pair


@dataclass(frozen=True)
class _Clamp:
    arg: int
    """The nest dimension clamped."""
    offset: int
    """c in min(max(i + c, 0), E - 1)."""
    extent: int
    """E: the source's extent."""
    value: SSAValue
    """The clamped index."""
    shifted: SSAValue
    """i + c."""


def _clamp(value: SSAValue, args: list[SSAValue]) -> _Clamp | None:
    found = clamped(value)
    if found is None:
        return None
    shifted, extent = found
    if shifted in args:  # no offset: padding at the end only
        return _Clamp(args.index(shifted), 0, extent, value, shifted)
    shift = pair(shifted.owner, arith.AddiOp) if isinstance(shifted.owner, Operation) else None
    if shift is None or shift[0] not in args:
        return None
    return _Clamp(args.index(shift[0]), shift[1], extent, value, shifted)


@dataclass(frozen=True)
class _PaddedCopy:
    nest: loop.ParallelOp
    load: loop.LoadOp
    store: loop.StoreOp
    clamps: dict[int, _Clamp]
    zero: SSAValue
    """The select's zero, defined outside the nest."""


def _own_indices(nest: loop.ParallelOp, store: loop.StoreOp) -> bool:
    """The store is at the nest's indices, in order (a constant 0 for a dimension of 1)."""
    args = nest.body.block.args
    return len(store.indices) == len(args) and all(
        own_index(index, arg, extent)
        for index, arg, extent in zip(store.indices, args, nest.shape, strict=True)
    )


def _clamps(nest: loop.ParallelOp, load: loop.LoadOp) -> dict[int, _Clamp] | None:
    """The load's clamped indices by nest dimension, if its other indices are nest indices
    (not clamped ones) or constants and the clamps are paddings."""
    args: list[SSAValue] = list(nest.body.block.args)
    clamps: dict[int, _Clamp] = {}
    for index in load.indices:
        if index in args or constant(index) is not None:
            continue
        clamp = _clamp(index, args)
        if clamp is None or clamp.arg in clamps:
            return None
        if clamp.offset > 0 or clamp.extent - clamp.offset > nest.shape[clamp.arg]:
            return None  # not a padding: the interior would not fit the copy
        clamps[clamp.arg] = clamp
    if not clamps or any(args[d] in load.indices for d in clamps):
        return None
    return clamps


def match_padded_copy(nest: loop.ParallelOp) -> _PaddedCopy | None:
    """The padded copy `nest` makes (see the module's doc), or None."""
    body = list(nest.body.block.ops)
    loads = [op for op in body if isinstance(op, loop.LoadOp)]
    stores = [op for op in body if isinstance(op, loop.StoreOp)]
    if len(loads) != 1 or len(stores) != 1 or any(op.regions for op in body):
        return None
    load, store = loads[0], stores[0]
    select = store.value.owner
    if not isinstance(select, arith.SelectOp) or select.lhs is not load.result:
        return None
    outside = isinstance(select.rhs.owner, Operation) and select.rhs.owner.parent_op() is not nest
    if not outside or constant(select.rhs) != 0 or not _own_indices(nest, store):
        return None
    clamps = _clamps(nest, load)
    if clamps is None:
        return None
    wanted: set[tuple[SSAValue, str, int]] = set()
    for clamp in clamps.values():
        wanted |= {(clamp.shifted, "sge", 0), (clamp.shifted, "slt", clamp.extent)}
    if andi_tests(select.cond) != wanted:
        return None
    return _PaddedCopy(nest, load, store, clamps, select.rhs)


def _border_fills(found: _PaddedCopy) -> list[loop.ParallelOp]:
    """Nests storing zeros over the padding alone: for each padded dimension in order, the
    slabs before and after its interior, spanning the interior of the padded dimensions
    before it and all of those after (the interior is the copy's: writing it twice cost a
    pass over the whole padded buffer)."""
    fills: list[loop.ParallelOp] = []
    padded = sorted(found.clamps)
    for position, d in enumerate(padded):
        clamp = found.clamps[d]
        before, inside = -clamp.offset, clamp.extent
        after = found.nest.shape[d] - before - inside
        for extent, start in ((before, 0), (after, before + inside)):
            if extent > 0:
                fills.append(_slab(found, padded[:position], d, extent, start))
    return fills


def _slab(
    found: _PaddedCopy, interior: list[int], d: int, extent: int, start: int
) -> loop.ParallelOp:
    """A nest storing zeros at `start` + [0, `extent`) along `d`, over the interior of the
    dimensions `interior` and all of the others."""
    shape = list(found.nest.shape)
    shape[d] = extent
    offsets = {d: start}
    for e in interior:
        shape[e] = found.clamps[e].extent
        offsets[e] = -found.clamps[e].offset
    nest = loop.ParallelOp(shape)
    block = nest.body.block
    indices: list[SSAValue] = []
    for e, index in enumerate(block.args):
        if offsets.get(e, 0):
            offset = arith.ConstantOp(IntegerAttr(offsets[e], IndexType()))
            shifted = arith.AddiOp(index, offset.result)
            block.add_ops([offset, shifted])
            indices.append(shifted.result)
        else:
            indices.append(index)
    block.add_op(loop.StoreOp(found.zero, found.store.buffer, _at(found, indices)))
    block.add_op(loop.YieldOp())
    return nest


def _at(found: _PaddedCopy, indices: list[SSAValue]) -> list[SSAValue]:
    """The copy's store indices with the nest's indices replaced by `indices`."""
    args = list(found.nest.body.block.args)
    return [
        indices[d] if index is args[d] else index for d, index in enumerate(found.store.indices)
    ]


def _interior(found: _PaddedCopy) -> loop.ParallelOp:
    shape = [
        found.clamps[d].extent if d in found.clamps else extent
        for d, extent in enumerate(found.nest.shape)
    ]
    nest = loop.ParallelOp(shape)
    block = nest.body.block
    inner = list(block.args)
    padded: list[SSAValue] = []
    for d, index in enumerate(inner):
        clamp = found.clamps.get(d)
        if clamp is None or clamp.offset == 0:
            padded.append(index)
            continue
        offset = arith.ConstantOp(IntegerAttr(-clamp.offset, IndexType()))
        shifted = arith.AddiOp(index, offset.result)
        block.add_ops([offset, shifted])
        padded.append(shifted.result)
    at = _at(found, padded)
    outer: list[SSAValue] = list(found.nest.body.block.args)
    by_clamp = {clamp.value: inner[d] for d, clamp in found.clamps.items()}
    indices = [
        by_clamp.get(i, inner[outer.index(i)] if i in outer else i) for i in found.load.indices
    ]
    load = loop.LoadOp(found.load.buffer, indices)
    block.add_ops([load, loop.StoreOp(load.result, found.store.buffer, at), loop.YieldOp()])
    return nest


def split_padded_copies(kernel: loop.KernelOp) -> None:
    """Rewrites every top-level padded-copy nest of `kernel` (see the module's doc)."""
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        found = match_padded_copy(nest)
        if found is None:
            continue
        parent = nest.parent_block()
        assert parent is not None
        for fill in _border_fills(found):
            parent.insert_op_before(fill, nest)
        parent.insert_op_before(_interior(found), nest)
        nest.detach()
        nest.erase()
