"""Index arithmetic for code that replaces loop-dialect loops (the GPU mappings, the
tiled matmul): the block and thread ids, a linear number (a thread's, a block's, a task's)
to a loop's multi-index, moving a loop body into its new place, and whether a value is
defined inside a loop (so code may be moved out of it). Ops go through a `BlockBuilder`;
`index` stays for the GPU emulation (graphfuse.testing.gpu_on_cpu), which wants the op."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, gpu
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder

WARP = 32


def block_and_thread(builder: BlockBuilder) -> tuple[SSAValue, SSAValue]:
    """The x block id and x thread id (graphfuse launches one-dimensional grids)."""
    x = gpu.DimensionAttr(gpu.DimensionEnum.X)
    return builder.emit(gpu.BlockIdOp(x)), builder.emit(gpu.ThreadIdOp(x))


def index(value: int) -> arith.ConstantOp:
    """A detached `index` constant (a `BlockBuilder`'s `index` appends one and returns
    its value)."""
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def delinearize(linear: SSAValue, shape: Sequence[int], builder: BlockBuilder) -> list[SSAValue]:
    """The multi-index of `linear` (below the product of `shape`) in `shape`, last dimension
    fastest, computed by ops appended to `builder`. A dimension of extent 1 is the constant
    0, and the outermost other one is what remains after the inner ones are divided out."""
    result: list[SSAValue] = [linear] * len(shape)
    non_unit = [position for position, extent in enumerate(shape) if extent != 1]
    rest = linear
    for position in reversed(range(len(shape))):
        extent = shape[position]
        if extent == 1:
            result[position] = builder.index(0)
        elif position == non_unit[0]:
            result[position] = rest
        else:
            size = builder.index(extent)
            result[position] = builder.emit(arith.RemUIOp(rest, size))
            rest = builder.emit(arith.DivUIOp(rest, size))
    return result


def inline_body(body: Block, args: Sequence[SSAValue], target: Block) -> loop.YieldOp:
    """Moves `body`'s ops to the end of `target`, with its arguments replaced by `args`;
    returns its `loop.yield`, detached (the caller reads its values and erases it)."""
    for arg, value in zip(body.args, args, strict=True):
        arg.replace_all_uses_with(value)
    terminator = body.last_op
    assert isinstance(terminator, loop.YieldOp)
    for op in list(body.ops):
        if op is not terminator:
            op.detach()
            target.add_op(op)
    terminator.detach()
    return terminator


def inside(value: SSAValue, nest: Operation) -> bool:
    """Whether `value` is defined within `nest` (by an op or as a block argument)."""
    owner = value.owner
    if isinstance(owner, Operation):
        return nest.is_ancestor(owner)
    parent = owner.parent_op()
    return parent is not None and nest.is_ancestor(parent)
