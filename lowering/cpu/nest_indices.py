"""Reading a loop nest's index arithmetic: constants, `x op c`, a nest's own index.

The CPU rewrites of loop kernels (padded copies, depthwise, image copies, transposed
copies and stores) match nests by their loads' and stores' indices: an index is the nest's
own (or a constant 0 where that dimension has extent 1, as a batch of 1), or a nest index
plus a constant. One reading of those shapes here, not one per rewrite.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue


def constant(value: SSAValue) -> int | float | None:
    """The value of an `arith.constant` integer or float, else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        attr = op.value
        if isinstance(attr, IntegerAttr | FloatAttr):
            return attr.value.data
    return None


def pair(op: Operation, kind: type[Operation]) -> tuple[SSAValue, int] | None:
    """(x, c) when `op` is `kind`(x, c) or `kind`(c, x) with c an integer constant."""
    if not isinstance(op, kind) or len(op.operands) != 2:
        return None
    a, b = op.operands
    for x, c in ((a, b), (b, a)):
        value = constant(c)
        if isinstance(value, int) and not isinstance(value, bool):
            return x, value
    return None


def own_index(index: SSAValue, arg: SSAValue, extent: int) -> bool:
    """`index` is the nest index `arg`, or a constant 0 where its extent is 1."""
    return index is arg or (extent == 1 and constant(index) == 0)


def index_in(block: Block, value: int, before: Operation | None = None) -> SSAValue:
    """A new index constant `value` in `block`: before `before`, else at its end."""
    op = arith.ConstantOp(IntegerAttr(value, IndexType()))
    if before is None:
        block.add_op(op)
    else:
        block.insert_op_before(op, before)
    return op.result


def andi_tests(condition: SSAValue) -> set[tuple[SSAValue, str, int]] | None:
    """The leaves (x, predicate, c) of an `andi` tree of `cmpi sge` and `cmpi slt` against
    constants (a padded read's in-bounds test), None for any other condition."""
    op = condition.owner
    if isinstance(op, arith.AndIOp):
        left, right = andi_tests(op.lhs), andi_tests(op.rhs)
        return None if left is None or right is None else left | right
    if isinstance(op, arith.CmpiOp):
        bound = constant(op.rhs)
        if isinstance(bound, int):
            names = {5: "sge", 2: "slt"}
            name = names.get(op.predicate.value.data)
            return None if name is None else {(op.lhs, name, bound)}
    return None


def clamped(value: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, E) when `value` is `min(max(x, 0), E - 1)` (em.iclamp's form: a padded read's
    nearest position inside a source of extent E)."""
    upper = pair(value.owner, arith.MinSIOp) if isinstance(value.owner, Operation) else None
    if upper is None:
        return None
    inner = upper[0].owner
    lower = pair(inner, arith.MaxSIOp) if isinstance(inner, Operation) else None
    if lower is None or lower[1] != 0:
        return None
    return lower[0], upper[1] + 1


def buffer_shape(value: SSAValue) -> tuple[int, ...] | None:
    """The static shape of the memref `value`, None for anything else."""
    typ = value.type
    if not isinstance(typ, MemRefType):
        return None
    shape = tuple(typ.get_shape())
    return shape if all(s > 0 for s in shape) else None
