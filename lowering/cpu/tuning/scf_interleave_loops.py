"""scf-interleave-loops: ask LLVM to interleave the vectorised loops of heavy scalar
bodies four ways (`llvm.loop.interleave.count` on the loop's back edge).

LLVM's loop vectoriser interleaves a loop (runs several vector iterations side by side)
only while its body is small. A body with an exp, sigmoid, tanh, erf or GELU expansion
(math-approximate) is 25-65 vector ops on a long dependency chain; one iteration at a time,
the out-of-order window fills with that chain before the next iteration's independent ops
are seen, and four interleaved iterations give each dispatch group independent work. The
annotation (loop_annotations.LoopAnnotation) goes on innermost `scf.for` loops with scalar
bodies (the loops LLVM vectorises, not the matmul tiles' explicit vector loops) of at
least MIN_OPS computing ops, running at least 2 * count * lanes iterations when their
bounds are constants. Loops that carry values (softmax's exp-and-sum) get a count of 1
instead: interleaving multiplies the accumulators, and beside a heavy body's constants
AVX2's 16 vector registers no longer hold them, so LLVM spilled them.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from graphfuse.lowering.cpu.lanes import DEFAULT_LANES, check_lanes
from graphfuse.lowering.cpu.tuning.loop_annotations import LoopAnnotation, trip_count, vector_valued
from graphfuse.parsing import check_at_least

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
class ScfInterleaveLoopsPass(ModulePass):
    """Interleave-count annotations on the innermost scalar loops with heavy bodies."""

    name = "scf-interleave-loops"

    count: int = 4
    reduction_count: int = 1
    lanes: int = DEFAULT_LANES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_at_least(self.name, "count", self.count, 1)
        check_at_least(self.name, "reduction_count", self.reduction_count, 1)
        check_lanes(self.name, self.lanes)
        annotation = LoopAnnotation(interleave=self.count)
        reduction = LoopAnnotation(interleave=self.reduction_count)
        for loop in op.walk():
            if not isinstance(loop, scf.ForOp) or not _heavy_scalar_body(loop):
                continue
            trips = trip_count(loop)
            if trips is not None and trips < 2 * self.count * self.lanes:
                continue
            loop.attributes["loop_annotation"] = reduction if loop.iter_args else annotation
