"""Row kernels on the GPU: one block per row, its threads sharing the row's loops.

A stitched softmax or layer-norm kernel is one loop over rows whose body holds a few
reductions and loops over the row (row_stitching). With a thread per row, neighbouring
threads would read elements a row apart, so a block takes a row and its B threads share it:
thread t runs points t, t + B, ... of an inner `loop.parallel` (coalesced) and combines the
same points of an inner `loop.reduce` into a partial value; `gpu.all_reduce` (warp shuffles,
then shared memory) gives every thread the row's value, the reduction's `init` combined in
last. Scalar code between them runs in every thread, and a `gpu.barrier` follows an inner
loop when more come. `use_rows` picks this mapping for a body holding an inner
`loop.parallel`, for reductions at least a warp long that read their rows contiguously, or
for few points with long reductions; never for types warp shuffles cannot carry (i1, i8,
i16). The rules in full: docs/gpu.md.
"""

from __future__ import annotations

import math

from xdsl.dialects import gpu, scf
from xdsl.dialects.builtin import Float32Type, Float64Type, IndexType, IntegerType, UnitAttr
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.hints import isa

from graphfuse.dialects import loop
from graphfuse.dialects.loop.combine import combine
from graphfuse.dialects.loop.emitter import BlockBuilder, is_float
from graphfuse.lowering.loop_to_upstream.loop_indexing import (
    WARP,
    block_and_thread,
    delinearize,
    inline_body,
)

FEW_POINTS = 1024
"""Nests with fewer points than this and a reduction of LONG_REDUCTION or more use rows
even when the reduction does not read contiguously."""
LONG_REDUCTION = 4096

InnerLoop = loop.ParallelOp | loop.ReduceOp


def _inner_loops(nest: loop.ParallelOp) -> list[InnerLoop]:
    return [op for op in nest.body.block.ops if isinstance(op, InnerLoop)]


def _shuffles(typ: Attribute) -> bool:
    """Whether warp shuffles carry values of `typ`."""
    if isinstance(typ, Float32Type | Float64Type):
        return True
    return isinstance(typ, IntegerType) and typ.bitwidth in (32, 64)


def _reads_rows(reduce: loop.ReduceOp) -> bool:
    """Whether every load that moves with `reduce`'s indices has its innermost index as
    the load's last index (consecutive threads then read consecutive elements)."""
    args = reduce.body.block.args
    moving: set[SSAValue] = set(args)
    for op in reduce.body.walk():
        if not any(operand in moving for operand in op.operands):
            continue
        moving.update(op.results)
        if isinstance(op, loop.LoadOp) and op.indices[-1] is not args[-1]:
            return False
    return True


def use_rows(nest: loop.ParallelOp) -> bool:
    """Whether `nest` runs a block per point (row) rather than a thread per point."""
    inner = _inner_loops(nest)
    reduces = [op for op in inner if isinstance(op, loop.ReduceOp)]
    if not inner or not all(_shuffles(r.result.type) for r in reduces):
        return False
    if len(reduces) < len(inner):
        return True
    longest = max(math.prod(op.shape) for op in inner)
    if math.prod(nest.shape) < FEW_POINTS and longest >= LONG_REDUCTION:
        return True
    return longest >= WARP and all(_reads_rows(r) for r in reduces)


def _identity(kind: loop.ReduceKind, typ: Attribute) -> float | int:
    """The value `kind` combines with to change nothing."""
    if is_float(typ):
        return {"add": 0.0, "mul": 1.0, "max": -math.inf, "min": math.inf}[kind.value]
    assert isa(typ, IntegerType)
    top = (1 << (typ.bitwidth - 1)) - 1
    return {"add": 0, "mul": 1, "max": -top - 1, "min": top, "umax": 0, "umin": -1}[kind.value]


def _strided_loop(
    op: InnerLoop, thread: SSAValue, threads: int, carried: list[SSAValue], out: BlockBuilder
) -> tuple[scf.ForOp, loop.YieldOp]:
    """Appends to `out` an scf.for from `thread` to the points of `op` by `threads`,
    holding `op`'s body (its multi-index recomputed from the loop's counter); returns the
    loop and the body's former `loop.yield` (detached, for the caller to end the body)."""
    upper, step = out.index(math.prod(op.shape)), out.index(threads)
    body = BlockBuilder(Block(arg_types=[IndexType(), *(value.type for value in carried)]))
    point = delinearize(body.block.args[0], op.shape, body)
    terminator = inline_body(op.body.block, point, body.block)
    for_op = scf.ForOp(thread, upper, step, carried, body.block)
    out.add(for_op)
    return for_op, terminator


def _share_loop(op: loop.ParallelOp, thread: SSAValue, threads: int, barrier: bool) -> None:
    out = BlockBuilder()
    for_op, terminator = _strided_loop(op, thread, threads, [], out)
    terminator.erase()
    for_op.body.block.add_op(scf.YieldOp())
    if barrier:
        out.add(gpu.BarrierOp())
    Rewriter.replace_op(op, out.take(), new_results=[])


def _share_reduce(op: loop.ReduceOp, thread: SSAValue, threads: int) -> None:
    kind, typ = op.kind.data, op.result.type
    out = BlockBuilder()
    identity = out.constant(_identity(kind, typ), typ)
    for_op, terminator = _strided_loop(op, thread, threads, [identity], out)
    body = BlockBuilder(for_op.body.block)
    partial = body.emit(combine(kind, body.block.args[1], terminator.values[0]))
    terminator.erase()
    body.add(scf.YieldOp(partial))
    exchange = BlockBuilder(Block(arg_types=[typ, typ]))
    both = exchange.emit(combine(kind, exchange.block.args[0], exchange.block.args[1]))
    exchange.add(gpu.YieldOp([both]))
    total = out.emit(
        gpu.AllReduceOp.from_body(Region(exchange.block), for_op.results[0], UnitAttr())
    )
    final = out.emit(combine(kind, op.init, total))
    Rewriter.replace_op(op, out.take(), [final])


def build_rows(nest: loop.ParallelOp, block_size: int, target: Block) -> tuple[int, int]:
    """Appends `nest` to `target` as a block per point; returns (grid, block)."""
    inner = _inner_loops(nest)
    longest = max(math.prod(op.shape) for op in inner)
    threads = min(block_size, -(-longest // WARP) * WARP)
    out = BlockBuilder(target)
    block_id, thread_id = block_and_thread(out)
    row = delinearize(block_id, nest.shape, out)
    inline_body(nest.body.block, row, target).erase()
    for position, op in enumerate(inner):
        if isinstance(op, loop.ParallelOp):
            _share_loop(op, thread_id, threads, position + 1 < len(inner))
        else:
            _share_reduce(op, thread_id, threads)
    return math.prod(nest.shape), threads
