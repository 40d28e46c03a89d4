"""math-approximate: math.tanh, math.erf and math.exp on f32 as branch-free
polynomials.

LLVM vectorises a loop only if every call in it has a vector form. `log` and `pow` map to
glibc's vector math library (libmvec) and `sqrt` is an instruction, but `tanh` and `erf`
have no vector mapping and would keep a GELU or tanh loop scalar. This pass rewrites them
into arith ops, so those loops vectorise too. `exp` does map to libmvec, but a call per
vector bound softmax, sigmoid, GELU and tanh where onnxruntime's and XLA's inline
polynomials do not, so it is expanded inline as well, last, so that an exp another
expansion makes is expanded too. Upstream MLIR has such expansions only in a test pass;
`_tanh`, `_erf` and `_exp` say how each is computed here and how accurate it is.

    math.tanh %x -> select(c^2 >= 81, c * f32(1/9), c P(c^2) / Q(c^2)), c = clamp(x, -9, 9)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, IntegerType, ModuleOp, f32
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from graphfuse.dialects.loop.combine import NSZ
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.tuning.max_bounds import at_most_zero

_CONTRACT = arith.FastMathFlagsAttr((FastMathFlag.ALLOW_CONTRACT,))

_TANH_P = (  # highest power first, as `horner` takes them
    1.8254151409049482e-11,
    -1.2780096379723259e-08,
    9.267329349318972e-06,
    0.0029207533490863244,
    0.1291922111823908,
    0.9999999411955252,
)
_TANH_Q = (0.00022809893840448268, 0.023763135574898644, 0.4625250499787004, 1.0)
_TANH_SATURATED = 9.0
_EXP_P = (  # 2 exp(r) on |r| <= ln2/2, highest power first; exact f32 values
    0.01658061519265175,
    0.083795927464962,
    0.3333527445793152,
    0.9999829530715942,
    1.9999994039535522,
    2.0,
)
_EXP_LN2_HIGH = 0.693359375  # 9 significant bits: n * _EXP_LN2_HIGH is exact for |n| < 2^15
_EXP_LN2_LOW = -2.12194440e-4
_EXP_ROUNDER = 12582912.0  # 1.5 * 2^23
_EXP_CLAMP = 89.0  # above log(FLT_MAX) = 88.72, below 128.5 ln2: n = 128, the product overflows
# -126 ln2: x clamped up to it rounds to n = -126, whose scale bits (n + 126) << 23 are 0,
# so every x < -125.5 ln2 = -86.99 (n <= -126) gives exactly 0, and n >= -125 stays normal.
_EXP_LOWEST = -87.3365478515625
_ERF_P = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_Q = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def _mul(b: BlockBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
    return b.emit(arith.MulfOp(x, y, _CONTRACT))


def _horner(b: BlockBuilder, z: SSAValue, coefficients: Sequence[float]) -> SSAValue:
    """c0 z^k + ... + ck, each step a multiply-add LLVM may fuse into an FMA."""
    acc = b.constant(coefficients[0], f32)
    for c in coefficients[1:]:
        acc = b.emit(arith.AddfOp(_mul(b, acc, z), b.constant(c, f32), _CONTRACT))
    return acc


def _tanh(b: BlockBuilder, x: SSAValue) -> SSAValue:
    """x P(x^2) / Q(x^2) on x clamped to [-9, 9] (P of degree 5 in x^2, Q of degree 3, all of
    Q's coefficients positive, so no pole), +-1 beyond |x| >= 9, where tanh rounds to 1 in
    f32. The coefficients are graphfuse's own fit: least squares on relative error with
    Lawson reweighting toward minimax, on 8000 Chebyshev points of [0, 81] in x^2 (max
    relative error 3.3e-7 in f32 against float64). 16 multiply-adds and one divide, where
    `1 - 2 / (exp(2|x|) + 1)` with a small-|x| polynomial took about 45 ops."""
    limit = b.constant(_TANH_SATURATED, f32)
    # nsz: the clamp need not order -0 below +0 (x * P / Q keeps x's zero sign anyway).
    low = b.emit(arith.MaximumfOp(x, b.emit(arith.NegfOp(limit)), NSZ))
    clamped = b.emit(arith.MinimumfOp(low, limit, NSZ))
    z = _mul(b, clamped, clamped)
    ratio = b.emit(arith.DivfOp(_mul(b, clamped, _horner(b, z, _TANH_P)), _horner(b, z, _TANH_Q)))
    # Exactly +-1 where tanh rounds to it (|x| >= 9): there c = +-9, and c * f32(1/9) rounds
    # to +-1. Testing z = c^2 >= 81 and scaling c reuse values at hand: 3 vector ops where
    # abs, compare, copysign and select took 5. NaN compares false and keeps the ratio's NaN.
    saturated = b.emit(arith.CmpfOp(z, b.constant(_TANH_SATURATED**2, f32), "oge"))
    scaled = _mul(b, clamped, b.constant(1 / _TANH_SATURATED, f32))
    return b.emit(arith.SelectOp(saturated, scaled, ratio))


def _exp(b: BlockBuilder, x: SSAValue) -> SSAValue:
    """x clamped above to 89 (unless x <= 0 is known, as softmax's x - max(x) is: see
    max_bounds) and below to -126 ln2; Cody-Waite range reduction x = n ln2 + r (|r| <=
    ln2/2, ln2 split in two so n ln2 is exact); 2 exp(r) as a degree-5 polynomial by
    Horner's scheme (graphfuse's own Lawson-weighted minimax fit of relative error on
    |r| <= ln2/2, each f32 coefficient then nudged by an ulp where that lowered the error
    measured in f32), scaled by 2^(n-1) built in the exponent bits. So n = 128 stays a
    normal scale and exp(x > 88.72) overflows to inf in the product itself, while n = -126
    (every x < -86.99) makes the scale 0 and the result exactly 0, flushing the few results
    under 1.7e-38. Max relative error 1.62e-7 over the whole range (3M points against
    float64); 12 or 13 vector ops per 8 lanes, 9 of them multiplies or multiply-adds."""
    # Both clamps are `c < x ? c : x` forms, which keep NaN and are one vminps/vmaxps on x86.
    # Above to 89 (unless x <= 0 is known, as for softmax's x - max(x)); below to -126 ln2,
    # where the scale below is 0, so results under 1.2e-38 (and exp(-inf)) are exactly 0.
    if not at_most_zero(x):
        limit = b.constant(_EXP_CLAMP, f32)
        x = b.emit(arith.SelectOp(b.emit(arith.CmpfOp(limit, x, "olt")), limit, x))
    lowest = b.constant(_EXP_LOWEST, f32)
    x = b.emit(arith.SelectOp(b.emit(arith.CmpfOp(x, lowest, "olt")), lowest, x))
    # n = round(x / ln2) by the magic-number trick: adding 1.5 * 2^23 + 126 leaves n + 126 in
    # the low mantissa bits of t (as 0x4B400000 + n + 126; n + 126 is in [0, 254]), so
    # t << 23 is the exponent field of 2^(n-1) without a conversion or an integer add.
    rounder = b.constant(_EXP_ROUNDER + 126, f32)
    t = b.emit(arith.AddfOp(_mul(b, x, b.constant(1.4426950408889634, f32)), rounder, _CONTRACT))
    n = b.emit(arith.SubfOp(t, rounder))
    r = b.emit(arith.SubfOp(x, _mul(b, n, b.constant(_EXP_LN2_HIGH, f32)), _CONTRACT))
    r = b.emit(arith.SubfOp(r, _mul(b, n, b.constant(_EXP_LN2_LOW, f32)), _CONTRACT))
    # 2 exp(r): doubling the coefficients is exact and spares the final * 2.
    twice = _horner(b, r, _EXP_P)
    i32 = IntegerType(32)
    bits = b.emit(arith.ShLIOp(b.emit(arith.BitcastOp(t, i32)), b.constant(23, i32)))
    return _mul(b, twice, b.emit(arith.BitcastOp(bits, f32)))


def _erf(b: BlockBuilder, x: SSAValue) -> SSAValue:
    """The rational minimax approximation on [-4, 4] used by Eigen and XLA: x P(x^2) /
    Q(x^2), 7 and 5 coefficients; erf(+-4) = +-1 in f32; max error 4.2e-7."""
    low = b.emit(arith.MaximumfOp(x, b.constant(-4.0, f32)))
    clamped = b.emit(arith.MinimumfOp(low, b.constant(4.0, f32)))
    z = b.emit(arith.MulfOp(clamped, clamped))
    p = b.emit(arith.MulfOp(_horner(b, z, _ERF_P), clamped))
    q = _horner(b, z, _ERF_Q)
    return b.emit(arith.DivfOp(p, q))


_Expansions = dict[type[Operation], Callable[[BlockBuilder, SSAValue], SSAValue]]


class Approximate(RewritePattern):
    """An f32 math op of one of `expansions`' types -> its inline arith expansion."""

    def __init__(self, expansions: _Expansions):
        self.expansions = expansions

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        expand = self.expansions.get(type(op))
        if expand is None or op.operands[0].type != Float32Type():
            return
        built = BlockBuilder()
        result = expand(built, op.operands[0])
        rewriter.replace(op, built.take(), [result])


@dataclass(frozen=True)
class MathApproximatePass(ModulePass):
    """Rewrite f32 math.tanh, math.erf and math.exp into arith (inline, vectorisable)."""

    name = "math-approximate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # exp last: the other expansions could make exps of their own.
        stages: tuple[_Expansions, ...] = (
            {math.TanhOp: _tanh, math.ErfOp: _erf},
            {math.ExpOp: _exp},
        )
        for expansions in stages:
            walker = PatternRewriteWalker(Approximate(expansions), apply_recursively=False)
            walker.rewrite_module(op)
