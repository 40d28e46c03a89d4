"""A finished tile's fused epilogue: the nest's body after the reduction (bias,
activation, residual add, the store) on the tile's points, `lanes` columns at a time
straight from the accumulators where tile_epilogue.py allows, point by point from the
tile's stack buffer elsewhere (columns past a multiple of `lanes` in a last panel, or
every column when the epilogue cannot be vectorised), and the dot columns point by
point (dot_columns.py). Split from tile_kernels.py, which computes the sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.ir import SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.dot_columns import dot_epilogue
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder, Mapping
from graphfuse.lowering.cpu.gemm.tile_epilogue import emit_vector_epilogue, vector_epilogue_run
from graphfuse.lowering.cpu.gemm.tile_plan import TilePlan


@dataclass(frozen=True)
class Task:
    """What every tile of one task shares."""

    batch: Mapping
    """The nest's batch indices at the task's batch point."""
    slot_a: SSAValue
    slot_b: SSAValue
    """Bp's slot the tiles read: the batch point's, or the task's own."""
    tile: SSAValue | None
    """The stack buffer (TilePlan.tile_rows x NR) a finished tile's sums go to for the
    scalar epilogue."""


@dataclass(frozen=True)
class Shape:
    """A tile's columns: `vectors` vector registers wide, plus `dots` columns by dot
    products; `last`: whether its panel is the last one (None: either, decided at run
    time)."""

    vectors: int
    dots: int
    last: bool | None


class TileFinisher:
    """Emits the epilogue of the plan's finished tiles (`epilogue`)."""

    def __init__(self, plan: TilePlan):
        self.plan = plan
        self.found = plan.found
        self.run = vector_epilogue_run(plan.found, plan.lanes)
        self.scalar = self.run is None or plan.found.n % plan.lanes != 0
        """Some columns take the scalar epilogue (from the tile buffer)."""

    def epilogue(
        self,
        em: GemmBuilder,
        task: Task,
        row_values: Sequence[SSAValue],
        panel: SSAValue,
        sums: Sequence[SSAValue],
        shape: Shape,
        dot_sums: Sequence[Sequence[SSAValue]],
    ) -> None:
        """The nest's epilogue on the tile's points: `lanes` columns at a time from the
        accumulators `sums` where tile_epilogue.py allows (columns past N, in the last
        panel, point by point), else point by point from the tile buffer; the dot
        columns point by point from `dot_sums`."""
        nr, lanes = self.plan.nr, self.plan.lanes
        column0 = em.emit(arith.MuliOp(panel, em.index(nr)))
        last = self.plan.last_columns
        if shape.last:
            # The last panel's tile: its vectors, the columns past them, its dot columns.
            vector_columns = last - shape.dots
            groups = vector_columns // lanes if self.run is not None else 0
            if groups:
                self._vector_epilogue(em, task, row_values, column0, sums, groups)
            if vector_columns > groups * lanes:
                self._scalar_epilogue(em, task, row_values, column0, groups * lanes)
            dot_epilogue(em, self.found, task.batch, row_values, dot_sums)
            return
        if self.run is None:
            self._scalar_epilogue(em, task, row_values, column0, 0)
            return
        if last == nr or shape.last is False:
            self._vector_epilogue(em, task, row_values, column0, sums, nr // lanes)
            return
        is_last = em.emit(arith.CmpiOp(panel, em.index(self.plan.panels - 1), "eq"))

        def tail(inner: GemmBuilder) -> None:
            self._vector_epilogue(inner, task, row_values, column0, sums, last // lanes)
            if last % lanes:
                self._scalar_epilogue(inner, task, row_values, column0, last // lanes * lanes)

        em.branch(
            is_last,
            tail,
            lambda inner: self._vector_epilogue(
                inner, task, row_values, column0, sums, nr // lanes
            ),
        )

    def _scalar_epilogue(
        self,
        em: GemmBuilder,
        task: Task,
        row_values: Sequence[SSAValue],
        column0: SSAValue,
        start: int,
    ) -> None:
        """The epilogue point by point on the tile's columns from `start` on (and below N,
        and below the dot columns), reading the sums from the tile buffer."""
        found, nr = self.found, self.plan.nr
        columns = em.index(nr)
        if self.plan.dot_columns:
            columns = em.index(found.n - self.plan.dot_columns)
            left = em.emit(arith.SubiOp(columns, column0))
            columns = em.emit(arith.MinUIOp(left, em.index(nr)))
        elif found.n % nr:
            left = em.emit(arith.SubiOp(em.index(found.n), column0))
            columns = em.emit(arith.MinUIOp(left, columns))
        rows_dims, columns_dims = self.plan.dims(found.rows), self.plan.dims(found.columns)
        for r, row in enumerate(row_values):
            local_rows = dict(task.batch)
            local_rows.update(em.bind(found.args(found.rows), row, rows_dims))
            _, point = em.loop(em.index(start), columns)
            c = point.block.args[0]
            local = dict(local_rows)
            column = point.emit(arith.AddiOp(column0, c))
            local.update(point.bind(found.args(found.columns), column, columns_dims))
            assert task.tile is not None
            local[found.reduce.result] = point.emit(
                memref.LoadOp.get(task.tile, [point.index(r), c])
            )
            for op in found.nest.body.block.ops:
                if op is not found.reduce and not isinstance(op, loop.YieldOp):
                    point.add(op.clone(value_mapper=local))
            point.add(scf.YieldOp())

    def _vector_epilogue(
        self,
        em: GemmBuilder,
        task: Task,
        row_values: Sequence[SSAValue],
        column0: SSAValue,
        sums: Sequence[SSAValue],
        groups: int,
    ) -> None:
        """The epilogue of the tile's first `groups` x `lanes` columns, `lanes` at a time
        (tile_epilogue.py), from the accumulators."""
        found, lanes, run = self.found, self.plan.lanes, self.run
        assert run is not None
        outer_args = found.args(found.columns)[: -run.dims]
        outer_dims = self.plan.dims(found.columns)[: -run.dims]
        at: list[tuple[Mapping, SSAValue]] = []
        for h in range(groups):
            column = em.emit(arith.AddiOp(column0, em.index(h * lanes)))
            if run.whole:
                at.append(({}, column))
                continue
            outer, position = em.divide(column, run.length)
            at.append((em.bind(outer_args, outer, outer_dims), position))
        per_row = len(sums) // len(row_values)
        for r, row in enumerate(row_values):
            rows = em.bind(found.args(found.rows), row, self.plan.dims(found.rows))
            for h, (columns, position) in enumerate(at):
                mapping = {**task.batch, **rows, **columns}
                access = (run, position)
                emit_vector_epilogue(em, found, mapping, sums[per_row * r + h], lanes, access)
