"""The tasks of a tiled GEMM: register tiles over packed panels, then the fused epilogue.

A tile is MR rows x NR columns of the output: its sums live in 2 * MR vector registers
for the whole K loop (per k two vector loads of the B panel, MR broadcasts of A, 2 * MR
fused multiply-adds, nothing stored). The nest's epilogue (its body after the reduction:
bias, activation, residual add) then runs on the finished tile (tile_finish.py), from
those registers where it can, else from a small stack buffer the tile is stored to.

A task is one (batch point, row block, panel block): its row block's full tiles, then
(last row block only) the rows left over (M mod MR) as a narrower tile. When the plan
says rows outer (the task's panels fit in L2), each row tile runs across the block's
panels, so its MR output rows are written as streams along the columns; a short K's
GEMM (attention's 1500 x 64 @ 64 x 1500 scores) is bound by those stores. Otherwise
each panel's row tiles run in turn: a long K's panel is read from L2 by every row tile
of the block, and a task that packs its own panels packs each right before its tiles.

The last panel's tiles are only as wide as its columns below N need: one vector when
they fit one. Up to DOT_COLUMNS columns past its last full vector are computed as dot
products along K (A's row times the column, packed along K, `lanes` products per
multiply-add) instead of by one more vector of mostly padding (a 7x7 layer at batch 1:
N = 49 is 3 vectors of 16 and 1). Where the last panel's tiles are one vector wide, the
row tiles go in pairs: over the other panels a pair is two tiles, over that one a single
tile of 2 * MR rows, whose 2 * MR accumulators keep the multiply-adds as busy as a full
tile's (TilePlan.paired_rows).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import f32
from xdsl.ir import Region, SSAValue

from graphfuse.lowering.cpu.gemm.dot_columns import DotTask, dot_products
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder
from graphfuse.lowering.cpu.gemm.operand_packing import OperandPacker
from graphfuse.lowering.cpu.gemm.tile_finish import Shape, Task, TileFinisher
from graphfuse.lowering.cpu.gemm.tile_plan import MR, TilePlan


def _at(task: Task) -> DotTask:
    return DotTask(task.batch, task.slot_a, task.slot_b)


class TaskEmitter:
    """Emits the body of one task of the plan (`task`), packing B there if it says so."""

    def __init__(self, plan: TilePlan, packer: OperandPacker):
        self.plan = plan
        self.found = plan.found
        self.packer = packer
        self.finish = TileFinisher(plan)

    def task(self, em: GemmBuilder, number: SSAValue) -> None:
        """Task `number`: (batch point, row block, panel block), row-major."""
        plan, found = self.plan, self.found
        point, within = em.divide(number, plan.row_blocks * plan.panel_blocks)
        row_block, panel_block = em.divide(within, plan.panel_blocks)
        batch = self.packer.batch(em, point)
        slot_a = point if plan.a_batched else em.index(0)
        slot_b = number if plan.b_in_task else point if plan.b_batched else em.index(0)
        tile = (
            em.emit(memref.AllocaOp.get(f32, shape=[plan.tile_rows, plan.nr]))
            if self.finish.scalar
            else None
        )
        task = Task(batch, slot_a, slot_b, tile)
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
        task: Task,
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
        if full and self.plan.paired_rows:
            self._pairs(em, tiles, body)
        elif full:
            _, rows = em.loop(*tiles)
            body(rows, rows.emit(arith.MuliOp(rows.block.args[0], rows.index(MR))), MR)
            rows.add(scf.YieldOp())
        if tail:
            is_last = em.emit(arith.CmpiOp(row_block, em.index(self.plan.row_blocks - 1), "eq"))
            then = GemmBuilder()
            body(then, then.index(full * MR), tail)
            then.add(scf.YieldOp())
            em.add(scf.IfOp(is_last, [], Region(then.block)))

    def _pairs(
        self,
        em: GemmBuilder,
        tiles: tuple[SSAValue, SSAValue],
        body: Callable[[GemmBuilder, SSAValue, int], None],
    ) -> None:
        """`body` for the full row tiles in `tiles` two at a time (2 * MR rows), then for
        the last one alone where their count is odd (TilePlan.paired_rows)."""
        first, last = tiles
        count = em.emit(arith.SubiOp(last, first))
        _, pairs = em.loop(em.index(0), em.emit(arith.DivUIOp(count, em.index(2))))
        pair = pairs.emit(arith.MuliOp(pairs.block.args[0], pairs.index(2)))
        tile = pairs.emit(arith.AddiOp(first, pair))
        body(pairs, pairs.emit(arith.MuliOp(tile, pairs.index(MR))), 2 * MR)
        pairs.add(scf.YieldOp())
        if self.plan.per_task % 2 == 0 and (self.found.m // MR) % 2 == 0:
            return  # every row block has an even count of full tiles
        odd = em.emit(arith.RemUIOp(count, em.index(2)))
        is_odd = em.emit(arith.CmpiOp(odd, em.index(1), "eq"))
        then = GemmBuilder()
        lone = then.emit(arith.SubiOp(last, then.index(1)))
        body(then, then.emit(arith.MuliOp(lone, then.index(MR))), MR)
        then.add(scf.YieldOp())
        em.add(scf.IfOp(is_odd, [], Region(then.block)))

    def _shaped(
        self, em: GemmBuilder, panel: SSAValue, body: Callable[[GemmBuilder, Shape], None]
    ) -> None:
        """`body` with the tiles' shape in `panel`: the last panel's own (narrower, or with
        dot columns) where it differs from the others', by a test at run time when the
        task's panels may hold both."""
        plan = self.plan
        narrow = Shape(plan.last_panel_vectors, plan.dot_columns, True)
        if not plan.special_last:
            body(em, Shape(2, 0, None))
        elif plan.panels == 1:
            body(em, narrow)
        else:
            is_last = em.emit(arith.CmpiOp(panel, em.index(plan.panels - 1), "eq"))
            em.branch(
                is_last,
                lambda inner: body(inner, narrow),
                lambda inner: body(inner, Shape(2, 0, False)),
            )

    def _tile(
        self,
        em: GemmBuilder,
        task: Task,
        row0: SSAValue,
        panel: SSAValue,
        rows: int,
        shape: Shape,
    ) -> None:
        """Sums of rows row0..row0+rows x the panel's first `shape.vectors` x `lanes`
        columns and its dot columns (the rest of a narrow last panel is past N), then the
        epilogue. A pair of full row tiles (rows > MR) over a panel wider than one vector
        is two tiles of MR rows, each with its 2 * MR accumulators."""
        if rows > MR and shape.vectors > 1:
            for start in range(0, rows, MR):
                at = em.emit(arith.AddiOp(row0, em.index(start)))
                self._tile(em, task, at, panel, MR, shape)
            return
        found, lanes, vec = self.found, self.plan.lanes, self.plan.vec
        vectors = shape.vectors
        init = em.emit(vector.BroadcastOp(found.reduce.init, vec))
        row_values = [em.emit(arith.AddiOp(row0, em.index(r))) for r in range(rows)]
        dot_sums = dot_products(em, self.plan, self.packer, _at(task), row_values, shape.dots)
        if not vectors:
            self.finish.epilogue(em, task, row_values, panel, [], shape, dot_sums)
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
        self.finish.epilogue(em, task, row_values, panel, list(for_op.results), shape, dot_sums)

    def _a_value(self, em: GemmBuilder, task: Task, row: SSAValue, k: SSAValue) -> SSAValue:
        """A at (row, k) of the task's batch point: from A itself or its packed copy."""
        packed_a = self.packer.packed_a
        if self.plan.a_in_place is None:
            assert packed_a is not None
            return em.emit(memref.LoadOp.get(packed_a, [task.slot_a, row, k]))
        row_arg, k_arg = self.plan.a_in_place
        return em.evaluate(self.found.a, {**task.batch, row_arg: row, k_arg: k})
