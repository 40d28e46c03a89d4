"""Scalar bodies of the elementwise graph ops whose integer form needs care, in `arith`.

Integer scalars are signless; whether an op reads them signed or unsigned comes from the
graph op's element type (`ui8`..`ui64` are unsigned). Semantics follow the reference
interpreter: division and remainder never trap (a divisor of 0, and MIN / -1, are guarded),
shifts by at least the width shift every bit out as NumPy does, and a negative integer
exponent gives 1 / x**-n truncated. Float remainders use `arith.remf`, which xDSL lacks:
`RemFOp` below declares it so that the printed kernel carries it to mlir-opt.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.loop.emitter import Emitter, is_float


@irdl_op_definition
class RemFOp(arith.FloatingPointLikeBinaryOperation):
    """Upstream `arith.remf`: the remainder of lhs / rhs with lhs's sign (C's fmod)."""

    name = "arith.remf"


def unsigned_operands(op: Operation) -> bool:
    """Whether `op`'s first operand holds unsigned integers (`ui8`..`ui64`)."""
    return graph.is_unsigned(graph.tensor_type_of(op.operands[0]).get_element_type())


def _width(value: SSAValue) -> int:
    typ = value.type
    assert isa(typ, IntegerType)
    return typ.width.data


def _select(em: Emitter, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
    return em.emit(arith.SelectOp(condition, a, b))


def _cmpi(em: Emitter, a: SSAValue, b: SSAValue | int, predicate: str) -> SSAValue:
    rhs = em.constant(b, a.type) if isinstance(b, int) else b
    return em.emit(arith.CmpiOp(a, rhs, predicate))


def _safe_divisor(em: Emitter, b: SSAValue, unsigned: bool) -> tuple[SSAValue, SSAValue | None]:
    """b with 0 (and, signed, -1) replaced by 1, so no division traps; and the signed
    test b == -1 (None unsigned), whose quotient the caller computes by negation."""
    one = em.constant(1, b.type)
    unsafe = _cmpi(em, b, 0, "eq")
    if unsigned:
        return _select(em, unsafe, one, b), None
    is_minus_one = _cmpi(em, b, -1, "eq")
    unsafe = em.emit(arith.OrIOp(unsafe, is_minus_one))
    return _select(em, unsafe, one, b), is_minus_one


def divide(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """Float division, or integer division toward zero with the reference's guards: x / 0
    = x, and MIN / -1 wraps instead of trapping."""
    a, b = args
    if is_float(a.type):
        return em.emit(arith.DivfOp(a, b))
    safe_b, is_minus_one = _safe_divisor(em, b, unsigned_operands(op))
    if is_minus_one is None:
        return em.emit(arith.DivUIOp(a, safe_b))
    quotient = em.emit(arith.DivSIOp(a, safe_b))
    negated = em.emit(arith.SubiOp(em.constant(0, a.type), a))
    return _select(em, is_minus_one, negated, quotient)


def remainder(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """graph.mod: C's fmod under `fmod`, else the remainder with the divisor's sign."""
    assert isinstance(op, graph.ModOp)
    a, b = args
    fmod = op.fmod is not None
    if is_float(a.type):
        r = em.emit(RemFOp(a, b))
        return r if fmod else _float_floor_mod(em, r, b)
    unsigned = unsigned_operands(op)
    safe_b, _ = _safe_divisor(em, b, unsigned)
    if unsigned:
        return em.emit(arith.RemUIOp(a, safe_b))
    r = em.emit(arith.RemSIOp(a, safe_b))
    if fmod:
        return r
    # A nonzero remainder whose sign differs from the divisor's moves by one divisor.
    signs_differ = _cmpi(em, em.emit(arith.XOrIOp(r, b)), 0, "slt")
    nonzero = _cmpi(em, r, 0, "ne")
    adjust = em.emit(arith.AndIOp(signs_differ, nonzero))
    return _select(em, adjust, em.emit(arith.AddiOp(r, b)), r)


def _float_floor_mod(em: Emitter, r: SSAValue, b: SSAValue) -> SSAValue:
    """numpy.mod from fmod's r: r + b where r is nonzero with the other sign than b, and a
    zero with b's sign (NaN stays NaN: its comparisons are false)."""
    zero = em.constant(0.0, r.type)
    r_negative = em.emit(arith.CmpfOp(r, zero, "olt"))
    r_positive = em.emit(arith.CmpfOp(r, zero, "ogt"))
    b_negative = em.emit(arith.CmpfOp(b, zero, "olt"))
    b_positive = em.emit(arith.CmpfOp(b, zero, "ogt"))
    adjust = em.emit(
        arith.OrIOp(
            em.emit(arith.AndIOp(r_negative, b_positive)),
            em.emit(arith.AndIOp(r_positive, b_negative)),
        )
    )
    moved = _select(em, adjust, em.emit(arith.AddfOp(r, b)), r)
    is_zero = em.emit(arith.CmpfOp(r, zero, "oeq"))
    signed_zero = em.emit(math.CopySignOp(zero, b))
    return _select(em, is_zero, signed_zero, moved)


def integer_power(em: Emitter, op: Operation, a: SSAValue, b: SSAValue) -> SSAValue:
    """a ** b on integers (wrapping); a negative signed b gives 1 / a**-b truncated: 1 for
    a == 1, +-1 for a == -1, else 0 (math.ipowi would divide by zero for a == 0)."""
    if unsigned_operands(op):
        return em.emit(math.IPowIOp(a, b))
    zero, one, minus_one = (em.constant(v, a.type) for v in (0, 1, -1))
    negative = _cmpi(em, b, 0, "slt")
    power = em.emit(math.IPowIOp(a, _select(em, negative, zero, b)))
    odd = _cmpi(em, em.emit(arith.AndIOp(b, one)), 0, "ne")
    of_minus_one = _select(em, odd, minus_one, one)
    small = _select(em, _cmpi(em, a, -1, "eq"), of_minus_one, zero)
    reciprocal = _select(em, _cmpi(em, a, 1, "eq"), one, small)
    return _select(em, negative, reciprocal, power)


def _shift_count(em: Emitter, b: SSAValue) -> tuple[SSAValue, SSAValue]:
    """Whether count b (read unsigned) shifts every bit out, and b made safe (0 then)."""
    out = _cmpi(em, b, _width(b), "uge")
    return out, _select(em, out, em.constant(0, b.type), b)


def shift_left(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    a, b = args
    out, count = _shift_count(em, b)
    return _select(em, out, em.constant(0, a.type), em.emit(arith.ShLIOp(a, count)))


def shift_right(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """Logical for unsigned elements; arithmetic for signed ones, where a count of at
    least the width acts as width - 1 (0 or -1, as NumPy gives)."""
    a, b = args
    if unsigned_operands(op):
        out, count = _shift_count(em, b)
        return _select(em, out, em.constant(0, a.type), em.emit(arith.ShRUIOp(a, count)))
    count = em.emit(arith.MinUIOp(b, em.constant(_width(b) - 1, b.type)))
    return em.emit(arith.ShRSIOp(a, count))


def bitwise_not(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    (x,) = args
    return em.emit(arith.XOrIOp(x, em.constant(-1, x.type)))


def sign(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """-1, 0 or 1; a float zero or NaN is itself."""
    (x,) = args
    if is_float(x.type):
        zero = em.constant(0.0, x.type)
        positive = em.emit(arith.CmpfOp(x, zero, "ogt"))
        negative = em.emit(arith.CmpfOp(x, zero, "olt"))
        not_positive = _select(em, negative, em.constant(-1.0, x.type), x)
        return _select(em, positive, em.constant(1.0, x.type), not_positive)
    zero, one = em.constant(0, x.type), em.constant(1, x.type)
    if unsigned_operands(op):
        return _select(em, _cmpi(em, x, 0, "ne"), one, zero)
    not_positive = _select(em, _cmpi(em, x, 0, "slt"), em.constant(-1, x.type), zero)
    return _select(em, _cmpi(em, x, 0, "sgt"), one, not_positive)
