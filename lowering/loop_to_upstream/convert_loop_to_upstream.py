"""convert-loop-to-upstream: loop kernels to `func`, `scf`, `memref`, `arith` and `math`.

    loop.kernel @k {^bb0(%a: memref<4xf32>): ...}   ->  func.func @k(%a: memref<4xf32>)
    loop.parallel [4, 8] {...}                        ->  scf.for over 4 { scf.for over 8 {...} }
    %r = loop.reduce add [8] init(%z : f32) {...}     ->  scf.for with an accumulator iter_arg
    loop.load / loop.store / loop.call                ->  memref.load / memref.store / func.call

Float sums carry the `reassoc` fast-math flag: `loop.reduce` leaves the order of combination
open, and LLVM vectorises a reduction only when it may reassociate. Functions that take
buffers from the graph conversion get `llvm.emit_c_interface`, so C and Python can call them
through `_mlir_ciface_<name>`. i1 buffers become byte buffers (see bool_buffers), and
unsigned ones signless (see unsigned_buffers). The output is plain upstream MLIR; `mlir-opt`
parses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp, UnitAttr
from xdsl.dialects.utils import FastMathFlag
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi
from graphfuse.dialects.loop.combine import combine
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.loop_to_upstream.bool_buffers import store_bools_as_bytes
from graphfuse.lowering.loop_to_upstream.loop_indexing import inline_body
from graphfuse.lowering.loop_to_upstream.unsigned_buffers import store_unsigned_as_signless

PARALLEL_MIN_WORK = 1 << 15
"""Loop nests with fewer iterations than this (counting nested reductions) stay serial:
handing a small loop to worker threads costs tens of microseconds, more than the loop."""


@dataclass(frozen=True)
class ConvertLoopToUpstreamPass(ModulePass):
    """Lower the loop dialect to scf/memref/arith/math/func that upstream mlir-opt reads."""

    name = "convert-loop-to-upstream"

    parallel: bool = False
    """Run the leading dims of each kernel's top-level loops as scf.parallel (for threads:
    MLIR's OpenMP lowering and graphfuse's parallel runtime pick them up)."""

    min_work: int = PARALLEL_MIN_WORK
    """Nests with fewer iterations (nested reductions counted) stay serial."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Decided before converting: the walk lowers nested reductions first, and _work
        # counts them.
        threaded = {o for o in op.walk() if self.parallel and _worth_threads(o, self.min_work)}
        store_unsigned_as_signless(op)
        for inner in reversed(list(op.walk())):
            _convert(inner, inner in threaded)
        store_bools_as_bytes(op)
        for function in op.ops:
            if isinstance(function, func.FuncOp) and abi.OUTPUTS in function.attributes:
                function.attributes["llvm.emit_c_interface"] = UnitAttr()


def _convert(op: Operation, threaded: bool) -> None:
    if isinstance(op, loop.LoadOp):
        Rewriter.replace_op(op, memref.LoadOp.get(op.buffer, op.indices))
    elif isinstance(op, loop.StoreOp):
        Rewriter.replace_op(op, memref.StoreOp.get(op.value, op.buffer, op.indices))
    elif isinstance(op, loop.CallOp):
        Rewriter.replace_op(op, func.CallOp(op.callee, op.buffers, []))
    elif isinstance(op, loop.ParallelOp):
        _lower_nest(op, op.shape, None, threaded)
    elif isinstance(op, loop.ReduceOp):
        _lower_nest(op, op.shape, op)
    elif isinstance(op, loop.KernelOp):
        _lower_kernel(op)


def _work(op: loop.ParallelOp | loop.ReduceOp) -> int:
    """Iterations of `op`'s nest: its points times (1 + the work of the nests and
    reductions directly inside it)."""
    nested = sum(
        _work(inner)
        for inner in op.body.block.ops
        if isinstance(inner, loop.ParallelOp | loop.ReduceOp)
    )
    return math.prod(op.shape) * (1 + nested)


def _worth_threads(op: Operation, min_work: int) -> bool:
    """A kernel's top-level loop nest big enough to pay for worker threads."""
    return (
        isinstance(op, loop.ParallelOp)
        and bool(op.shape)
        and isinstance(op.parent_op(), loop.KernelOp)
        and _work(op) >= min_work
    )


def _parallel_dims(bounds: Sequence[int], body: Block) -> int:
    """How many leading dims of a threaded nest run as scf.parallel: all but the
    innermost, which stays a plain loop for the vectoriser; all of them where those are
    all of extent 1 and each point runs loops of its own (a global pool's [1, C] nest
    over a reduction: one task on one thread otherwise; 1280 x 7 x 7 took 19 us, 14 on
    2 threads). An elementwise [1, N] nest keeps its vector loop."""
    nested = any(isinstance(op, scf.ForOp | loop.ReduceOp | loop.ParallelOp) for op in body.ops)
    if len(bounds) > 1 and math.prod(bounds[:-1]) == 1 and nested:
        return len(bounds)
    return max(len(bounds) - 1, 1)


def _lower_nest(
    op: loop.ParallelOp | loop.ReduceOp,
    bounds: Sequence[int],
    reduce: loop.ReduceOp | None,
    threaded: bool = False,
) -> None:
    """Loops over `bounds` running `op`'s body: scf.for, with all but the innermost dim
    (kept a plain loop for the vectoriser) as one scf.parallel when `threaded`; a reduction
    threads its accumulator through every loop as an iter_arg."""
    before = BlockBuilder()
    zero, one = before.index(0), before.index(1)
    accumulator: SSAValue | None = reduce.init if reduce is not None else None
    outer: Operation | None = None
    level = before
    induction: list[SSAValue] = []
    n_parallel = _parallel_dims(bounds, op.body.block) if threaded else 0
    if n_parallel:
        uppers = [before.index(b) for b in bounds[:n_parallel]]
        par_block = Block(arg_types=[IndexType()] * n_parallel)
        outer = scf.ParallelOp([zero] * n_parallel, uppers, [one] * n_parallel, Region(par_block))
        before.add(outer)
        induction.extend(par_block.args)
        level = BlockBuilder(par_block)
    for bound in bounds[n_parallel:]:
        upper = level.index(bound)
        loop_block = Block(arg_types=[IndexType()] + ([accumulator.type] if accumulator else []))
        for_op = scf.ForOp(
            zero, upper, one, [accumulator] if accumulator else [], Region(loop_block)
        )
        level.add(for_op)
        if outer is None:
            outer = for_op
        else:
            level.add(_end_of(level.block, for_op.results))
        induction.append(loop_block.args[0])
        accumulator = loop_block.args[1] if reduce is not None else None
        level = BlockBuilder(loop_block)
    terminator = inline_body(op.body.block, induction, level.block)
    result = _finish_body(terminator, level if bounds else None, accumulator, reduce)
    Rewriter.insert_op(before.take(), InsertPoint.before(op))
    if reduce is not None:
        final = outer.results[0] if outer is not None else result
        assert final is not None
        reduce.result.replace_all_uses_with(final)
    terminator.erase()
    op.detach()
    op.erase()


def _end_of(block: Block, results: Sequence[SSAValue]) -> Operation:
    """The terminator of a loop body: scf.reduce in an scf.parallel, else scf.yield."""
    if isinstance(block.parent_op(), scf.ParallelOp):
        return scf.ReduceOp()
    return scf.YieldOp(*results)


def _finish_body(
    terminator: loop.YieldOp,
    body: BlockBuilder | None,
    accumulator: SSAValue | None,
    reduce: loop.ReduceOp | None,
) -> SSAValue | None:
    """Ends the innermost loop's `body` (None: no loop): combine into the accumulator
    (reductions) and yield."""
    if reduce is None:
        if body is not None:
            body.add(_end_of(body.block, []))
        return None
    element = terminator.values[0]
    if body is None:  # a reduction over no dimensions is its element
        return element
    assert accumulator is not None
    _allow_contract(element, reduce)
    combined = body.emit(combine(reduce.kind.data, accumulator, element))
    body.add(scf.YieldOp(combined))
    return None


def _allow_contract(element: SSAValue, reduce: loop.ReduceOp) -> None:
    """A float sum of products (a convolution or matmul left to the loop vectoriser:
    depthwise rows, small contractions) lets LLVM fuse each product into its sum's add (a
    multiply-add, one rounding less): the sum's add carries `contract`, the product must
    too."""
    product = element.owner
    if reduce.kind.data != loop.ReduceKind.ADD or not isinstance(product, arith.MulfOp):
        return
    flags = product.fastmath.data
    if FastMathFlag.ALLOW_CONTRACT not in flags:
        product.fastmath = arith.FastMathFlagsAttr((*flags, FastMathFlag.ALLOW_CONTRACT))


def _lower_kernel(kernel: loop.KernelOp) -> None:
    block = kernel.body.block
    terminator = block.last_op
    assert isinstance(terminator, loop.YieldOp)
    arg_types = list(kernel.arg_types)
    Rewriter.replace_op(terminator, func.ReturnOp())
    region = kernel.detach_region(kernel.body)
    function = func.FuncOp(kernel.sym_name.data, FunctionType.from_lists(arg_types, []), region)
    Rewriter.replace_op(kernel, function)
