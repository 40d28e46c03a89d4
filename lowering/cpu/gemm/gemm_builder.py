"""The op builder loop-tile-matmul's packing and tile code write with.

The shared `BlockBuilder` (appending ops and constants where they are asked for) plus
what every part of the tiled GEMM needs: counted `scf.for` loops and their ends, a task
loop that is an `scf.parallel` when threads are on, index division and chunking, and the
evaluation of one factor of the product (a load with its index arithmetic) at new indices
by cloning its ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, Region, SSAValue

from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.gemm.contractions import Operand
from graphfuse.lowering.loop_to_upstream.loop_indexing import delinearize

Mapping = dict[SSAValue, SSAValue]


class GemmBuilder(BlockBuilder):
    """A `BlockBuilder` with the loops and index arithmetic of the tiled GEMM."""

    def loop(
        self, lower: SSAValue, upper: SSAValue, carried: Sequence[SSAValue] = ()
    ) -> tuple[scf.ForOp, GemmBuilder]:
        """An `scf.for` from `lower` to `upper` (step 1) carrying `carried`, and a builder
        of its body (which the caller ends with its yield)."""
        body = Block(arg_types=[IndexType(), *(v.type for v in carried)])
        for_op = scf.ForOp(lower, upper, self.index(1), list(carried), body)
        self.add(for_op)
        return for_op, GemmBuilder(body)

    def parallel(
        self, count: int, threads: bool, body: Callable[[GemmBuilder, SSAValue], None]
    ) -> None:
        """`body` for each of `count` iterations: an scf.parallel when `threads` is on and
        there are several, else an scf.for."""
        block = Block(arg_types=[IndexType()])
        body(GemmBuilder(block), block.args[0])
        bounds = (self.index(0), self.index(count), self.index(1))
        if threads and count > 1:
            block.add_op(scf.ReduceOp())
            self.add(scf.ParallelOp([bounds[0]], [bounds[1]], [bounds[2]], Region(block)))
        else:
            block.add_op(scf.YieldOp())
            self.add(scf.ForOp(*bounds, [], block))

    def branch(
        self,
        condition: SSAValue,
        then: Callable[[GemmBuilder], None],
        otherwise: Callable[[GemmBuilder], None],
    ) -> None:
        """An `scf.if` on `condition` whose branches `then` and `otherwise` build (each
        ended with its yield here)."""
        regions: list[Region] = []
        for build in (then, otherwise):
            inner = GemmBuilder()
            build(inner)
            inner.add(scf.YieldOp())
            regions.append(Region(inner.block))
        self.add(scf.IfOp(condition, [], regions[0], regions[1]))

    def end_loops(self, outer: GemmBuilder) -> None:
        """Ends every loop from this builder's block out to (not including) `outer`'s."""
        block: Block | None = self.block
        while block is not None and block is not outer.block:
            block.add_op(scf.YieldOp())
            parent = block.parent_op()
            block = parent.parent_block() if parent is not None else None

    def divide(self, value: SSAValue, divisor: int) -> tuple[SSAValue, SSAValue]:
        """value / divisor and value mod divisor."""
        return (
            self.emit(arith.DivUIOp(value, self.index(divisor))),
            self.emit(arith.RemUIOp(value, self.index(divisor))),
        )

    def chunk(self, number: SSAValue, size: int, limit: int) -> tuple[SSAValue, SSAValue]:
        """Bounds of chunk `number` of `size` items out of `limit`: the last may be short."""
        first = self.emit(arith.MuliOp(number, self.index(size)))
        end = self.emit(arith.AddiOp(first, self.index(size)))
        return first, self.emit(arith.MinUIOp(end, self.index(limit)))

    def split(self, value: SSAValue, shape: Sequence[int]) -> list[SSAValue]:
        """The multi-index of the linear `value` in `shape`, last dimension fastest."""
        return delinearize(value, shape, self)

    def bind(self, args: Sequence[SSAValue], value: SSAValue, shape: Sequence[int]) -> Mapping:
        """`args` mapped to the multi-index of the linear `value` in `shape`."""
        return dict(zip(args, self.split(value, shape), strict=True))

    def clone_chain(
        self, operand: Operand, mapping: Mapping, skip: Operation | None = None
    ) -> Mapping:
        """`mapping` extended by clones of `operand`'s ops (all but `skip`), appended here."""
        local = dict(mapping)
        for op in operand.chain:
            if op is not skip:
                self.add(op.clone(value_mapper=local))
        return local

    def evaluate(self, operand: Operand, mapping: Mapping) -> SSAValue:
        """`operand`'s value at the indices `mapping` gives (its ops cloned here)."""
        local = self.clone_chain(operand, mapping)
        return local.get(operand.value, operand.value)
