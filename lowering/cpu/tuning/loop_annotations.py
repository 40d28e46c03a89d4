"""Upstream MLIR's `#llvm.loop_annotation`, as far as graphfuse's loop hints use it.

xDSL's `llvm` dialect has no loop annotations, so this attribute exists to be printed for
mlir-opt (as `scf_prefetch_rows.py` defines `memref.prefetch`): `convert-scf-to-cf` carries an
`scf.for`'s `loop_annotation` to the loop's back-edge branch and `mlir-translate` turns it
into `!llvm.loop` metadata for LLVM's loop vectoriser and unroller. Each part is printed
only when set: an interleave count (scf_interleave_loops), a vectorisation width with the
remainder folded into masked iterations (scf_predicate_short_loops), and no unrolling.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntAttr, VectorType
from xdsl.ir import Operation, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.printer import Printer
from xdsl.transforms.canonicalization_patterns.utils import const_evaluate_operand


@irdl_attr_definition
class LoopAnnotation(ParametrizedAttribute):
    """`interleave` > 0: llvm.loop.interleave.count; `width` > 0: vectorise at that width
    with the tail predicated (llvm.loop.vectorize.predicate.enable); `no_unroll` != 0:
    llvm.loop.unroll.disable."""

    name = "llvm.loop_annotation"

    interleave: IntAttr
    width: IntAttr
    no_unroll: IntAttr

    def __init__(self, interleave: int = 0, width: int = 0, no_unroll: bool = False):
        super().__init__(IntAttr(interleave), IntAttr(width), IntAttr(int(no_unroll)))

    def print_parameters(self, printer: Printer) -> None:
        parts: list[str] = []
        if self.width.data:
            parts.append(
                "vectorize = #llvm.loop_vectorize<disable = false, predicateEnable = true, "
                f"width = {self.width.data} : i32>"
            )
        if self.interleave.data:
            parts.append(
                f"interleave = #llvm.loop_interleave<count = {self.interleave.data} : i32>"
            )
        if self.no_unroll.data:
            parts.append("unroll = #llvm.loop_unroll<disable = true>")
        printer.print_string(f"<{', '.join(parts)}>")


def trip_count(loop: scf.ForOp) -> int | None:
    """The loop's iteration count when its bounds and step are constants."""
    low, high, step = (const_evaluate_operand(v) for v in (loop.lb, loop.ub, loop.step))
    if low is None or high is None or step is None or step <= 0:
        return None
    return max(0, -(-(high - low) // step))


def vector_valued(op: Operation) -> bool:
    """`op` reads or makes a vector: its loop is not one LLVM's loop vectoriser works on
    (the matmul tiles' loops over explicit vectors), so loop hints leave it alone."""
    return any(isinstance(v.type, VectorType) for v in (*op.operands, *op.results))
