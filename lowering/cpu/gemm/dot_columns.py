"""The columns of a tiled GEMM's last panel past its last full vector, as dot products.

A 7x7 layer at batch 1 has N = 49 output columns: three vectors of 16 and one column. A
register tile would compute that column as one more vector of 16 (MR x K multiply-adds for
one useful column in 16); here each such column (up to DOT_COLUMNS of them, tile_plan.py)
is a dot product along K instead: for each row of the tile, `lanes` products of A's row
(contiguous along K in Ap, or in A itself when the tiles read it in place) and of the
column (packed contiguous along K into one more panel of Bp, operand_packing.py) per
multiply-add, summed across the lanes at the end, then the K mod lanes products left one
by one. The epilogue then runs on each of those points (`dot_epilogue`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.contractions import Contraction
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder, Mapping
from graphfuse.lowering.cpu.gemm.operand_packing import OperandPacker, flat_panels
from graphfuse.lowering.cpu.gemm.tile_plan import TilePlan


@dataclass(frozen=True)
class DotTask:
    """What the dot products of one task read: its batch indices and operand slots."""

    batch: Mapping
    slot_a: SSAValue
    slot_b: SSAValue


def dot_products(
    em: GemmBuilder,
    plan: TilePlan,
    packer: OperandPacker,
    task: DotTask,
    row_values: Sequence[SSAValue],
    dots: int,
) -> list[list[SSAValue]]:
    """Per row of `row_values`, the sums of the last panel's `dots` dot columns."""
    if not dots:
        return [[] for _ in row_values]
    found, vec, lanes = plan.found, plan.vec, plan.lanes
    flat = em.emit(flat_panels(packer.packed_b))
    where = em.index(plan.dot_panel)

    def column_at(at: GemmBuilder, j: int, k: SSAValue) -> list[SSAValue]:
        """Dot column j's position at k in the flat dot panel, as its indices."""
        return [task.slot_b, where, at.emit(arith.AddiOp(at.index(j * found.k), k))]

    blocks = found.k // lanes
    count = len(row_values) * dots
    if blocks:
        zero = em.emit(vector.BroadcastOp(em.constant(0.0, f32), vec))
        for_op, step = em.loop(em.index(0), em.index(blocks), [zero] * count)
        k = step.emit(arith.MuliOp(step.block.args[0], step.index(lanes)))
        columns = [step.emit(vector.LoadOp(flat, column_at(step, j, k), vec)) for j in range(dots)]
        out: list[SSAValue] = []
        for r, row in enumerate(row_values):
            a = _a_at(step, plan, packer, task, row, k, vector_of=True)
            for j in range(dots):
                carried = step.block.args[1 + r * dots + j]
                out.append(step.emit(vector.FMAOp(a, columns[j], carried)))
        step.add(scf.YieldOp(*out))
        sums = [em.emit(_sum_lanes(v)) for v in for_op.results]
    else:
        sums = [em.constant(0.0, f32)] * count
    if found.k % lanes:
        for_op, step = em.loop(em.index(blocks * lanes), em.index(found.k), sums)
        k = step.block.args[0]
        columns = [step.emit(memref.LoadOp.get(flat, column_at(step, j, k))) for j in range(dots)]
        out = []
        for r, row in enumerate(row_values):
            a = _a_at(step, plan, packer, task, row, k, vector_of=False)
            for j in range(dots):
                product = step.emit(arith.MulfOp(a, columns[j]))
                out.append(step.emit(arith.AddfOp(step.block.args[1 + r * dots + j], product)))
        step.add(scf.YieldOp(*out))
        sums = list(for_op.results)
    sums = [em.emit(arith.AddfOp(found.reduce.init, s)) for s in sums]
    return [sums[r * dots : (r + 1) * dots] for r in range(len(row_values))]


def _a_at(
    em: GemmBuilder,
    plan: TilePlan,
    packer: OperandPacker,
    task: DotTask,
    row: SSAValue,
    k: SSAValue,
    vector_of: bool,
) -> SSAValue:
    """A at (row, k), or at (row, k..k + lanes) as a vector: A's rows run along K, in Ap
    and where the tiles read A in place."""
    found = plan.found
    if plan.a_in_place is None:
        assert packer.packed_a is not None
        at = [task.slot_a, row, k]
        if vector_of:
            return em.emit(vector.LoadOp(packer.packed_a, at, plan.vec))
        return em.emit(memref.LoadOp.get(packer.packed_a, at))
    if not vector_of:
        row_arg, k_arg = plan.a_in_place
        return em.evaluate(found.a, {**task.batch, row_arg: row, k_arg: k})
    load = found.a.direct_load()
    assert load is not None
    leading = [task.batch.get(i, i) for i in list(load.indices)[:-2]]
    return em.emit(vector.LoadOp(load.buffer, [*leading, row, k], plan.vec))


def _sum_lanes(value: SSAValue) -> Operation:
    """vector.reduction <add> of a vector<lanes x f32> into f32 (xDSL's constructor gives
    the vector's type as the result's)."""
    return vector.ReductionOp.create(
        operands=[value],
        result_types=[f32],
        properties={
            "kind": vector.CombiningKindAttr(vector.CombiningKindFlag.ADD),
            "fastmath": arith.FastMathFlagsAttr("none"),
        },
    )


def dot_epilogue(
    em: GemmBuilder,
    found: Contraction,
    batch: Mapping,
    row_values: Sequence[SSAValue],
    dot_sums: Sequence[Sequence[SSAValue]],
) -> None:
    """The nest's epilogue on the dot columns (the last ones below N) of each row."""
    rows_dims = [found.nest.shape[d] for d in found.rows]
    columns_dims = [found.nest.shape[d] for d in found.columns]
    for row, values in zip(row_values, dot_sums, strict=True):
        local_rows = dict(batch)
        local_rows.update(em.bind(found.args(found.rows), row, rows_dims))
        for j, value in enumerate(values):
            column = em.index(found.n - len(values) + j)
            local = dict(local_rows)
            local.update(em.bind(found.args(found.columns), column, columns_dims))
            local[found.reduce.result] = value
            for op in found.nest.body.block.ops:
                if op is not found.reduce and not isinstance(op, loop.YieldOp):
                    em.add(op.clone(value_mapper=local))
