"""scf-interleave-loops: ask LLVM to interleave the vectorised loops of heavy scalar
bodies four ways (`llvm.loop.interleave.count` on the loop's back edge).

LLVM's loop vectoriser interleaves a loop (runs several vector iterations side by side)
only while its body is small; a body past its small-loop cost gets one vector iteration
at a time. An elementwise or row body with an exp, sigmoid, tanh, erf or GELU expansion
(approximate_math) is 25-65 vector ops with a dependency chain of 40-60 cycles, and run
one iteration at a time the out-of-order window fills with that chain's waiting ops
before the next iteration's independent ones are seen. Four interleaved iterations
write the four chains' ops side by side, so each dispatch group has independent work.
Side by side on the project's 2-core AVX2 machine (4096x1024, 2 threads, best of 300 calls):
the elementwise-chain workload 2.40 -> 1.91 ms, sigmoid 1.31 -> 0.96, GELU (tanh) 1.75
-> 1.34, GELU (erf) 1.37 -> 0.95, exp 0.92 -> 0.76; a light body (x * a + b, which LLVM
already interleaves) was unchanged. Counts of 2 and 8 measured: 2 gave about half the
gain, 8 none over 4.

The annotation goes on innermost `scf.for` loops whose bodies are scalar (the loops LLVM
vectorises: the matmul tiles' loops over explicit vectors are left alone), hold at least
MIN_OPS ops that compute (constants, loads, stores, yields and index arithmetic do not
count) and run at least 2 * count * lanes iterations when their bounds are constants, so
the interleaved vector loop runs more than once. Such loops that carry values (a row's
sum or maximum, as softmax's exp-and-sum loop) get a count of 1 instead: interleaving
multiplies the accumulators, and with a heavy body's constants (twelve for exp) AVX2's
16 vector registers no longer hold them, so LLVM spilled the accumulators and every
iteration's reduction went through a store and a reload. Softmax (1024x1024, one thread,
side by side) took 0.493 ms with count 4, 0.456 with LLVM's own choice, 0.438 with 1.
The annotation is loop_annotations.LoopAnnotation.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from graphfuse.lowering.cpu.tuning.loop_annotations import LoopAnnotation, trip_count, vector_valued

MIN_OPS = 20
"""LLVM's own cut (its small-loop cost) is 20; tanh's body, 26 ops, is the smallest heavy
one, and LLVM still interleaves it twice by itself."""

_NOT_COUNTED = (arith.ConstantOp, memref.LoadOp, memref.StoreOp, scf.YieldOp)


def _computes(op: Operation) -> bool:
    if isinstance(op, _NOT_COUNTED):
        return False
    return any(not isinstance(r.type, IndexType) for r in op.results)


def _heavy_scalar_body(loop: scf.ForOp) -> bool:
    """Innermost, scalar throughout, and at least MIN_OPS computing ops."""
    counted = 0
    for op in loop.body.walk():
        if isinstance(op, scf.ForOp | scf.ParallelOp) or vector_valued(op):
            return False
        counted += _computes(op)
    return counted >= MIN_OPS


@dataclass(frozen=True)
class InterleaveLoopsPass(ModulePass):
    """Interleave-count annotations on the innermost scalar loops with heavy bodies."""

    name = "scf-interleave-loops"

    count: int = 4
    reduction_count: int = 1
    lanes: int = 8

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotation = LoopAnnotation(interleave=self.count)
        reduction = LoopAnnotation(interleave=self.reduction_count)
        for loop in op.walk():
            if not isinstance(loop, scf.ForOp) or not _heavy_scalar_body(loop):
                continue
            trips = trip_count(loop)
            if trips is not None and trips < 2 * self.count * self.lanes:
                continue
            loop.attributes["loop_annotation"] = reduction if loop.iter_args else annotation
