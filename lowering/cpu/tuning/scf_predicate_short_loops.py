"""scf-predicate-short-loops: vectorise short contiguous loops with masked tails.

A depthwise convolution vectorises along the output's columns (operand_layouts). On a
MobileNet's last stages a row is 14 or 7 columns, and LLVM's loop vectoriser, which runs
whole vectors and leaves the rest to a scalar loop, kept such rows scalar (a 7-iteration
loop is even fully unrolled before the vectoriser sees it). Asking for `lanes`-wide vectors
with the tail folded into masked iterations (`llvm.loop.vectorize.predicate.enable`;
AVX2's vmaskmovps), and no unrolling of loops of at most `lanes` iterations, runs a row of
14 as two vectors and a row of 7 as one. Annotated (loop_annotations.LoopAnnotation):
`scf.for` loops not already annotated, with a constant trip count T, lanes / 2 < T <
4 * lanes and T not a multiple of lanes, scalar throughout, storing along the loop's index
(a padded copy's rows store at the index plus the padding), and whose every load and store
has the loop's index, if anywhere, only in its last index, as the index plus terms that do
not depend on it (unit stride: masked strided loads were slower).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from graphfuse.lowering.cpu.lanes import DEFAULT_LANES, check_lanes
from graphfuse.lowering.cpu.tuning.loop_annotations import LoopAnnotation, trip_count, vector_valued


def _depends(value: SSAValue, index: SSAValue, seen: dict[SSAValue, bool]) -> bool:
    """`value` is computed from `index` (within the loop, through any ops).

    Producers are visited with an explicit stack, each value's answer after its
    operands': a kernel's scalar body can be thousands of ops deep."""
    stack = [(value, False)]
    while stack:
        top, operands_done = stack.pop()
        op = top.owner
        if operands_done:
            assert isinstance(op, Operation)
            seen[top] = any(v == index or seen[v] for v in op.operands)
        elif top != index and top not in seen:
            seen[top] = False
            if isinstance(op, Operation):
                stack.append((top, True))
                stack.extend((v, False) for v in op.operands)
    return value == index or seen[value]


def _unit_stride(value: SSAValue, index: SSAValue, seen: dict[SSAValue, bool]) -> bool:
    """`value` is `index` plus terms that do not depend on it."""
    while value != index:
        op = value.owner
        if not isinstance(op, arith.AddiOp):
            return False
        lhs, rhs = op.lhs, op.rhs
        if not _depends(lhs, index, seen):
            value = rhs
        elif _depends(rhs, index, seen):
            return False
        else:
            value = lhs
    return True


def _contiguous_scalar_body(loop: scf.ForOp) -> bool:
    """Scalar, every access unit-stride in its last index only, and a store along the index
    (at it or shifted: a padded copy's interior rows)."""
    index = loop.body.block.args[0]
    seen: dict[SSAValue, bool] = {}
    stores_at_index = False
    for op in loop.body.walk():
        if isinstance(op, scf.ParallelOp) or vector_valued(op):
            return False
        if not isinstance(op, memref.LoadOp | memref.StoreOp) or not op.indices:
            continue
        *outer, last = op.indices
        if any(_depends(v, index, seen) for v in outer):
            return False
        if _depends(last, index, seen) and not _unit_stride(last, index, seen):
            return False
        stores_at_index |= isinstance(op, memref.StoreOp) and _depends(last, index, seen)
    return stores_at_index


@dataclass(frozen=True)
class ScfPredicateShortLoopsPass(ModulePass):
    """Masked-tail vectorisation hints on short unit-stride loops."""

    name = "scf-predicate-short-loops"

    lanes: int = DEFAULT_LANES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_lanes(self.name, self.lanes)
        for loop in op.walk():
            if not isinstance(loop, scf.ForOp) or "loop_annotation" in loop.attributes:
                continue
            trips = trip_count(loop)
            if trips is None or trips % self.lanes == 0:
                continue
            if not self.lanes // 2 < trips < 4 * self.lanes:
                continue
            if not _contiguous_scalar_body(loop):
                continue
            loop.attributes["loop_annotation"] = LoopAnnotation(
                width=self.lanes, no_unroll=trips <= self.lanes
            )
