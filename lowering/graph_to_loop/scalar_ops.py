"""The scalar body of each elementwise graph op, in upstream `arith` and `math`.

Operands arrive in their compute type (`emitter.compute_type`: f16/bf16 widened to f32).
Semantics follow the reference interpreter: NumPy's, with integer division truncating toward
zero and division by zero giving the dividend (as the reference's guard does), `ne` true
for NaN, and casts that truncate floats toward zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerType
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.loop.emitter import Emitter, compute_type, is_float

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
    return em.emit(math.AbsFOp(x) if is_float(x.type) else math.AbsIOp(x))


def _relu(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """max(x, 0), NaN propagating. For floats with `nsz`: relu(-0.0) may be -0.0 (equal to
    0.0 as a value), which spares AVX2 the four instructions per vector that order -0
    below +0 in `maximumf`."""
    (x,) = args
    zero = em.constant(0, x.type)
    if not is_float(x.type):
        return em.emit(arith.MaxSIOp(x, zero))
    return em.emit(
        arith.MaximumfOp(x, zero, arith.FastMathFlagsAttr((FastMathFlag.NO_SIGNED_ZEROS,)))
    )


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
) -> ScalarRule:
    def rule(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
        a, b = args
        return em.emit(float_op(a, b) if is_float(a.type) else int_op(a, b))

    return rule


def _div(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    """Float division, or integer division with the reference's guards: x / 0 = x, and
    MIN / -1 wraps instead of trapping."""
    a, b = args
    if is_float(a.type):
        return em.emit(arith.DivfOp(a, b))
    zero, one, minus_one = (em.constant(v, a.type) for v in (0, 1, -1))
    is_zero = em.emit(arith.CmpiOp(b, zero, "eq"))
    is_minus_one = em.emit(arith.CmpiOp(b, minus_one, "eq"))
    unsafe = em.emit(arith.OrIOp(is_zero, is_minus_one))
    safe_b = em.emit(arith.SelectOp(unsafe, one, b))
    quotient = em.emit(arith.DivSIOp(a, safe_b))
    negated = em.emit(arith.SubiOp(zero, a))
    return em.emit(arith.SelectOp(is_minus_one, negated, quotient))


def _pow(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    a, b = args
    if not is_float(a.type):
        return em.emit(math.IPowIOp(a, b))
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
_BOOL_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _compare(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    assert isinstance(op, graph.CompareOp)
    a, b = args
    predicate = op.predicate.data.value
    if is_float(a.type):
        return em.emit(arith.CmpfOp(a, b, _FLOAT_PREDICATES[predicate]))
    table = _BOOL_PREDICATES if a.type == IntegerType(1) else _INT_PREDICATES
    return em.emit(arith.CmpiOp(a, b, table[predicate]))


def _select(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    return em.emit(arith.SelectOp(*args))


def _cast(em: Emitter, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
    assert isinstance(op, graph.CastOp)
    element = graph.tensor_type_of(op.result).get_element_type()
    return convert_scalar(em, args[0], element)


def convert_scalar(em: Emitter, x: SSAValue, element: Attribute) -> SSAValue:
    """`x` (a compute-typed scalar) converted to tensor element type `element`, given in
    its compute type: rounds to f16/bf16, truncates floats to ints, tests `!= 0` for i1."""
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
        assert isa(target, IntegerType), "graph elements are floats or signless integers"
        return em.emit(arith.FPToSIOp(x, target))
    if isinstance(target, AnyFloat):
        unsigned = x.type == IntegerType(1)
        converted = em.emit(arith.UIToFPOp(x, target) if unsigned else arith.SIToFPOp(x, target))
        if element != target:  # an integer that f16/bf16 cannot hold exactly rounds
            converted = em.emit(arith.ExtFOp(em.emit(arith.TruncFOp(converted, element)), target))
        return converted
    return _int_to_int(em, x, target)


def _float_to_float(em: Emitter, x: SSAValue, target: Attribute) -> SSAValue:
    if x.type == target:
        return x
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
    if width[str(x.type)] < width[str(target)]:
        return em.emit(arith.ExtFOp(x, target))
    return em.emit(arith.TruncFOp(x, target))


def _int_to_int(em: Emitter, x: SSAValue, target: Attribute) -> SSAValue:
    source_type = x.type
    assert isa(source_type, IntegerType) and isa(target, IntegerType)
    source_width, target_width = source_type.width.data, target.width.data
    if source_width == target_width:
        return x
    if source_width > target_width:
        return em.emit(arith.TruncIOp(x, target))
    if source_width == 1:
        return em.emit(arith.ExtUIOp(x, target))
    return em.emit(arith.ExtSIOp(x, target))


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
    graph.CastOp: _cast,
    graph.AddOp: _binary(arith.AddfOp, arith.AddiOp),
    graph.SubOp: _binary(arith.SubfOp, arith.SubiOp),
    graph.MulOp: _binary(arith.MulfOp, arith.MuliOp),
    graph.DivOp: _div,
    graph.MaxOp: _binary(arith.MaximumfOp, arith.MaxSIOp),
    graph.MinOp: _binary(arith.MinimumfOp, arith.MinSIOp),
    graph.PowOp: _pow,
    graph.CompareOp: _compare,
    graph.SelectOp: _select,
}
"""Elementwise graph op type -> how to compute one element from its operands' elements."""


EXACT_ON_NARROW_FLOATS: tuple[type[Operation], ...] = (
    graph.NegOp,
    graph.AbsOp,
    graph.ReluOp,
    graph.MaxOp,
    graph.MinOp,
    graph.SelectOp,
    graph.CastOp,
    graph.CompareOp,
    graph.ConstantOp,
)
"""Ops whose result is already an f16/bf16 value when their operands are (or that round
themselves, as a cast does): no rounding after them."""


def round_result(em: Emitter, op: Operation, x: SSAValue) -> SSAValue:
    """`x`, the compute-typed (f32) element of `op`'s f16 or bf16 result, rounded to that
    type as the reference rounds every op's result: a fused chain of f16 ops must not keep
    f32 precision between its ops (an underflow to zero, a comparison, would differ)."""
    element = graph.tensor_type_of(op.results[0]).get_element_type()
    if isinstance(op, EXACT_ON_NARROW_FLOATS) or compute_type(element) == element:
        return x
    if x.type != compute_type(element):
        return x
    return em.emit(arith.ExtFOp(em.emit(arith.TruncFOp(x, element)), x.type))
