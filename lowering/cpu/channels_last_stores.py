"""A channel-vectorised nest's NCHW result stored through 8x8 transposes.

A depthwise convolution vectorised across channels (depthwise.py) computes its output in
the order [N, Ho, Wo, C], channels innermost, but stores it at NCHW points: each vector of
channels went out as a scatter, Ho x Wo floats apart (a quarter of a 7x7 [1,96,56,56]
kernel's time; more on 3x3 layers). Here the nest stores its values channels-last instead,
contiguous, into a scratch buffer, and a second loop moves them to the NCHW output 8
channels x 8 points at a time: 8 vector loads, the register transpose of
transposed_pack.py, 8 vector stores along the output's rows, each plane viewed as one run
of Ho x Wo points. The last block of points starts 8 before their end (overlapping the one
before it, which writes the same values), so any Ho x Wo of at least 8 works.

Taken when the nest has one store, at the NCHW point of its own indices, into a kernel
argument it does not read, with channels a multiple of 8.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, f32, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder
from graphfuse.lowering.cpu.gemm.transposed_pack import BLOCK, block_start, transposed_block
from graphfuse.lowering.cpu.nest_indices import own_index
from graphfuse.lowering.loop_to_upstream.convert_loop_to_upstream import PARALLEL_MIN_WORK


def _nchw_store(nest: loop.ParallelOp) -> loop.StoreOp | None:
    """The nest's only store when it is at (n, c, h, w) of its own [n, h, w, c] indices
    (n a constant 0 for a batch of 1) into a kernel argument of f32 it does not read."""
    stores = [op for op in nest.walk() if isinstance(op, loop.StoreOp)]
    if len(stores) != 1:
        return None
    store = stores[0]
    n, h, w, c = nest.body.block.args
    indices = list(store.indices)
    if len(indices) != 4 or indices[1:] != [c, h, w]:
        return None
    if not own_index(indices[0], n, nest.shape[0]):
        return None
    buffer = store.buffer
    typ = buffer.type
    if not isinstance(buffer.owner, Block) or not isinstance(typ, MemRefType):
        return None
    if cast(MemRefType[Attribute], typ).get_element_type() != f32:
        return None
    if any(isinstance(op, loop.LoadOp) and op.buffer is buffer for op in nest.walk()):
        return None
    return store


def store_through_transposes(nest: loop.ParallelOp, threads: bool) -> bool:
    """Rewrites `nest` (over [N, Ho, Wo, C]) as described in the module's doc; False when
    it is not taken (nothing changed)."""
    batch, rows, columns, channels = nest.shape
    points = rows * columns
    store = _nchw_store(nest)
    kernel = nest.parent_op()
    parent = nest.parent_block()
    if store is None or channels % BLOCK or points < BLOCK or parent is None:
        return False
    assert isinstance(kernel, loop.KernelOp)
    entry = kernel.body.block
    scratch = entry.insert_arg(MemRefType(f32, [batch, rows, columns, channels]), len(entry.args))
    n, h, w, c = nest.body.block.args
    block = store.parent_block()
    assert block is not None
    block.insert_op_before(loop.StoreOp(store.value, scratch, [n, h, w, c]), store)
    output = store.buffer
    store.detach()
    store.erase()
    em = GemmBuilder()
    source = em.emit(collapse(scratch, [[0], [1, 2], [3]], [batch, points, channels]))
    target = em.emit(collapse(output, [[0], [1], [2, 3]], [batch, channels, points]))
    point_blocks = -(-points // BLOCK)
    count = batch * (channels // BLOCK) * point_blocks

    def task(body: GemmBuilder, number: SSAValue) -> None:
        rest, block = body.divide(number, point_blocks)
        image, channel_block = body.divide(rest, channels // BLOCK)
        first = block_start(body, block, points)
        channel = block_start(body, channel_block, channels)
        transposed_block(
            body,
            source,
            lambda i: [image, body.emit(arith.AddiOp(first, body.index(i))), channel],
            target,
            lambda j: [image, body.emit(arith.AddiOp(channel, body.index(j))), first],
        )

    em.parallel(count, threads and batch * points * channels >= PARALLEL_MIN_WORK, task)
    after = nest.next_op
    for op in em.take():
        if after is None:
            parent.add_op(op)
        else:
            parent.insert_op_before(op, after)
    return True


def collapse(buffer: SSAValue, groups: list[list[int]], shape: list[int]) -> Operation:
    """`buffer` (f32) viewed with the dimensions of each group merged (`shape` the
    result)."""
    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])
    return memref.CollapseShapeOp.create(
        operands=[buffer],
        result_types=[MemRefType(f32, shape)],
        properties={"reassociation": reassociation},
    )
