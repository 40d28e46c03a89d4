"""A padded copy written and read one image plane at a time.

A depthwise convolution on wide rows reads a zero-padded copy of its input
(convert-graph-to-loop writes it; padded_copies.py splits it into a fill and an interior
copy). As three nests over the whole tensor, the copy goes through memory twice
more than the convolution itself: the fill writes all of it, the copy reads the input and
writes it again, and the convolution reads it back, by then out of cache. A depthwise
[1,144,56,56] layer moved 9 MB where its input and output are 3.6 MB, and took twice
onnxruntime's time.

Every nest here works on one (image, channel) plane at a time, so they become one nest over
the planes, [N, C, 1] (the planes split over threads), whose body runs the fill, the copy
and the convolution of that plane: the plane's copy (13 kB at 58x58) is read back from L1.

Taken when, in a kernel's body, consecutive top-level nests write a scratch buffer (a
kernel argument) and the next nest alone reads it, all of them over the same two leading
extents, each indexing the buffer with its own first two indices (or a constant 0 for a
batch of 1) there and nowhere else, and the writers read nothing the reader writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.nest_indices import own_index


def interleave_image_copies(kernel: loop.KernelOp) -> None:
    """Fuses each padded copy of `kernel` with its reader, plane by plane."""
    changed = True
    while changed:
        changed = False
        ops = list(kernel.body.block.ops)
        for position, nest in enumerate(ops):
            if not isinstance(nest, loop.ParallelOp):
                continue
            writers = _writers(nest, ops[:position])
            if writers:
                _fuse([*writers, nest])
                changed = True
                break


def _per_plane(nest: loop.ParallelOp, indices: Sequence[SSAValue]) -> bool:
    """`indices` start with `nest`'s first two indices, which they use nowhere else."""
    args, shape = nest.body.block.args, nest.shape
    if len(indices) < 3 or len(shape) < 3:
        return False
    if not (own_index(indices[0], args[0], shape[0]) and indices[1] is args[1]):
        return False
    return not any(_reads(i, args[:2], nest) for i in indices[2:])


def _reads(value: SSAValue, args: Sequence[SSAValue], nest: Operation) -> bool:
    """`value` is computed (inside `nest`) from one of `args`."""
    pending, seen = [value], set[SSAValue]()
    while pending:
        current = pending.pop()
        if current in args:
            return True
        owner = current.owner
        if current in seen or not isinstance(owner, Operation) or not nest.is_ancestor(owner):
            continue
        seen.add(current)
        pending.extend(owner.operands)
    return False


def _buffers(nest: Operation, kind: type[loop.LoadOp] | type[loop.StoreOp]) -> set[SSAValue]:
    return {op.buffer for op in nest.walk() if isinstance(op, kind)}


def _writers(reader: loop.ParallelOp, before: Sequence[Operation]) -> list[loop.ParallelOp]:
    """The nests right before `reader` that write the scratch buffer only it reads."""
    loaded = _buffers(reader, loop.LoadOp)
    for buffer in loaded:
        if not isinstance(buffer.owner, Block) or buffer in _buffers(reader, loop.StoreOp):
            continue
        writers = _consecutive_writers(buffer, before)
        if writers and _fits(buffer, writers, reader):
            return writers
    return []


def _consecutive_writers(buffer: SSAValue, before: Sequence[Operation]) -> list[loop.ParallelOp]:
    found: list[loop.ParallelOp] = []
    for op in reversed(before):
        if not isinstance(op, loop.ParallelOp) or buffer not in _buffers(op, loop.StoreOp):
            break
        found.insert(0, op)
    return found


def _fits(buffer: SSAValue, writers: list[loop.ParallelOp], reader: loop.ParallelOp) -> bool:
    nests = [*writers, reader]
    if any(len(n.shape) < 3 or n.shape[:2] != reader.shape[:2] for n in nests):
        return False
    if reader.shape[0] * reader.shape[1] < 2:
        return False
    for use in buffer.uses:
        op = use.operation
        nest = next((n for n in nests if n.is_ancestor(op)), None)
        if nest is None or not isinstance(op, loop.LoadOp | loop.StoreOp):
            return False
        if isinstance(op, loop.LoadOp) and nest is not reader:
            return False
        if not _per_plane(nest, op.indices):
            return False
    written = _buffers(reader, loop.StoreOp)
    for writer in writers:
        if _buffers(writer, loop.StoreOp) != {buffer} or _buffers(writer, loop.LoadOp) & written:
            return False
    return True


def _fuse(nests: list[loop.ParallelOp]) -> None:
    """One nest over the planes running each of `nests` on its plane, in order."""
    first = nests[0]
    planes = loop.ParallelOp([*first.shape[:2], 1])
    body = planes.body.block
    for nest in nests:
        inner = loop.ParallelOp(nest.shape[2:])
        old = nest.body.block.args
        mapping: dict[SSAValue, SSAValue] = {old[0]: body.args[0], old[1]: body.args[1]}
        mapping.update(zip(old[2:], inner.body.block.args, strict=True))
        for op in nest.body.block.ops:
            inner.body.block.add_op(op.clone(value_mapper=mapping))
        body.add_op(inner)
    body.add_op(loop.YieldOp())
    parent = first.parent_block()
    assert parent is not None
    parent.insert_op_before(planes, first)
    for nest in nests:
        nest.detach()
        nest.erase()
