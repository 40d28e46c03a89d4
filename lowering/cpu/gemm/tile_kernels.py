"""The tasks of a tiled GEMM: register tiles over packed panels, then the fused epilogue.

A tile is MR rows x NR columns of the output: its sums live in 2 * MR vector registers
for the whole K loop (per k two vector loads of the B panel, MR broadcasts of A, 2 * MR
fused multiply-adds, nothing stored). The nest's epilogue (its body after the reduction:
bias, activation, residual add) then runs on the finished tile, `lanes` columns at a time
straight from those registers where tile_epilogue.py allows (the columns of a last panel
past a multiple of `lanes`, and every column where it does not, point by point from a
small stack buffer the tile is stored to). A task is one (batch point, row block, panel
block): its row block's full tiles, then (last row block only) the rows left over
(M mod MR) as a narrower tile, each across the block's panels when the plan says rows
outer (its panels fit in L2: the tile's rows are written as MR streams along the columns,
which a short K's GEMM, attention's 1500 x 64 @ 64 x 1500 scores, is bound by), else
each panel's row tiles in turn (a long K's panels read from L2 by every row tile of the
block; and a task packing its own panels packs each right before its tiles). The last
panel's tiles are only as wide as its columns below N need: one vector when they fit
one, and up to DOT_COLUMNS columns past its last full vector are computed as dot
products along K (`_dots`: A's row times the column, packed along K, `lanes` products
per multiply-add) instead of by one more vector of mostly padding (a 7x7 layer at batch
1: N = 49 is 3 vectors of 16 and 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import f32
from xdsl.ir import Region, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.dot_columns import DotTask, dot_epilogue, dot_products
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder, Mapping
from graphfuse.lowering.cpu.gemm.operand_packing import OperandPacker
from graphfuse.lowering.cpu.gemm.tile_epilogue import emit_vector_epilogue, vector_epilogue_run
from graphfuse.lowering.cpu.gemm.tile_plan import MR, TilePlan


@dataclass(frozen=True)
class _Task:
    """What every tile of one task shares."""

    batch: Mapping
    """The nest's batch indices at the task's batch point."""
    slot_a: SSAValue
    slot_b: SSAValue
    """Bp's slot the tiles read: the batch point's, or the task's own."""
    tile: SSAValue | None
    """The MR x NR stack buffer a finished tile's sums go to for the scalar epilogue."""


@dataclass(frozen=True)
class _Shape:
    """A tile's columns: `vectors` vector registers wide, plus `dots` columns by dot
    products; `last`: whether its panel is the last one (None: either, decided at run
    time)."""

    vectors: int
    dots: int
    last: bool | None


def _at(task: _Task) -> DotTask:
    return DotTask(task.batch, task.slot_a, task.slot_b)


class TaskEmitter:
    """Emits the body of one task of the plan (`task`), packing B there if it says so."""

    def __init__(self, plan: TilePlan, packer: OperandPacker):
        self.plan = plan
        self.found = plan.found
        self.packer = packer
        self.run = vector_epilogue_run(plan.found, plan.lanes)
        self.scalar = self.run is None or plan.found.n % plan.lanes != 0
        """Some columns take the scalar epilogue (from the tile buffer)."""

    def task(self, em: GemmBuilder, number: SSAValue) -> None:
        """Task `number`: (batch point, row block, panel block), row-major."""
        plan, found = self.plan, self.found
        point, within = em.divide(number, plan.row_blocks * plan.panel_blocks)
        row_block, panel_block = em.divide(within, plan.panel_blocks)
        batch = self.packer.batch(em, point)
        slot_a = point if plan.a_batched else em.index(0)
        slot_b = number if plan.b_in_task else point if plan.b_batched else em.index(0)
        tile = em.emit(memref.AllocaOp.get(f32, shape=[MR, plan.nr])) if self.scalar else None
        task = _Task(batch, slot_a, slot_b, tile)
        first_panel, last_panel = em.chunk(panel_block, plan.panels_per_task, plan.panels)
        first, last = em.chunk(row_block, plan.per_task, found.m // MR)
        panels = (first_panel, last_panel)

        def tiles(inner: GemmBuilder, row0: SSAValue, rows: int, panel: SSAValue) -> None:
            self._shaped(
                inner, panel, lambda at, shape: self._tile(at, task, row0, panel, rows, shape)
            )

        if plan.rows_outer:
            self._rows(
                em,
                row_block,
                (first, last),
                lambda inner, row0, rows: self._panels(
                    inner, task, panels, lambda at, panel: tiles(at, row0, rows, panel)
                ),
            )
        else:
            self._panels(
                em,
                task,
                panels,
                lambda inner, panel: self._rows(
                    inner,
                    row_block,
                    (first, last),
                    lambda at, row0, rows: tiles(at, row0, rows, panel),
                ),
            )

    def _panels(
        self,
        em: GemmBuilder,
        task: _Task,
        panels: tuple[SSAValue, SSAValue],
        body: Callable[[GemmBuilder, SSAValue], None],
    ) -> None:
        """`body` for each panel in `panels`, after packing it where the task packs its
        own."""
        plan = self.plan
        _, panel_loop = em.loop(*panels)
        panel = panel_loop.block.args[0]
        if plan.b_in_task:
            next_panel = panel_loop.emit(arith.AddiOp(panel, panel_loop.index(1)))
            own = task.batch if plan.b_batched else {}
            span = (panel, next_panel)
            self.packer.pack_b_panels(panel_loop, task.slot_b, span, own, local=True)
        body(panel_loop, panel)
        panel_loop.add(scf.YieldOp())

    def _rows(
        self,
        em: GemmBuilder,
        row_block: SSAValue,
        tiles: tuple[SSAValue, SSAValue],
        body: Callable[[GemmBuilder, SSAValue, int], None],
    ) -> None:
        """`body` for each full row tile in `tiles` (its first row, MR rows), then, in the
        last row block only, for the rows past the last full tile."""
        full, tail = divmod(self.found.m, MR)
        if full:
            _, rows = em.loop(*tiles)
            body(rows, rows.emit(arith.MuliOp(rows.block.args[0], rows.index(MR))), MR)
            rows.add(scf.YieldOp())
        if tail:
            is_last = em.emit(arith.CmpiOp(row_block, em.index(self.plan.row_blocks - 1), "eq"))
            then = GemmBuilder()
            body(then, then.index(full * MR), tail)
            then.add(scf.YieldOp())
            em.add(scf.IfOp(is_last, [], Region(then.block)))

    def _shaped(
        self, em: GemmBuilder, panel: SSAValue, body: Callable[[GemmBuilder, _Shape], None]
    ) -> None:
        """`body` with the tiles' shape in `panel`: the last panel's own (narrower, or with
        dot columns) where it differs from the others', by a test at run time when the
        task's panels may hold both."""
        plan = self.plan
        narrow = _Shape(plan.last_panel_vectors, plan.dot_columns, True)
        if not plan.special_last:
            body(em, _Shape(2, 0, None))
        elif plan.panels == 1:
            body(em, narrow)
        else:
            is_last = em.emit(arith.CmpiOp(panel, em.index(plan.panels - 1), "eq"))
            short, wide = GemmBuilder(), GemmBuilder()
            body(short, narrow)
            body(wide, _Shape(2, 0, False))
            short.add(scf.YieldOp())
            wide.add(scf.YieldOp())
            em.add(scf.IfOp(is_last, [], Region(short.block), Region(wide.block)))

    def _tile(
        self,
        em: GemmBuilder,
        task: _Task,
        row0: SSAValue,
        panel: SSAValue,
        rows: int,
        shape: _Shape,
    ) -> None:
        """Sums of rows row0..row0+rows x the panel's first `shape.vectors` x `lanes`
        columns and its dot columns (the rest of a narrow last panel is past N), then the
        epilogue."""
        found, lanes, vec = self.found, self.plan.lanes, self.plan.vec
        vectors = shape.vectors
        init = em.emit(vector.BroadcastOp(found.reduce.init, vec))
        row_values = [em.emit(arith.AddiOp(row0, em.index(r))) for r in range(rows)]
        dot_sums = dot_products(em, self.plan, self.packer, _at(task), row_values, shape.dots)
        if not vectors:
            self._epilogue(em, task, row_values, panel, [], shape, dot_sums)
            return
        halves = [em.index(h * lanes) for h in range(vectors)]
        stored = em.index(0) if self.plan.b_in_task else panel
        for_op, step = em.loop(em.index(0), em.index(found.k), [init] * (vectors * rows))
        k = step.block.args[0]
        accumulators = list(step.block.args[1:])
        packed_b = self.packer.packed_b
        b_halves = [
            step.emit(vector.LoadOp(packed_b, [task.slot_b, stored, k, h], vec)) for h in halves
        ]
        sums: list[SSAValue] = []
        for r, row in enumerate(row_values):
            scalar = self._a_value(step, task, row, k)
            spread = step.emit(vector.BroadcastOp(scalar, vec))
            for h in range(vectors):
                accumulator = accumulators[vectors * r + h]
                sums.append(step.emit(vector.FMAOp(spread, b_halves[h], accumulator)))
        step.add(scf.YieldOp(*sums))
        if task.tile is not None:
            for r in range(rows):
                for h in range(vectors):
                    result = for_op.results[vectors * r + h]
                    em.add(vector.StoreOp(result, task.tile, [em.index(r), halves[h]]))
        self._epilogue(em, task, row_values, panel, list(for_op.results), shape, dot_sums)

    def _a_value(self, em: GemmBuilder, task: _Task, row: SSAValue, k: SSAValue) -> SSAValue:
        """A at (row, k) of the task's batch point: from A itself or its packed copy."""
        packed_a = self.packer.packed_a
        if self.plan.a_in_place is None:
            assert packed_a is not None
            return em.emit(memref.LoadOp.get(packed_a, [task.slot_a, row, k]))
        row_arg, k_arg = self.plan.a_in_place
        return em.evaluate(self.found.a, {**task.batch, row_arg: row, k_arg: k})

    def _epilogue(
        self,
        em: GemmBuilder,
        task: _Task,
        row_values: Sequence[SSAValue],
        panel: SSAValue,
        sums: Sequence[SSAValue],
        shape: _Shape,
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
        full, tail = GemmBuilder(), GemmBuilder()
        self._vector_epilogue(full, task, row_values, column0, sums, nr // lanes)
        self._vector_epilogue(tail, task, row_values, column0, sums, last // lanes)
        if last % lanes:
            self._scalar_epilogue(tail, task, row_values, column0, last // lanes * lanes)
        full.add(scf.YieldOp())
        tail.add(scf.YieldOp())
        em.add(scf.IfOp(is_last, [], Region(tail.block), Region(full.block)))

    def _scalar_epilogue(
        self,
        em: GemmBuilder,
        task: _Task,
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
        task: _Task,
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
