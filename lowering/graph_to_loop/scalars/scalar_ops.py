"""The scalar body of each elementwise graph op, in upstream `arith` and `math`.

Operands arrive in their compute type (`emitter.compute_type`: f16/bf16 widened to f32).
Semantics follow the reference interpreter: NumPy's, with integer division truncating toward
zero and division by zero giving the dividend (as the reference's guard does), `ne` true
for NaN, and casts that truncate floats toward zero. Integer scalars are signless: ops on
`ui8`..`ui64` tensors use the unsigned arith ops (`integer_ops` holds the integer rules
that need guards).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat, BFloat16Type, Float16Type, FloatAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.hints import isa

from graphfuse.dialects import graph, loop
from graphfuse.dialects.loop.combine import NSZ
from graphfuse.dialects.loop.emitter import Emitter, compute_type, is_float
from graphfuse.lowering.graph_to_loop.scalars.integer_ops import (
    bitwise_not,
    divide,
    integer_power,
    remainder,
    shift_left,
    shift_right,
    sign,
    unsigned_operands,
)

ScalarRule = Callable[[Emitter, Operation, Sequence[SSAValue]], SSAValue]


def _unary_float(
    op_type: Callable[[SSAValue], Operation],
) -> ScalarRule:
    return lambda em, op, args: em.emit(op_type(args[0]))


def _neg(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    (x,) = args
    if is_float(x.type):
        return em.emit(arith.NegfOp(x))
    return em.emit(arith.SubiOp(em.constant(0, x.type), x))


def _abs(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    (x,) = args
    if unsigned_operands(op):
        return x
    return em.emit(math.AbsFOp(x) if is_float(x.type) else math.AbsIOp(x))


def _relu(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """max(x, 0), NaN propagating. For floats with `nsz`: relu(-0.0) may be -0.0 (equal to
    0.0 as a value), which spares AVX2 the four instructions per vector that order -0
    below +0 in `maximumf`."""
    (x,) = args
    if unsigned_operands(op):
        return x
    zero = em.constant(0, x.type)
    if not is_float(x.type):
        return em.emit(arith.MaxSIOp(x, zero))
    return em.emit(arith.MaximumfOp(x, zero, NSZ))


def _sigmoid(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """1 / (1 + exp(-x)): exp(-x) overflows to inf for very negative x, giving 0."""
    (x,) = args
    one = em.constant(1.0, x.type)
    e = em.emit(math.ExpOp(em.emit(arith.NegfOp(x))))
    return em.emit(arith.DivfOp(one, em.emit(arith.AddfOp(one, e))))


def _rsqrt(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """1 / sqrt(x), exactly rounded as the reference (math.rsqrt may be approximate)."""
    (x,) = args
    return em.emit(arith.DivfOp(em.constant(1.0, x.type), em.emit(math.SqrtOp(x))))


def _binary(
    float_op: Callable[[SSAValue, SSAValue], Operation],
    int_op: Callable[[SSAValue, SSAValue], Operation],
    uint_op: Callable[[SSAValue, SSAValue], Operation] | None = None,
) -> ScalarRule:
    """A rule by element kind: `uint_op` (when given) for unsigned integers."""

    def rule(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
        a, b = args
        if is_float(a.type):
            return em.emit(float_op(a, b))
        if uint_op is not None and unsigned_operands(op):
            return em.emit(uint_op(a, b))
        return em.emit(int_op(a, b))

    return rule


def _without_signed_zeros(
    make: Callable[[SSAValue, SSAValue, arith.FastMathFlagsAttr], Operation],
) -> Callable[[SSAValue, SSAValue], Operation]:
    """Max and min, NaN propagating, with `nsz` as in `_relu`: max(-0.0, 0.0) may be -0.0
    (equal as a value). Against a constant (Clip's bounds, ReLU6) the NaN then propagates
    through the operand order of one vmaxps: without `nsz` each took three instructions,
    a fifth of a depthwise kernel's vector work after its nine multiply-adds."""
    return lambda a, b: make(a, b, NSZ)


def _pow(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    a, b = args
    if not is_float(a.type):
        return integer_power(em, op, a, b)
    power = _small_power(b)
    if power is None:
        return em.emit(math.PowFOp(a, b))
    # x^2, x^3, x^4 (GELU's tanh form cubes) as products: a powf per element was a libm
    # call (libmvec's per 8 lanes), 6% of GPT-2's time; the products keep inf, NaN and -0.
    square = em.emit(arith.MulfOp(a, a))
    if power == 2:
        return square
    return em.emit(arith.MulfOp(square, a if power == 3 else square))


def _small_power(exponent: SSAValue) -> int | None:
    """2, 3 or 4 when `exponent` is that float constant."""
    owner = exponent.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, FloatAttr):
        return None
    value = owner.value.value.data
    return int(value) if value in (2.0, 3.0, 4.0) else None


_FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UNSIGNED_PREDICATES = {
    "eq": "eq",
    "ne": "ne",
    "lt": "ult",
    "le": "ule",
    "gt": "ugt",
    "ge": "uge",
}


def _compare(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    assert isinstance(op, graph.CompareOp)
    a, b = args
    predicate = op.predicate.data.value
    if is_float(a.type):
        return em.emit(arith.CmpfOp(a, b, _FLOAT_PREDICATES[predicate]))
    unsigned = a.type == IntegerType(1) or unsigned_operands(op)
    table = _UNSIGNED_PREDICATES if unsigned else _INT_PREDICATES
    return em.emit(arith.CmpiOp(a, b, table[predicate]))


def _select(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    return em.emit(arith.SelectOp(*args))


def _cast(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    assert isinstance(op, graph.CastOp)
    element = graph.tensor_type_of(op.result).get_element_type()
    return convert_scalar(em, args[0], element, unsigned_operands(op))


def convert_scalar(
    em: Emitter, x: SSAValue, element: Attribute, from_unsigned: bool = False
) -> SSAValue:
    """`x` (a compute-typed scalar, unsigned if `from_unsigned`) converted to tensor
    element type `element`, given in its compute type: rounds to f16/bf16, truncates
    floats to ints, tests `!= 0` for i1, extends integers by their source's signedness."""
    target = compute_type(element)
    if element == IntegerType(1):
        zero = em.constant(0, x.type)
        if is_float(x.type):
            return em.emit(arith.CmpfOp(x, zero, "une"))
        return em.emit(arith.CmpiOp(x, zero, "ne"))
    if is_float(x.type) and is_float(target):
        converted = _float_to_float(em, x, target)
        if element != target:  # round through the narrow type
            converted = em.emit(arith.ExtFOp(em.emit(arith.TruncFOp(converted, element)), target))
        return converted
    if is_float(x.type):
        assert isa(target, IntegerType), "graph element scalars are floats or signless ints"
        if graph.is_unsigned(element):
            return em.emit(arith.FPToUIOp(x, target))
        return em.emit(arith.FPToSIOp(x, target))
    unsigned = from_unsigned or x.type == IntegerType(1)
    if isinstance(target, AnyFloat):
        converted = em.emit(arith.UIToFPOp(x, target) if unsigned else arith.SIToFPOp(x, target))
        if element != target:  # an integer that f16/bf16 cannot hold exactly rounds
            converted = em.emit(arith.ExtFOp(em.emit(arith.TruncFOp(converted, element)), target))
        return converted
    return _int_to_int(em, x, target, unsigned)


def _float_to_float(em: Emitter, x: SSAValue, target: Attribute) -> SSAValue:
    if x.type == target:
        return x
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
    if width[str(x.type)] < width[str(target)]:
        return em.emit(arith.ExtFOp(x, target))
    return em.emit(arith.TruncFOp(x, target))


def _int_to_int(em: Emitter, x: SSAValue, target: Attribute, unsigned: bool) -> SSAValue:
    source_type = x.type
    assert isa(source_type, IntegerType) and isa(target, IntegerType)
    source_width, target_width = source_type.width.data, target.width.data
    if source_width == target_width:
        return x
    if source_width > target_width:
        return em.emit(arith.TruncIOp(x, target))
    if unsigned:
        return em.emit(arith.ExtUIOp(x, target))
    return em.emit(arith.ExtSIOp(x, target))


def _bitcast(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """The element's stored bits (an f16/bf16 rounded back to its own type, i1 as a
    byte) read as the result type, then widened to its compute type."""
    assert isinstance(op, graph.BitcastOp)
    (x,) = args
    source = graph.tensor_type_of(op.input).get_element_type()
    element = graph.tensor_type_of(op.result).get_element_type()
    stored = loop.signless(element)
    if x.type != loop.signless(source):
        x = em.emit(arith.TruncFOp(x, source))  # f16/bf16 computed in f32
    if x.type == IntegerType(1):
        assert isa(stored, IntegerType), "an i1 is bitcast to a byte"
        x = em.emit(arith.ExtUIOp(x, stored))
    if x.type != stored:
        x = em.emit(arith.BitcastOp(x, stored))
    target = compute_type(element)
    return x if target == stored else em.emit(arith.ExtFOp(x, target))


SCALAR_RULES: dict[type[Operation], ScalarRule] = {
    graph.NegOp: _neg,
    graph.AbsOp: _abs,
    graph.ReluOp: _relu,
    graph.ExpOp: _unary_float(math.ExpOp),
    graph.LogOp: _unary_float(math.LogOp),
    graph.SqrtOp: _unary_float(math.SqrtOp),
    graph.RsqrtOp: _rsqrt,
    graph.TanhOp: _unary_float(math.TanhOp),
    graph.SigmoidOp: _sigmoid,
    graph.ErfOp: _unary_float(math.ErfOp),
    graph.SinOp: _unary_float(math.SinOp),
    graph.CosOp: _unary_float(math.CosOp),
    graph.TanOp: _unary_float(math.TanOp),
    graph.AsinOp: _unary_float(math.AsinOp),
    graph.AcosOp: _unary_float(math.AcosOp),
    graph.AtanOp: _unary_float(math.AtanOp),
    graph.SinhOp: _unary_float(math.SinhOp),
    graph.CoshOp: _unary_float(math.CoshOp),
    graph.AsinhOp: _unary_float(math.AsinhOp),
    graph.AcoshOp: _unary_float(math.AcoshOp),
    graph.AtanhOp: _unary_float(math.AtanhOp),
    graph.FloorOp: _unary_float(math.FloorOp),
    graph.CeilOp: _unary_float(math.CeilOp),
    graph.RoundOp: _unary_float(math.RoundEvenOp),
    graph.SignOp: sign,
    graph.BitwiseNotOp: bitwise_not,
    graph.CastOp: _cast,
    graph.BitcastOp: _bitcast,
    graph.AddOp: _binary(arith.AddfOp, arith.AddiOp),
    graph.SubOp: _binary(arith.SubfOp, arith.SubiOp),
    graph.MulOp: _binary(arith.MulfOp, arith.MuliOp),
    graph.DivOp: divide,
    graph.ModOp: remainder,
    graph.MaxOp: _binary(_without_signed_zeros(arith.MaximumfOp), arith.MaxSIOp, arith.MaxUIOp),
    graph.MinOp: _binary(_without_signed_zeros(arith.MinimumfOp), arith.MinSIOp, arith.MinUIOp),
    graph.PowOp: _pow,
    graph.BitwiseAndOp: _binary(arith.AndIOp, arith.AndIOp),
    graph.BitwiseOrOp: _binary(arith.OrIOp, arith.OrIOp),
    graph.BitwiseXorOp: _binary(arith.XOrIOp, arith.XOrIOp),
    graph.ShiftLeftOp: shift_left,
    graph.ShiftRightOp: shift_right,
    graph.CompareOp: _compare,
    graph.SelectOp: _select,
}
"""Elementwise graph op type -> how to compute one element from its operands' elements."""


NARROW_FLOATS = (Float16Type, BFloat16Type)
"""Element types computed in f32 and rounded to after every op."""

EXACT_ON_NARROW_FLOATS: tuple[type[Operation], ...] = (
    graph.NegOp,
    graph.AbsOp,
    graph.ReluOp,
    graph.MaxOp,
    graph.MinOp,
    graph.SelectOp,
    graph.CastOp,
    graph.BitcastOp,
    graph.CompareOp,
    graph.ConstantOp,
    graph.FloorOp,
    graph.CeilOp,
    graph.RoundOp,
    graph.SignOp,
)
"""Ops whose result is already an f16/bf16 value when their operands are (or that round
themselves, as a cast does): no rounding after them."""


def round_result(em: Emitter, op: Operation, x: SSAValue) -> SSAValue:
    """`x`, the compute-typed (f32) element of `op`'s f16 or bf16 result, rounded to that
    type as the reference rounds every op's result: a fused chain of f16 ops must not keep
    f32 precision between its ops (an underflow to zero, a comparison, would differ)."""
    element = graph.tensor_type_of(op.results[0]).get_element_type()
    if isinstance(op, EXACT_ON_NARROW_FLOATS) or not isinstance(element, NARROW_FLOATS):
        return x
    if x.type != compute_type(element):
        return x
    return em.emit(arith.ExtFOp(em.emit(arith.TruncFOp(x, element)), x.type))
