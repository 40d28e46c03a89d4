"""How a `loop.reduce` of each kind combines an element into its accumulator.

Part of the loop dialect's semantics, shared by every conversion that lowers `loop.reduce`
(the upstream CPU loops and the GPU row reductions) so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects.loop.emitter import is_float
from graphfuse.dialects.loop.ops import ReduceKind

_REASSOC = (FastMathFlag.REASSOC, FastMathFlag.ALLOW_CONTRACT)
NSZ = arith.FastMathFlagsAttr((FastMathFlag.NO_SIGNED_ZEROS,))
"""Float max/min (reductions, ReLU, Clip) still propagate NaN but need not order -0 below +0
(nor does NumPy's np.max): on AVX2 that is max + one blend per vector, not five ops."""

_COMBINE: dict[tuple[ReduceKind, bool], Callable[[SSAValue, SSAValue], Operation]] = {
    (ReduceKind.ADD, True): lambda a, b: arith.AddfOp(a, b, arith.FastMathFlagsAttr(_REASSOC)),
    (ReduceKind.ADD, False): arith.AddiOp,
    (ReduceKind.MUL, True): lambda a, b: arith.MulfOp(a, b, arith.FastMathFlagsAttr(_REASSOC)),
    (ReduceKind.MUL, False): arith.MuliOp,
    (ReduceKind.MAX, True): lambda a, b: arith.MaximumfOp(a, b, NSZ),
    (ReduceKind.MAX, False): arith.MaxSIOp,
    (ReduceKind.MIN, True): lambda a, b: arith.MinimumfOp(a, b, NSZ),
    (ReduceKind.MIN, False): arith.MinSIOp,
    (ReduceKind.UMAX, False): arith.MaxUIOp,
    (ReduceKind.UMIN, False): arith.MinUIOp,
}


def combine(kind: ReduceKind, accumulator: SSAValue, element: SSAValue) -> Operation:
    """The op combining `element` into `accumulator` as a `loop.reduce` of `kind` does."""
    return _COMBINE[(kind, is_float(element.type))](accumulator, element)
