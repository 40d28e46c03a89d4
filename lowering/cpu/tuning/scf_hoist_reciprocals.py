"""scf-hoist-reciprocals: x / d inside a loop that d does not vary in becomes
x * (1 / d), with 1 / d computed once before that loop.

A row kernel divides every element of a row by a per-row scalar: softmax by the row's sum
of exps, layer-norm by its standard deviation. A vector divide costs about ten times a
multiply on x86 (vdivps against vmulps throughput), and LLVM keeps the divide unless told
it may use reciprocals. The reciprocal form differs from the quotient by at most one
rounding (1.5 ulp in all), and it keeps what IEEE division gives at the edges: x / 0 is
x * inf (inf, or NaN for x = 0, as 0 / 0), x / inf is x * 0. onnxruntime's and
PyTorch's CPU softmax do the same.

Only f32 and f64 scalars are rewritten. The reciprocal goes right before the outermost loop
around the divide that still does not contain d's definition, so it is computed as rarely
as possible, and divides of one d in one loop share it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

_LOOPS = (scf.ForOp, scf.ParallelOp)


def _hoist_point(divide: arith.DivfOp) -> Operation | None:
    """The outermost enclosing loop that does not define the divisor, if any."""
    found: Operation | None = None
    op = divide.parent_op()
    while op is not None and not isinstance(op, ModuleOp):
        if isinstance(op, _LOOPS):
            if inside(divide.rhs, op):
                break
            found = op
        op = op.parent_op()
    return found


@dataclass(frozen=True)
class ScfHoistReciprocalsPass(ModulePass):
    """Divides by a loop-invariant float become multiplies by its hoisted reciprocal."""

    name = "scf-hoist-reciprocals"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reciprocals: dict[tuple[Operation, SSAValue], SSAValue] = {}
        divides = [d for d in op.walk() if isinstance(d, arith.DivfOp)]
        for divide in divides:
            if not isinstance(divide.rhs.type, Float32Type | Float64Type):
                continue
            loop = _hoist_point(divide)
            if loop is None:
                continue
            key = (loop, divide.rhs)
            if key not in reciprocals:
                one = arith.ConstantOp(FloatAttr(1.0, divide.rhs.type))
                inverse = arith.DivfOp(one, divide.rhs)
                Rewriter.insert_op([one, inverse], InsertPoint.before(loop))
                reciprocals[key] = inverse.result
            product = arith.MulfOp(divide.lhs, reciprocals[key], divide.fastmath)
            Rewriter.replace_op(divide, product)
