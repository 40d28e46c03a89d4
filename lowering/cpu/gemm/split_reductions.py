"""Nests with several contractions become one nest per contraction, for loop-tile-matmul.

A kernel that fuses a ResNet downsampling block computes `relu(conv_a(x) + conv_b(y))` as
one nest whose body holds two `loop.reduce`s, and loop-tile-matmul takes a nest with one:
both convolutions stayed dot products. Here every reduction but the last moves to a nest
of its own, of the same shape, that stores its sums into a scratch buffer of that shape;
the original nest loads them in its place. Each nest then holds one reduction and is
tiled on its own, the last one's epilogue reading the others' sums along its columns.
A reduction moves only where its nest would be tiled (match_contraction takes it).
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.contractions import match_contraction


def split_reductions(kernel: loop.KernelOp) -> None:
    """Moves all but the last reduction of each of `kernel`'s top-level nests into nests
    of their own, where those are contractions loop-tile-matmul tiles."""
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        reduces = [op for op in nest.body.block.ops if isinstance(op, loop.ReduceOp)]
        regions = [op for op in nest.body.block.ops if op.regions]
        if len(reduces) < 2 or len(regions) != len(reduces):
            continue
        for reduce in reduces[:-1]:
            _move_out(kernel, nest, reduce)


def _move_out(kernel: loop.KernelOp, nest: loop.ParallelOp, reduce: loop.ReduceOp) -> None:
    entry = kernel.body.block
    sums = entry.insert_arg(MemRefType(reduce.result.type, nest.shape), len(entry.args))
    alone = loop.ParallelOp(nest.shape)
    body = alone.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(nest.body.block.args, body.args, strict=True))
    kept: loop.StoreOp | None = None
    for op in nest.body.block.ops:
        if isinstance(op, loop.YieldOp):
            continue
        copy = op.clone(value_mapper=mapping)
        if isinstance(copy, loop.StoreOp):
            copy.erase()
            continue
        body.add_op(copy)
        if op is reduce:
            kept = loop.StoreOp(copy.results[0], sums, list(body.args))
            body.add_op(kept)
    body.add_op(loop.YieldOp())
    remove_dead(body)
    parent = nest.parent_block()
    assert parent is not None and kept is not None
    parent.insert_op_before(alone, nest)
    if match_contraction(alone) is None:
        alone.detach()
        alone.erase()
        entry.erase_arg(sums)
        return
    load = loop.LoadOp(sums, list(nest.body.block.args))
    nest.body.block.insert_op_before(load, reduce)
    reduce.result.replace_all_uses_with(load.result)
    reduce.detach()
    reduce.erase()


def remove_dead(block: Block) -> None:
    """Erases the ops of `block` (stores and the terminator aside) whose results are unused:
    loads, index and float arithmetic, reductions."""
    for op in reversed(list(block.ops)):
        if isinstance(op, loop.StoreOp | loop.YieldOp):
            continue
        if all(not result.uses for result in op.results):
            _erase(op)


def _erase(op: Operation) -> None:
    op.detach()
    op.erase()
