"""loop-split-epilogues: a reduction's costly epilogue runs in a loop of its own, so it
vectorises.

A kernel computes `gelu(sum_k A[m,k] B[k,n] + b[n])` as one loop over (m, n) with the
k-sum inside. LLVM vectorises the innermost loop, the k-sum, and leaves the epilogue (here
tanh and divisions, once per output element) scalar. This pass distributes the innermost
dimension: per outer point, a first loop computes the accumulators of a row into a small
stack buffer, and a second loop, now free of reductions, runs the epilogue vectorised.
Both loops are clones of the original body; what each does not need is dead and removed
by the canonicaliser. It applies only where the epilogue has a division or a `math` op
(cheap epilogues are not worth a second pass over the row) and the row fits in 64 KiB, and
never to a loop that already holds a `loop.parallel` (a stitched row loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, math, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from graphfuse.dialects import loop

ROW_BYTES_LIMIT = 64 * 1024
_ALLOWED_DIALECTS = ("arith", "math", "loop", "memref")


def _costly(op: Operation) -> bool:
    return isinstance(op, arith.DivfOp) or op.dialect_name() == math.Math.name


def _after_reduce_is_costly(body: Block) -> bool:
    seen_reduce = False
    for op in body.ops:
        if isinstance(op, loop.ReduceOp):
            seen_reduce = True
        elif seen_reduce and _costly(op):
            return True
    return False


def splittable(nest: loop.ParallelOp) -> bool:
    """A top-level loop whose body reduces and then runs a costly epilogue."""
    shape = nest.shape
    body = nest.body.block
    if not shape or shape[-1] < 2:
        return False
    if any(op.dialect_name() not in _ALLOWED_DIALECTS for op in body.ops):
        return False
    # A row loop of a stitched kernel (see row_stitching) already runs its epilogue in
    # inner loops of its own; splitting it would take its rows out of the threaded loop.
    if any(isinstance(op, loop.ParallelOp) for op in body.ops):
        return False
    reduces = [op for op in body.ops if isinstance(op, loop.ReduceOp)]
    if not reduces or not _after_reduce_is_costly(body):
        return False
    return all(_row_bytes(r, shape[-1]) <= ROW_BYTES_LIMIT for r in reduces)


def _row_bytes(reduce: loop.ReduceOp, length: int) -> int:
    width = getattr(reduce.result.type, "bitwidth", 64)
    return length * max(int(width) // 8, 1)


def _clone_body(
    source: loop.ParallelOp, outer: tuple[SSAValue, ...], inner: SSAValue, target: Block
) -> dict[SSAValue, SSAValue]:
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(source.body.block.args, (*outer, inner), strict=True)
    )
    for op in source.body.block.ops:
        if isinstance(op, loop.YieldOp):
            continue
        target.add_op(op.clone(mapping))
    return mapping


def split(nest: loop.ParallelOp) -> None:
    shape = nest.shape
    length = shape[-1]
    reduces = [op for op in nest.body.block.ops if isinstance(op, loop.ReduceOp)]
    outer = loop.ParallelOp(shape[:-1])
    outer_args = tuple(outer.body.block.args)
    # The rows live on the stack of each outer iteration (an alloca scope), so parallel
    # iterations never share one.
    scope_block = Block()
    rows: list[SSAValue] = []
    for reduce in reduces:
        alloca = memref.AllocaOp.get(reduce.result.type, shape=[length], alignment=64)
        scope_block.add_op(alloca)
        rows.append(alloca.memref)
    accumulate = loop.ParallelOp([length])
    mapping = _clone_body(nest, outer_args, accumulate.body.block.args[0], accumulate.body.block)
    for op in list(accumulate.body.block.ops):
        if isinstance(op, loop.StoreOp):
            op.detach()
            op.erase()
    index = accumulate.body.block.args[0]
    for reduce, row in zip(reduces, rows, strict=True):
        accumulate.body.block.add_op(loop.StoreOp(mapping[reduce.result], row, [index]))
    accumulate.body.block.add_op(loop.YieldOp())
    epilogue = loop.ParallelOp([length])
    mapping = _clone_body(nest, outer_args, epilogue.body.block.args[0], epilogue.body.block)
    for reduce, row in zip(reduces, rows, strict=True):
        cloned = mapping[reduce.result].owner
        assert isinstance(cloned, loop.ReduceOp)
        load = loop.LoadOp(row, [epilogue.body.block.args[0]])
        epilogue.body.block.insert_op_before(load, cloned)
        cloned.result.replace_all_uses_with(load.result)
        cloned.detach()
        cloned.erase()
    epilogue.body.block.add_op(loop.YieldOp())
    scope_block.add_ops([accumulate, epilogue])
    if outer_args:
        scope_block.add_op(memref.AllocaScopeReturnOp.build(operands=[[]]))
        scope = memref.AllocaScopeOp.build(regions=[Region(scope_block)], result_types=[[]])
        outer.body.block.add_ops([scope, loop.YieldOp()])
    else:
        # A 1-D nest has no outer loop: its rows are allocated once, in the kernel's own
        # frame. (A scope there would outlive the canonicaliser, which inlines scopes only
        # into loop bodies, and become invalid once scf lowers to blocks.)
        moved = list(scope_block.ops)
        for op in moved:
            op.detach()
        outer.body.block.add_ops([*moved, loop.YieldOp()])
    parent = nest.parent_block()
    assert parent is not None
    parent.insert_op_before(outer, nest)
    nest.detach()
    nest.erase()


@dataclass(frozen=True)
class LoopSplitEpiloguesPass(ModulePass):
    """Run costly epilogues of reductions in a loop of their own, per outer point:

      loop.parallel [M, N] {^(%m, %n): %acc = loop.reduce ...; <epilogue>; loop.store ...}
    ->
      loop.parallel [M] {^(%m):
        memref.alloca_scope {
          %row = memref.alloca() : memref<Nxf32>
          loop.parallel [N] {^(%n): %acc = loop.reduce ...; loop.store %acc, %row[%n]}
          loop.parallel [N] {^(%n): %acc = loop.load %row[%n]; <epilogue>; loop.store ...}
        }
      }
    """

    name = "loop-split-epilogues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.walk():
            if not isinstance(kernel, loop.KernelOp):
                continue
            block = kernel.body.block
            for nest in [n for n in block.ops if isinstance(n, loop.ParallelOp)]:
                if splittable(nest):
                    split(nest)
