"""Whether an f32 value is known to be at most 0 (or NaN): `a - m`, where m is a max
reduction (an scf.for carrying `maximumf`) over an expression of which `a` is one
instance, over the same iteration range. That is softmax's `x - max(x)` after lowering,
and the exp expansion (math_approximate) drops its overflow clamp for such arguments.

`a` is an instance of the reduced expression when both are the same ops with the same
attributes over the same operands, except that the reduction loop's index is replaced by
the index of a loop around `a` with equal bounds. Loads count as the same value only from
a memref the function never writes, so a store between the two reads cannot differ them.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref, scf, vector
from xdsl.ir import OpResult, SSAValue
from xdsl.traits import Pure

_MAX_OPS = (arith.MaximumfOp, arith.MaxnumfOp)


def at_most_zero(value: SSAValue) -> bool:
    """True when `value` is `a - max(...)` with `a` among the maximised values."""
    sub = value.owner
    if not isinstance(sub, arith.SubfOp):
        return False
    reduction = _max_reduction(sub.rhs)
    if reduction is None:
        return False
    loop, element = reduction
    outer = sub.parent_op()
    while outer is not None:
        if isinstance(outer, scf.ForOp) and _same_bounds(outer, loop):
            index = (loop.body.block.args[0], outer.body.block.args[0])
            if _same(element, sub.lhs, index):
                return True
        outer = outer.parent_op()
    return False


def _max_reduction(value: SSAValue) -> tuple[scf.ForOp, SSAValue] | None:
    """(the loop, the value it maximises) when `value` is an scf.for's max-carried result."""
    if not isinstance(value, OpResult) or not isinstance(loop := value.op, scf.ForOp):
        return None
    block = loop.body.block
    step = block.last_op
    if not isinstance(step, scf.YieldOp):
        return None
    carried = block.args[1 + value.index]
    combined = step.operands[value.index].owner
    if not isinstance(combined, _MAX_OPS):
        return None
    lhs, rhs = combined.operands
    if lhs == carried and rhs != carried:
        return loop, rhs
    if rhs == carried and lhs != carried:
        return loop, lhs
    return None


def _same_bounds(a: scf.ForOp, b: scf.ForOp) -> bool:
    pairs = ((a.lb, b.lb), (a.ub, b.ub), (a.step, b.step))
    return all(x == y or _equal_constants(x, y) for x, y in pairs)


def _equal_constants(a: SSAValue, b: SSAValue) -> bool:
    x, y = a.owner, b.owner
    if not isinstance(x, arith.ConstantOp) or not isinstance(y, arith.ConstantOp):
        return False
    return x.value == y.value


def _same(reduced: SSAValue, value: SSAValue, index: tuple[SSAValue, SSAValue]) -> bool:
    """`value` is `reduced` with the reduction's index index[0] read as index[1].

    Operand pairs are compared from a worklist, each pair once: the expressions can be
    as deep as a fused kernel's body, and shared subexpressions would otherwise be
    compared once per path to them."""
    pending = [(reduced, value)]
    compared: set[tuple[SSAValue, SSAValue]] = set()
    while pending:
        pair = pending.pop()
        if pair in compared:
            continue
        compared.add(pair)
        operands = _operand_pairs(*pair, index)
        if operands is None:
            return False
        pending.extend(operands)
    return True


def _operand_pairs(
    reduced: SSAValue, value: SSAValue, index: tuple[SSAValue, SSAValue]
) -> list[tuple[SSAValue, SSAValue]] | None:
    """The operand pairs that must also be the same for `value` to be `reduced` (see
    `_same`); None where the two already differ."""
    if reduced == index[0]:
        return [] if value == index[1] else None
    if reduced == value:
        return []
    if not isinstance(reduced, OpResult) or not isinstance(value, OpResult):
        return None
    a, b = reduced.op, value.op
    if (
        type(a) is not type(b)
        or reduced.index != value.index
        or a.regions
        or a.properties != b.properties
        or a.attributes != b.attributes
        or len(a.operands) != len(b.operands)
        or not (a.has_trait(Pure) or (isinstance(a, memref.LoadOp) and _read_only(a)))
    ):
        return None
    return list(zip(a.operands, b.operands, strict=True))


def _read_only(load: memref.LoadOp) -> bool:
    """Nothing stores to the loaded memref: its uses, not a walk of the whole function."""
    stores = (memref.StoreOp, vector.StoreOp)
    return not any(isinstance(use.operation, stores) for use in load.memref.uses)
