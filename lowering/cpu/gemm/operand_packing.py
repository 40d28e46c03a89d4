"""Packing a tiled GEMM's operands into the layout its tiles read (Goto's algorithm).

`Ap[slot][m][k]` holds A row by row; `Bp[slot][p][k][c]` holds B in panels of NR columns,
zero past the last column, so a tile reads B as two aligned vector loads per k. Each
element is B or A evaluated at (m, k) or (k, n) by cloning the original load and its
index arithmetic, so a convolution's im2col is this packing, done once. B's full panels
are copied by vector loads along its rows (row_panels.py) or by 8x8 transposes of a
channels-last input (transposed_pack.py) where the plan says they can be.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, f32, i64
from xdsl.ir import Attribute, Operation, Region, SSAValue

from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder, Mapping
from graphfuse.lowering.cpu.gemm.panel_loops import PanelLoops, Span
from graphfuse.lowering.cpu.gemm.row_panels import RowRun, collapsed_source
from graphfuse.lowering.cpu.gemm.tile_plan import TilePlan
from graphfuse.lowering.cpu.gemm.transposed_pack import (
    BLOCK,
    TransposedRun,
    block_start,
    transposed_block,
)

PACK_ROWS_PER_TASK = 64


class OperandPacker(PanelLoops):
    """Emits the packing of A into `packed_a` and of B into `packed_b` as `plan` says."""

    def __init__(self, plan: TilePlan, packed_a: SSAValue | None, packed_b: SSAValue):
        super().__init__(plan)
        self.packed_a = packed_a
        self.packed_b = packed_b

    def batch(self, em: GemmBuilder, point: SSAValue) -> Mapping:
        """The batch indices of batch point `point`."""
        return em.bind(self.plan.batch_args, point, self.plan.batch_shape)

    def pack_all_a(self, em: GemmBuilder) -> None:
        """All of Ap, in tasks of PACK_ROWS_PER_TASK rows of one slot."""
        row_groups = -(-self.found.m // PACK_ROWS_PER_TASK)
        count = self.plan.slot_counts[0] * row_groups
        em.parallel(count, self.plan.threads, lambda task, i: self._pack_a(task, i, row_groups))

    def pack_all_b(self, em: GemmBuilder) -> None:
        """All of Bp, in tasks of `pack_panels` panels of one slot."""
        count = self.plan.slot_counts[1] * -(-self.plan.panels // self.plan.pack_panels)
        em.parallel(count, self.plan.threads, self._pack_b)

    def _pack_a(self, em: GemmBuilder, task: SSAValue, row_groups: int) -> None:
        """Ap[slot][m][k] = A at (batch slot, row m, reduction index k)."""
        found = self.found
        slot, group = em.divide(task, row_groups)
        first, last = em.chunk(group, PACK_ROWS_PER_TASK, found.m)
        batch = self.batch(em, slot) if self.plan.a_batched else {}
        _, row = em.loop(first, last)
        m = row.block.args[0]
        mapping = dict(batch)
        mapping.update(row.bind(found.args(found.rows), m, self.plan.dims(found.rows)))
        inner, reduction, k = self._over_reduction(row)
        mapping.update(reduction)
        value = inner.evaluate(found.a, mapping)
        assert self.packed_a is not None
        inner.add(memref.StoreOp.get(value, self.packed_a, [slot, m, k]))
        inner.end_loops(em)

    def _pack_b(self, em: GemmBuilder, task: SSAValue) -> None:
        """Bp[slot][p][k][c] = B at (batch slot, column NR p + c, k), for the panels of
        group `task`."""
        groups = -(-self.plan.panels // self.plan.pack_panels)
        slot, group = em.divide(task, groups)
        first, last_panel = em.chunk(group, self.plan.pack_panels, self.plan.panels)
        mapping = self.batch(em, slot) if self.plan.b_batched else {}
        self.pack_b_panels(em, slot, (first, last_panel), mapping)

    def pack_b_panels(
        self,
        em: GemmBuilder,
        slot: SSAValue,
        span: Span,
        batch: Mapping,
        local: bool = False,
    ) -> None:
        """Bp for the panels span[0]..span[1] of batch slot `slot`, whose batch indices
        `batch` gives (empty for a B shared by every batch point). Full panels as the plan
        says; the rest point by point: zero past column N (evaluated at column N - 1
        there, so every load stays in bounds), the loops running k, panel, lane when B is
        contiguous along its columns (reading rows of B in runs of PACK_PANELS x NR), else
        panel, lane, k. `local`: the panels go to Bp[slot][p - span[0]] (a task's own
        slot), not Bp[slot][p]."""
        self._first_stored = span[0] if local else None
        nr, n = self.plan.nr, self.found.n
        first: SSAValue | None = span[0]
        if self.plan.b_rows is not None or self.plan.b_transposed is not None:
            first = self._pack_full_panels(em, slot, span, batch)
        elif n % nr:
            full = em.index(n // nr)
            self._pack_b_points(em, slot, (span[0], em.emit(arith.MinUIOp(span[1], full))), batch)
            first = em.emit(arith.MaxUIOp(span[0], full))
        if first is not None and n % nr:
            self._pack_last_panel(em, slot, (first, span[1]), batch)
        elif first is not None:
            self._pack_b_points(em, slot, (first, span[1]), batch)
        self._first_stored = None
        if self.plan.dot_columns:
            ends = em.emit(arith.CmpiOp(span[1], em.index(self.plan.panels), "eq"))
            then = GemmBuilder()
            self._pack_dot_columns(then, slot, dict(batch))
            then.add(scf.YieldOp())
            em.add(scf.IfOp(ends, [], Region(then.block)))

    def _pack_dot_columns(self, em: GemmBuilder, slot: SSAValue, mapping: Mapping) -> None:
        """B's last `dot_columns` columns, each along K, into Bp's `dot_panel` (viewed as
        one run of K x NR floats): column N - dots + j at j * K + k."""
        found, plan = self.found, self.plan
        dots = plan.dot_columns
        flat = em.emit(flat_panels(self.packed_b))
        _, column = em.loop(em.index(0), em.index(dots))
        j = column.block.args[0]
        absolute = column.emit(arith.AddiOp(j, column.index(found.n - dots)))
        mapping.update(column.bind(found.args(found.columns), absolute, plan.dims(found.columns)))
        inner, reduction, k = self._over_reduction(column)
        mapping.update(reduction)
        value = inner.evaluate(found.b, mapping)
        at = inner.emit(arith.AddiOp(inner.emit(arith.MuliOp(j, inner.index(found.k))), k))
        inner.add(memref.StoreOp.get(value, flat, [slot, inner.index(plan.dot_panel), at]))
        inner.end_loops(em)

    def _pack_full_panels(
        self, em: GemmBuilder, slot: SSAValue, span: Span, mapping: Mapping
    ) -> SSAValue | None:
        """The full panels of `span` by vector copies; returns the first panel left for
        `_pack_b_points` (the last panel, if in this span), None when there is none."""
        found, nr = self.found, self.plan.nr
        first, last_panel = span
        full = em.index(found.n // nr)
        end = em.emit(arith.MinUIOp(last_panel, full))
        if self.plan.b_rows is not None:
            self._pack_b_rows(em, slot, (first, end), mapping, self.plan.b_rows)
        elif self.plan.b_transposed is not None:
            self._pack_b_transposed(em, slot, (first, end), mapping, self.plan.b_transposed)
        if found.n % nr == 0:
            return None
        return em.emit(arith.MaxUIOp(first, full))

    def _pack_last_panel(self, em: GemmBuilder, slot: SSAValue, span: Span, batch: Mapping) -> None:
        """The last panel (past N; `span` holds it or nothing): only the columns its tiles
        read (`last_panel_vectors` vectors; the dot columns have their own panel), its
        full vectors of real columns by vector loads and full blocks of 8 by transposes
        where the full panels take them, the rest point by point. (A 7x7 layer's N = 49
        is a panel of 32 and one of 17: its tiles read 16 columns and one dot column.)"""
        plan = self.plan
        width = plan.last_panel_vectors * plan.lanes
        real = plan.last_columns - plan.dot_columns
        lane = 0
        if plan.b_rows is not None and real >= plan.lanes and width:
            vectors = real // plan.lanes
            self._pack_b_rows(em, slot, span, dict(batch), plan.b_rows, vectors)
            lane = vectors * plan.lanes
        elif plan.b_transposed is not None and real >= BLOCK and width:
            blocks = real // BLOCK
            self._pack_b_transposed(em, slot, span, dict(batch), plan.b_transposed, blocks)
            lane = blocks * BLOCK
        if lane < width:
            self._pack_b_points(em, slot, span, batch, (lane, width))

    def _pack_b_points(
        self,
        em: GemmBuilder,
        slot: SSAValue,
        span: Span,
        batch: Mapping,
        lanes: tuple[int, int] | None = None,
    ) -> None:
        """`pack_b_panels` element by element, for the panels of `span` and their lanes
        `lanes` (all of them by default)."""
        found, nr = self.found, self.plan.nr
        mapping = dict(batch)
        first_lane, end_lane = lanes if lanes is not None else (0, nr)
        k: SSAValue | None = None
        outer: GemmBuilder = em
        reduction: Mapping = {}
        if self.plan.b_columns_fastest:
            outer, reduction, k = self._over_reduction(em)
        _, panels = outer.loop(*span)
        _, lane = panels.loop(panels.index(first_lane), panels.index(end_lane))
        p, c = panels.block.args[0], lane.block.args[0]
        column = lane.emit(arith.AddiOp(lane.emit(arith.MuliOp(p, lane.index(nr))), c))
        clamped = column
        if found.n % nr:
            clamped = lane.emit(arith.MinUIOp(column, lane.index(found.n - 1)))
        mapping.update(lane.bind(found.args(found.columns), clamped, self.plan.dims(found.columns)))
        last = lane
        if k is None:
            last, reduction, k = self._over_reduction(lane)
        mapping.update(reduction)
        value = last.evaluate(found.b, mapping)
        if found.n % nr:
            inside = last.emit(arith.CmpiOp(column, last.index(found.n), "ult"))
            zero = last.constant(0.0, f32)
            value = last.emit(arith.SelectOp(inside, value, zero))
        stored = self._stored_panel(last, p)
        last.add(memref.StoreOp.get(value, self.packed_b, [slot, stored, k, c]))
        last.end_loops(em)

    def _pack_b_rows(
        self, em: GemmBuilder, slot: SSAValue, panels: Span, batch: Mapping, run: RowRun, n: int = 0
    ) -> None:
        """Full panels of a B read along contiguous rows (`row_panels`), or their first
        `n` vectors of columns: per reduction index, panel and `lanes` columns, one vector
        load of B's collapsed rows and one store."""
        found = self.found
        collapse, length = collapsed_source(run)
        source = em.emit(collapse)
        inner, reduction, k = self._over_reduction(em)
        part, p, lane0, column0 = self._panel_parts(inner, panels, self.plan.lanes, n or None)
        at = {**batch, **reduction}
        outer = found.args(found.columns)[: -run.dims]
        position = column0
        if outer:
            runs, position = part.divide(column0, length)
            at.update(part.bind(outer, runs, self.plan.dims(found.columns)[: -run.dims]))
        local = part.clone_chain(found.b, at, skip=run.load)
        indices = [local.get(i, i) for i in run.leading_indices]
        value = part.emit(vector.LoadOp(source, [*indices, position], self.plan.vec))
        stored = self._stored_panel(part, p)
        part.add(vector.StoreOp(value, self.packed_b, [slot, stored, k, lane0]))
        part.end_loops(em)

    def _pack_b_transposed(
        self,
        em: GemmBuilder,
        slot: SSAValue,
        panels: Span,
        mapping: Mapping,
        run: TransposedRun,
        blocks: int | None = None,
    ) -> None:
        """Full panels of a channels-last B (`transposed_pack`): per panel, half panel of 8
        columns, outer reduction index and block of 8 of the run's floats, 8 vector loads,
        one 8x8 transpose, 8 vector stores of panel rows."""
        found, load = self.found, run.load
        source = load.buffer
        if run.dims == 2:
            source = em.emit(collapsed_source(RowRun(load, 2))[0])
        half, p, lane0, base = self._panel_parts(em, panels, BLOCK, blocks)
        args = found.reduce.body.block.args
        outer = len(args) - run.dims
        inner, reduction, linear = self._over_reduction(half, outer)
        _, block = inner.loop(inner.index(0), inner.index(run.blocks))
        start = block_start(block, block.block.args[0], run.length)
        for arg in args[outer:]:
            reduction[arg] = start if run.dims == 1 else block.index(0)
        first_k = block.emit(
            arith.AddiOp(block.emit(arith.MuliOp(linear, block.index(run.length))), start)
        )

        def row(offset: int) -> list[SSAValue]:
            column = block.emit(arith.AddiOp(base, block.index(offset)))
            at = {**mapping, **reduction}
            at.update(block.bind(found.args(found.columns), column, self.plan.dims(found.columns)))
            local = block.clone_chain(found.b, at, skip=load)
            indices = [local.get(i, i) for i in load.indices]
            if run.dims == 2:
                channels = block.index(found.reduce.shape[-1])
                x = block.emit(arith.MuliOp(indices[-2], channels))
                indices = [*indices[:-2], block.emit(arith.AddiOp(x, start))]
            return indices

        stored = self._stored_panel(block, p)

        def panel_row(q: int) -> list[SSAValue]:
            return [slot, stored, block.emit(arith.AddiOp(first_k, block.index(q))), lane0]

        transposed_block(block, source, row, self.packed_b, panel_row)
        block.end_loops(em)


def flat_panels(packed_b: SSAValue) -> Operation:
    """Bp[slots][panels][K][NR] viewed as [slots][panels][K * NR]."""
    typ = cast(MemRefType[Attribute], packed_b.type)
    slots, panels, k, nr = typ.get_shape()
    groups = [[0], [1], [2, 3]]
    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])
    return memref.CollapseShapeOp.create(
        operands=[packed_b],
        result_types=[MemRefType(f32, [slots, panels, k * nr])],
        properties={"reassociation": reassociation},
    )
