"""A padded plane stored in column phases for a reader that strides through it.

A depthwise convolution at stride s on wide rows (MobileNetV2's [1,96,112,112] at stride
2) reads its padded plane (image_copies.py) at column `s * ow + kw`. LLVM vectorises the
output row with interleaved loads: wide loads and shuffles, at half width, with a scalar
remainder; the layer took twice onnxruntime's time.

Here the plane's columns are stored by phase instead: column x goes to position
`(x mod s) * Q + x div s` of its row (Q = ceil(Wp / s)), so every phase is a run of its
own, and the reader's column `s * ow + kw` becomes `(kw mod s) * Q + ow + kw div s`,
contiguous in ow (kw mod s and kw div s are constants once LLVM unrolls the taps).
The writers follow:
- a store of a constant along a whole row (the fill's top and bottom rows) is left as it
  is, since the phases permute the row;
- a store at a constant column goes to that column's position;
- the interior copy, a nest storing at column `w + c` of its own last index w, becomes a
  nest over `u`, `w = s * u + t` for each phase t in its body: the store goes to
  `((t + c) mod s) * Q + u + (t + c) div s`, contiguous in u, and its loads at `s * u + t`
  are an interleaved group LLVM reads with wide loads; a remainder nest takes the
  columns past the last whole group of s.

Taken inside the plane nests of image_copies.py, for a scratch buffer of the kernel (one
the caller allocates, so no reader outside the kernel sees its layout) that nest alone
uses and writes before it reads it, which every load reads at `s * o + j` (s >= 2 the
same for all, o an index of the load's nest) and every store writes in one of the three
forms above from a nest that reduces nothing (copies and fills: not a separable pool's
pass down the rows, which measured slower in phases), when the phases permute the row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from xdsl.dialects import arith
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import Rewriter

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.nest_indices import buffer_shape, constant, index_in, pair


def split_strided_phases(kernel: loop.KernelOp, scratch: Collection[int]) -> int:
    """Stores each plane buffer of `kernel` read at a stride in column phases; returns
    how many were. Only the arguments at positions `scratch` are candidates: moving the
    columns of an input or a result would change what the kernel reads or returns."""
    split = 0
    args = kernel.body.block.args
    owned = [args[n] for n in sorted(scratch) if n < len(args)]
    for planes in [op for op in kernel.body.block.ops if isinstance(op, loop.ParallelOp)]:
        nests = [op for op in planes.body.block.ops if isinstance(op, loop.ParallelOp)]
        if len(nests) < 2:
            continue
        split += sum(_split(planes, buffer) for buffer in owned)
    return split


def _stride(index: SSAValue) -> tuple[SSAValue, int, SSAValue] | None:
    """(o, s, j) when `index` is `s * o + j` with o a nest index and s >= 2."""
    op = index.owner
    if not isinstance(op, arith.AddiOp):
        return None
    for scaled, rest in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        found = pair(scaled.owner, arith.MuliOp) if isinstance(scaled.owner, Operation) else None
        if found is None or found[1] < 2:
            continue
        o = found[0]
        if isinstance(o.owner, Block) and isinstance(o.owner.parent_op(), loop.ParallelOp):
            return (o, found[1], rest) if _offset(rest) else None
    return None


def _offset(value: SSAValue) -> bool:
    """`value` is a constant, or never negative: a reduction index (a tap), a multiple or
    a sum of such; the reader's `j mod s` and `j div s` are then unsigned-safe."""
    if isinstance(constant(value), int):
        return True
    if isinstance(value.owner, Block):
        return isinstance(value.owner.parent_op(), loop.ReduceOp)
    op = value.owner
    scaled = pair(op, arith.MuliOp)
    if scaled is not None:
        return scaled[1] > 0 and _offset(scaled[0])
    if isinstance(op, arith.AddiOp):
        shifted = pair(op, arith.AddiOp)
        if shifted is not None:
            return shifted[1] >= 0 and _offset(shifted[0])
        return _offset(op.lhs) and _offset(op.rhs)
    return False


def _column(store: loop.StoreOp) -> tuple[SSAValue, int] | None:
    """(w, c) when `store`'s column is `w + c` (or w) of its nest's last index w."""
    index = store.indices[-1]
    nest = store.parent_op()
    if not isinstance(nest, loop.ParallelOp):
        return None
    last = nest.body.block.args[-1]
    if index is last:
        return last, 0
    found = pair(index.owner, arith.AddiOp) if isinstance(index.owner, Operation) else None
    if found is not None and found[0] is last:
        return found
    return None


def _split(planes: loop.ParallelOp, buffer: SSAValue) -> bool:
    """Stores `buffer` in column phases if every use of it is one the module takes."""
    shape = buffer_shape(buffer)
    uses = [use.operation for use in buffer.uses]
    if not shape or not uses or not all(planes.is_ancestor(op) for op in uses):
        return False
    loads = [op for op in uses if isinstance(op, loop.LoadOp)]
    stores = [op for op in uses if isinstance(op, loop.StoreOp)]
    if not loads or not stores or len(loads) + len(stores) != len(uses):
        return False
    if not _written_first(planes, stores, loads):
        return False
    strided = [_stride(load.indices[-1]) for load in loads]
    strides = {found[1] for found in strided if found is not None}
    if None in strided or len(strides) != 1:
        return False
    stride, width = strides.pop(), shape[-1]
    phase = -(-width // stride)
    if sorted(_position(x, stride, phase) for x in range(width)) != list(range(width)):
        return False
    plans = [_store_plan(store, width) for store in stores]
    if None in plans or any(_reduces(store) for store in stores):
        return False
    for load, found in zip(loads, strided, strict=True):
        assert found is not None
        _read_phases(load, found, phase)
    for store, plan in zip(stores, plans, strict=True):
        _move_store(store, plan, stride, phase)
    return True


def _written_first(
    planes: loop.ParallelOp, stores: Sequence[loop.StoreOp], loads: Sequence[loop.LoadOp]
) -> bool:
    """Every store of the buffer is in a nest of `planes` before the first nest that loads
    it: each plane is written in its new layout before it is read in it."""
    nests = [op for op in planes.body.block.ops if isinstance(op, loop.ParallelOp)]

    def position(op: Operation) -> int | None:
        return next((n for n, nest in enumerate(nests) if nest.is_ancestor(op)), None)

    written = [position(op) for op in stores]
    read = [position(op) for op in loads]
    if None in written or None in read:
        return False
    return max(n for n in written if n is not None) < min(n for n in read if n is not None)


def _move_store(
    store: loop.StoreOp, plan: str | int | tuple[SSAValue, int] | None, stride: int, phase: int
) -> None:
    """`store` moved to the phases as its plan (`_store_plan`) says ("row" leaves it)."""
    if isinstance(plan, int):
        block = store.parent_block()
        assert block is not None
        moved = index_in(block, _position(plan, stride, phase), before=store)
        Rewriter.replace_op(
            store, loop.StoreOp(store.value, store.buffer, [*store.indices[:-1], moved])
        )
    elif isinstance(plan, tuple):
        _write_phases(store, plan[1], stride, phase)


def _reduces(store: loop.StoreOp) -> bool:
    """`store`'s nest reduces (a separable pool's pass down the rows, which measured
    slower in phases: relu(a + b) into a 3x3/2 max pool 88 -> 98 us)."""
    nest = store.parent_op()
    return nest is not None and any(isinstance(op, loop.ReduceOp) for op in nest.walk())


def _store_plan(store: loop.StoreOp, width: int) -> str | int | tuple[SSAValue, int] | None:
    """How `store` is moved to the phases: "row" (a constant along a whole row, left as
    it is), a constant column, the (w, c) of a nest over w, or None (not taken)."""
    column = constant(store.indices[-1])
    if isinstance(column, int):
        return column
    found = _column(store)
    nest = store.parent_op()
    if found is None or not isinstance(nest, loop.ParallelOp):
        return None
    _, c = found
    if nest.shape[-1] == 1:
        return c
    if c == 0 and nest.shape[-1] == width and constant(store.value) is not None:
        return "row"
    return found


def _read_phases(load: loop.LoadOp, found: tuple[SSAValue, int, SSAValue], phase: int) -> None:
    """`load` at `(j mod s) * Q + o + j div s` in place of `s * o + j`."""
    o, stride, j = found
    block = load.parent_block()
    assert block is not None
    offset = constant(j)
    if isinstance(offset, int):
        start = index_in(block, _position(offset, stride, phase), before=load)
    else:
        start = _position_at(block, j, stride, phase, before=load)
    column = arith.AddiOp(o, start)
    block.insert_op_before(column, load)
    Rewriter.replace_op(load, loop.LoadOp(load.buffer, [*load.indices[:-1], column.result]))


def _position(x: int, stride: int, phase: int) -> int:
    """Where column x of a row goes: its phase's run, then its place in it."""
    return (x % stride) * phase + x // stride


def _position_at(
    block: Block, x: SSAValue, stride: int, phase: int, before: Operation | None = None
) -> SSAValue:
    """`_position` of a column x known at run time (never negative: the division is
    unsigned), computed in `block` before `before` (else at its end)."""
    s = index_in(block, stride, before)
    rem, div = arith.RemUIOp(x, s), arith.DivUIOp(x, s)
    scaled = arith.MuliOp(rem.result, index_in(block, phase, before))
    position = arith.AddiOp(scaled.result, div.result)
    for op in (rem, div, scaled, position):
        if before is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, before)
    return position.result


def _write_phases(store: loop.StoreOp, c: int, stride: int, phase: int) -> None:
    """The nest of `store` (at column w + c of its last index w) as a nest over u with
    one body per phase t (w = s * u + t), then the remainder past the last whole group."""
    nest = store.parent_op()
    assert isinstance(nest, loop.ParallelOp)
    extent = nest.shape[-1]
    groups, rest = divmod(extent, stride)
    parent = nest.parent_block()
    assert parent is not None
    if groups:
        grouped = loop.ParallelOp([*nest.shape[:-1], groups])
        block = grouped.body.block
        u = block.args[-1]
        for t in range(stride):
            w = _affine(block, u, stride, t)
            column = arith.AddiOp(u, index_in(block, _position(t + c, stride, phase)))
            block.add_op(column)
            _clone_body(nest, block, [*block.args[:-1], w], store, column.result)
        block.add_op(loop.YieldOp())
        parent.insert_op_before(grouped, nest)
    if rest:
        tail = loop.ParallelOp([*nest.shape[:-1], rest])
        block = tail.body.block
        w = _affine(block, block.args[-1], 1, groups * stride)
        x = arith.AddiOp(w, index_in(block, c))
        block.add_op(x)
        column = _position_at(block, x.result, stride, phase)
        _clone_body(nest, block, [*block.args[:-1], w], store, column)
        block.add_op(loop.YieldOp())
        parent.insert_op_before(tail, nest)
    nest.detach()
    nest.erase()


def _affine(block: Block, u: SSAValue, scale: int, offset: int) -> SSAValue:
    """`scale * u + offset` at the end of `block`."""
    scaled = arith.MuliOp(u, index_in(block, scale))
    shifted = arith.AddiOp(scaled.result, index_in(block, offset))
    block.add_ops([scaled, shifted])
    return shifted.result


def _clone_body(
    nest: loop.ParallelOp,
    block: Block,
    args: Sequence[SSAValue],
    store: loop.StoreOp,
    column: SSAValue,
) -> None:
    """`nest`'s body (but its yield) at the end of `block`, its indices `args`, `store`
    at column `column`."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(nest.body.block.args, args, strict=True))
    for op in nest.body.block.ops:
        if isinstance(op, loop.YieldOp):
            continue
        if op is store:
            indices = [mapping.get(i, i) for i in store.indices[:-1]]
            value = mapping.get(store.value, store.value)
            block.add_op(loop.StoreOp(value, store.buffer, [*indices, column]))
            continue
        block.add_op(op.clone(value_mapper=mapping))
