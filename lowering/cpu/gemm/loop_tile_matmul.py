"""loop-tile-matmul: a matmul or convolution loop nest becomes a register-tiled, vectorised
GEMM micro-kernel, with the kernel's fused epilogue applied to each tile while it is in
cache.

convert-graph-to-loop writes `C = epilogue(A @ B)`, and a convolution, as one nest over
the output points with a `loop.reduce add` inside: a dot product per point. LLVM
vectorises the dot product but reuses nothing between points, so each point streams its
operands through the cache: about 20 GFLOP/s at 2048^3 on this VM's two cores. This pass
computes such a nest as a GEMM, the way BLAS libraries do (Goto's algorithm):

- the nest is read as a contraction (lowering/cpu/gemm/contractions.py): rows m, columns n, batch
  and reduction k; a convolution is the implicit GEMM of im2col;
- both operands are packed, by evaluating the original loads (with their index
  arithmetic, cloned) at every (m, k) and (k, n): `Ap[m][k]` row by row and `Bp` in panels
  of NR = 16 columns, `Bp[n/16][k][16]`, zero past the last column. For a convolution
  this packing is the im2col, done once;
- the output is cut into tiles of MR = 6 rows x 16 columns. A tile's 96 sums live in 12
  vector registers (vector<8xf32>) for the whole K loop: per k, two vector loads of the B
  panel, six broadcasts of A, twelve fused multiply-adds, nothing stored;
- on AVX-512 targets (`lanes` = 16) panels and tiles are 32 columns wide, the same 12
  accumulators as vector<16xf32>: twice the multiply-adds per k, and 15 of the 32 zmm
  registers (a 12-row tile would fill 27; not measured: no AVX-512 machine here);
- the finished tile goes to a small stack buffer and the epilogue (bias, activation,
  residual add, batch-norm: the nest's body after the reduction, unchanged) runs over its
  points, reading the sums from L1 and storing the results;
- blocks of up to 16 row tiles, for every batch, are the iterations of one `scf.parallel`
  (split over the cores by MLIR's OpenMP lowering), each walking all panels over
  its rows, so a panel is reused across up to 96 rows from L2; short GEMMs get smaller
  blocks so that there are at least 8. Rows left over (M mod 6) get a narrower tile.
  Packing is split over the cores too; with a single row block (M <= 96), each task packs
  its own panels just before its tiles read them, in the same parallel loop;
- an A read at [batch..., m, k] (a plain row-major buffer) is not packed: its rows already
  are the packed rows, and the tiles read it in place.

bench/bench_gemm.py: 2048^3 at about onnxruntime's GFLOP/s on this VM (2 threads).

Nests contractions.py does not take, and those under MIN_FLOPS multiply-adds, are left for
convert-loop-to-upstream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf, vector
from xdsl.dialects.builtin import (
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    VectorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable

from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi
from graphfuse.lowering.cpu.gemm.contractions import (
    Contraction,
    Operand,
    constant_arguments,
    factor,
    match_contraction,
    reads_constants,
)
from graphfuse.lowering.cpu.gemm.row_panels import RowRun, collapsed_source, row_run
from graphfuse.lowering.cpu.gemm.tile_epilogue import emit_vector_epilogue, vector_epilogue_fits
from graphfuse.lowering.cpu.gemm.transposed_pack import BLOCK, transposable_load, transpose8
from graphfuse.lowering.loop_to_upstream.loop_indexing import delinearize, index

MR = 6
MAX_TILES_PER_TASK = 16
"""A task's row tiles share each B panel from L2 (16 tiles: 96 rows)."""
MIN_TASKS = 8
"""Fewer tiles per task on short GEMMs, so both cores still get work."""
PACK_ROWS_PER_TASK = 64
PACK_PANELS = 16
"""Panels of B packed by one task: rows of B are read in runs of 256 floats."""
_BLOCK_VEC = VectorType(f32, [BLOCK])
Mapping = dict[SSAValue, SSAValue]


class _Emitter:
    """Appends ops to a block."""

    def __init__(self, block: Block):
        self.block = block

    def add(self, op: Operation) -> SSAValue:
        """Appends `op`, returns its result."""
        self.block.add_op(op)
        return op.results[0]

    def put(self, op: Operation) -> None:
        self.block.add_op(op)

    def const(self, value: int) -> SSAValue:
        return self.add(index(value))

    def loop(
        self, lower: SSAValue, upper: SSAValue, carried: Sequence[SSAValue] = ()
    ) -> tuple[scf.ForOp, _Emitter]:
        body = Block(arg_types=[IndexType(), *(v.type for v in carried)])
        for_op = scf.ForOp(lower, upper, self.const(1), list(carried), body)
        self.put(for_op)
        return for_op, _Emitter(body)

    def divide(self, value: SSAValue, divisor: int) -> tuple[SSAValue, SSAValue]:
        """value / divisor and value mod divisor."""
        return (
            self.add(arith.DivUIOp(value, self.const(divisor))),
            self.add(arith.RemUIOp(value, self.const(divisor))),
        )

    def chunk(self, number: SSAValue, size: int, limit: int) -> tuple[SSAValue, SSAValue]:
        """Bounds of chunk `number` of `size` items out of `limit`: the last may be short."""
        first = self.add(arith.MuliOp(number, self.const(size)))
        end = self.add(arith.AddiOp(first, self.const(size)))
        return first, self.add(arith.MinUIOp(end, self.const(limit)))

    def split(self, value: SSAValue, shape: Sequence[int]) -> list[SSAValue]:
        positions: list[Operation] = []
        values = delinearize(value, shape, positions)
        self.block.add_ops(positions)
        return values


class _Tiler:
    """Emits the tiled computation of one matched nest in place of it."""

    def __init__(self, found: Contraction, threads: bool, constant_positions: set[int], lanes: int):
        self.found = found
        self.threads = threads
        self.constant_positions = constant_positions
        self.lanes = lanes
        self.nr = 2 * lanes
        """Panel width: a tile row is two vector registers."""
        self.vec = VectorType(f32, [lanes])
        self.panels = -(-found.n // self.nr)
        shape = found.nest.shape
        self.batch_shape = [shape[d] for d in found.batch]
        self.batch_args = found.args(found.batch)
        self.a_batched = any(x in found.a.depends for x in self.batch_args)
        self.b_batched = any(x in found.b.depends for x in self.batch_args)
        self.a_in_place = self._a_in_place()

    def emit(self) -> None:
        found = self.found
        nest = found.nest
        parent = nest.parent_block()
        assert parent is not None
        em = _Emitter(Block())
        points = math.prod(self.batch_shape)
        a_slots, b_slots = self.packed_types()
        kernel = nest.parent_op()
        assert isinstance(kernel, loop.KernelOp)
        entry = kernel.body.block
        if self.a_in_place is None:
            self.packed_a = entry.insert_arg(a_slots, len(entry.args))
        self.packed_b = entry.insert_arg(b_slots, len(entry.args))
        self.slot_counts = (a_slots.get_shape()[0], b_slots.get_shape()[0])
        constants: set[SSAValue] = {entry.args[n] for n in self.constant_positions}
        full = found.m // MR
        # Row blocks of up to 16 tiles (one block for a short GEMM); then the panels are
        # split too, until there are MIN_TASKS tasks. The row tail joins the last block.
        self.per_task = min(full, MAX_TILES_PER_TASK) or 1
        self.row_blocks = max(1, -(-full // self.per_task))
        # With one row block (and B per batch point, or one point) every panel belongs to
        # one task: that task packs it right before its tiles use it (from L2), not a pass
        # over all of B before (through memory when B's panels outgrow the cache, and one
        # more fork and join): conv3x3 64->64 [8,64,56,56] 15.5 -> 14.1 ms side by side.
        self.b_in_task = (
            self.row_blocks == 1
            and (self.b_batched or points == 1)
            and not reads_constants(found.b, constants)
        )
        packs: list[tuple[Operand, Callable[[_Emitter], None]]] = []
        if self.a_in_place is None:
            packs.append((found.a, self._pack_all_a))
        if not self.b_in_task:
            packs.append((found.b, self._pack_all_b))
        for operand, pack in packs:
            if not reads_constants(operand, constants):
                pack(em)
        constant = [pack for operand, pack in packs if reads_constants(operand, constants)]
        if constant:
            self._once(em, entry, constant)
        wanted = -(-MIN_TASKS // (points * self.row_blocks))
        self.panels_per_task = -(-self.panels // min(self.panels, max(1, wanted)))
        self.panel_blocks = -(-self.panels // self.panels_per_task)
        tasks = points * self.row_blocks * self.panel_blocks
        self._parallel(em, tasks, self._task)
        for op in list(em.block.ops):
            op.detach()
            parent.insert_op_before(op, nest)
        nest.detach()
        nest.erase()

    def _a_in_place(self) -> tuple[SSAValue, SSAValue] | None:
        """A's row and reduction indices when A is a buffer read at [batch..., m, k] with m
        and k the GEMM's single row and reduction index, last: its rows are then already
        Ap's rows (k contiguous), and the tiles read it where it is instead of from a
        packed copy (as BLAS SGEMM reads A). Attention's P @ V spent about a sixth of its
        time copying P. None when A must be packed."""
        found = self.found
        load = found.a.direct_load()
        rows = found.args(found.rows)
        reduction = found.reduce.body.block.args
        if load is None or len(rows) != 1 or len(reduction) != 1:
            return None
        indices = list(load.indices)
        leading = indices[: len(indices) - 2]
        if indices[-2:] != [rows[0], reduction[0]]:
            return None
        if not all(i in self.batch_args for i in leading):
            return None
        return rows[0], reduction[0]

    def _pack_all_a(self, em: _Emitter) -> None:
        row_groups = -(-self.found.m // PACK_ROWS_PER_TASK)
        count = self.slot_counts[0] * row_groups
        self._parallel(em, count, lambda task, i: self._pack_a(task, i, row_groups))

    def _pack_all_b(self, em: _Emitter) -> None:
        count = self.slot_counts[1] * -(-self.panels // PACK_PANELS)
        self._parallel(em, count, self._pack_b)

    def _once(
        self, em: _Emitter, entry: Block, packs: Sequence[Callable[[_Emitter], None]]
    ) -> None:
        """Runs `packs` on the first call only: a factor that reads nothing but constants
        (a model's weights) stays packed in its scratch buffer. A one-byte scratch flag,
        zero as the caller allocates it, says whether it has been."""
        flag = entry.insert_arg(MemRefType(IntegerType(8), [1]), len(entry.args))
        zero = em.const(0)
        done = em.add(memref.LoadOp.get(flag, [zero]))
        fresh = em.add(arith.CmpiOp(done, em.add(arith.ConstantOp(IntegerAttr(0, 8))), "eq"))
        then = _Emitter(Block())
        for pack in packs:
            pack(then)
        one = then.add(arith.ConstantOp(IntegerAttr(1, 8)))
        then.put(memref.StoreOp.get(one, flag, [then.const(0)]))
        then.put(scf.YieldOp())
        em.put(scf.IfOp(fresh, [], Region(then.block)))

    def packed_types(self) -> tuple[MemRefType[Attribute], MemRefType[Attribute]]:
        """The packed operands' buffers: Ap[slots][M][K] and Bp[slots][N/NR][K][NR]
        (one slot per batch point when the operand has a batch)."""
        found = self.found
        points = math.prod(self.batch_shape)
        a_slots = points if self.a_batched else 1
        b_slots = points if self.b_batched else 1
        return (
            MemRefType(f32, [a_slots, found.m, found.k]),
            MemRefType(f32, [b_slots, self.panels, found.k, self.nr]),
        )

    def _parallel(
        self, em: _Emitter, count: int, body: Callable[[_Emitter, SSAValue], None]
    ) -> None:
        """`body` for each of `count` iterations: an scf.parallel when threads are on and
        there are several, else an scf.for."""
        block = Block(arg_types=[IndexType()])
        body(_Emitter(block), block.args[0])
        bounds = (em.const(0), em.const(count), em.const(1))
        if self.threads and count > 1:
            block.add_op(scf.ReduceOp())
            em.put(scf.ParallelOp([bounds[0]], [bounds[1]], [bounds[2]], Region(block)))
        else:
            block.add_op(scf.YieldOp())
            em.put(scf.ForOp(*bounds, [], block))

    def _value(self, em: _Emitter, operand: Operand, mapping: Mapping) -> SSAValue:
        """`operand`'s load at the indices `mapping` gives (its index ops cloned)."""
        local = self._clone_chain(em, operand, mapping)
        return local.get(operand.value, operand.value)

    @staticmethod
    def _clone_chain(
        em: _Emitter, operand: Operand, mapping: Mapping, skip: Operation | None = None
    ) -> dict[SSAValue, SSAValue]:
        """`mapping` extended by clones of `operand`'s ops (all but `skip`) into `em`."""
        local = dict(mapping)
        for op in operand.chain:
            if op is not skip:
                em.put(op.clone(value_mapper=local))
        return local

    def _over_reduction(
        self, em: _Emitter, leading: int | None = None
    ) -> tuple[_Emitter, Mapping, SSAValue]:
        """Loops over the reduction's own dimensions (the first `leading` of them, or all;
        no divisions per element); returns the innermost body, the reduction's indices
        there and their linear position."""
        args = self.found.reduce.body.block.args[:leading]
        mapping: Mapping = {}
        linear: SSAValue = em.const(0)
        inner = em
        for arg, extent in zip(args, self.found.reduce.shape[:leading], strict=True):
            _, inner = inner.loop(inner.const(0), inner.const(extent))
            mapping[arg] = inner.block.args[0]
            scaled = inner.add(arith.MuliOp(linear, inner.const(extent)))
            linear = inner.add(arith.AddiOp(scaled, inner.block.args[0]))
        return inner, mapping, linear

    @staticmethod
    def _close(inner: _Emitter, outer: _Emitter) -> None:
        """Ends every loop from `inner` out to (not including) `outer`'s block."""
        block: Block | None = inner.block
        while block is not None and block is not outer.block:
            block.add_op(scf.YieldOp())
            parent = block.parent_op()
            block = parent.parent_block() if parent is not None else None

    def _pack_a(self, em: _Emitter, task: SSAValue, row_groups: int) -> None:
        """Ap[slot][m][k] = A at (batch slot, row m, reduction index k)."""
        found = self.found
        slot, group = em.divide(task, row_groups)
        first, last = em.chunk(group, PACK_ROWS_PER_TASK, found.m)
        batch = self._batch(em, slot) if self.a_batched else {}
        _, row = em.loop(first, last)
        m = row.block.args[0]
        mapping = dict(batch)
        rows = row.split(m, self._dims(found.rows))
        mapping.update(zip(found.args(found.rows), rows, strict=True))
        inner, reduction, k = self._over_reduction(row)
        mapping.update(reduction)
        value = self._value(inner, found.a, mapping)
        inner.put(memref.StoreOp.get(value, self.packed_a, [slot, m, k]))
        self._close(inner, em)

    def _dims(self, dims: Sequence[int]) -> list[int]:
        return [self.found.nest.shape[d] for d in dims]

    def _batch(self, em: _Emitter, point: SSAValue) -> Mapping:
        return dict(zip(self.batch_args, em.split(point, self.batch_shape), strict=True))

    def _columns_fastest(self) -> bool:
        """Whether B's memory runs along the columns (its last load index moves with
        them, as a matmul's B[k, n]) rather than along k (a convolution's NHWC input)."""
        loads = self.found.b.loads
        if len(loads) != 1:
            return True
        last = factor(loads[0].indices[-1], self.found.nest)
        columns = set(self.found.args(self.found.columns))
        return last is None or bool(last.depends & columns) or loads[0].indices[-1] in columns

    def _pack_b(self, em: _Emitter, task: SSAValue) -> None:
        """Bp[slot][p][k][c] = B at (batch slot, column NR p + c, k), for the panels of
        group `task`; zero past column N (evaluated at column N - 1 there, so every load
        stays in bounds). When B is contiguous along its columns the loops run k, panel,
        lane (reading rows of B in runs of PACK_PANELS x NR), else panel, lane, k, or, for
        a channels-last B, 8x8 transposes on the full panels and this on the last."""
        groups = -(-self.panels // PACK_PANELS)
        slot, group = em.divide(task, groups)
        first, last_panel = em.chunk(group, PACK_PANELS, self.panels)
        mapping = self._batch(em, slot) if self.b_batched else {}
        self._pack_b_panels(em, slot, (first, last_panel), mapping)

    def _pack_b_panels(
        self,
        em: _Emitter,
        slot: SSAValue,
        span: tuple[SSAValue, SSAValue],
        batch: Mapping,
    ) -> None:
        """`_pack_b` for the panels span[0]..span[1] of batch slot `slot`, whose batch
        indices `batch` gives (empty for a B shared by every batch point)."""
        found = self.found
        first, last_panel = span
        mapping = dict(batch)
        columns_fastest = self._columns_fastest()
        run = row_run(found, self.lanes) if columns_fastest else None
        load = None if columns_fastest else transposable_load(found)
        if run is not None or load is not None:
            full = em.const(found.n // self.nr)
            end = em.add(arith.MinUIOp(last_panel, full))
            if run is not None:
                self._pack_b_rows(em, slot, (first, end), mapping, run)
            elif load is not None:
                self._pack_b_transposed(em, slot, (first, end), mapping, load)
            if found.n % self.nr == 0:
                return
            first = em.add(arith.MaxUIOp(first, full))  # the last panel, if in this group
        outer, reduction, k = self._over_reduction(em) if columns_fastest else (em, {}, None)
        _, panels = outer.loop(first, last_panel)
        _, lane = panels.loop(panels.const(0), panels.const(self.nr))
        p, c = panels.block.args[0], lane.block.args[0]
        column = lane.add(arith.AddiOp(lane.add(arith.MuliOp(p, lane.const(self.nr))), c))
        clamped = column
        if found.n % self.nr:
            clamped = lane.add(arith.MinUIOp(column, lane.const(found.n - 1)))
        columns = lane.split(clamped, self._dims(found.columns))
        mapping.update(zip(found.args(found.columns), columns, strict=True))
        last = lane
        if k is None:
            last, reduction, k = self._over_reduction(lane)
        mapping.update(reduction)
        value = self._value(last, found.b, mapping)
        if found.n % self.nr:
            inside = last.add(arith.CmpiOp(column, last.const(found.n), "ult"))
            zero = last.add(arith.ConstantOp(FloatAttr(0.0, f32)))
            value = last.add(arith.SelectOp(inside, value, zero))
        last.put(memref.StoreOp.get(value, self.packed_b, [slot, p, k, c]))
        self._close(last, em)

    def _panel_parts(
        self, em: _Emitter, panels: tuple[SSAValue, SSAValue], width: int
    ) -> tuple[_Emitter, SSAValue, SSAValue, SSAValue]:
        """Loops over the panels in `panels` and their parts of `width` columns; returns the
        inner body, the panel, the part's first lane in the panel and its first column."""
        _, panel = em.loop(*panels)
        _, part = panel.loop(panel.const(0), panel.const(self.nr // width))
        p, h = panel.block.args[0], part.block.args[0]
        lane0 = part.add(arith.MuliOp(h, part.const(width)))
        column0 = part.add(arith.AddiOp(part.add(arith.MuliOp(p, part.const(self.nr))), lane0))
        return part, p, lane0, column0

    def _pack_b_rows(
        self,
        em: _Emitter,
        slot: SSAValue,
        panels: tuple[SSAValue, SSAValue],
        mapping: Mapping,
        run: RowRun,
    ) -> None:
        """`_pack_b` for a B read along contiguous rows (`row_panels`): per reduction index,
        panel and `lanes` columns, one vector load of B's collapsed rows and one store."""
        found = self.found
        collapse, length = collapsed_source(run)
        source = em.add(collapse)
        inner, reduction, k = self._over_reduction(em)
        part, p, lane0, column0 = self._panel_parts(inner, panels, self.lanes)
        at = {**mapping, **reduction}
        outer = found.args(found.columns)[: -run.dims]
        position = column0
        if outer:
            runs, position = part.divide(column0, length)
            extents = self._dims(found.columns)[: -run.dims]
            at.update(zip(outer, part.split(runs, extents), strict=True))
        local = self._clone_chain(part, found.b, at, skip=run.load)
        indices = [local.get(i, i) for i in run.leading_indices]
        value = part.add(vector.LoadOp(source, [*indices, position], self.vec))
        part.put(vector.StoreOp(value, self.packed_b, [slot, p, k, lane0]))
        self._close(part, em)

    def _pack_b_transposed(
        self,
        em: _Emitter,
        slot: SSAValue,
        panels: tuple[SSAValue, SSAValue],
        mapping: Mapping,
        load: loop.LoadOp,
    ) -> None:
        """`_pack_b` for a channels-last B (`transposed_pack`): per panel, half panel of 8
        columns, outer reduction index and block of 8 innermost ones, 8 vector loads, one
        8x8 transpose, 8 vector stores of panel rows."""
        found = self.found
        half, p, lane0, base = self._panel_parts(em, panels, BLOCK)
        args, shape = found.reduce.body.block.args, found.reduce.shape
        inner, outer_reduction, linear = self._over_reduction(half, len(shape) - 1)
        reduction = dict(outer_reduction)
        _, block = inner.loop(inner.const(0), inner.const(shape[-1] // BLOCK))
        start = block.add(arith.MuliOp(block.block.args[0], block.const(BLOCK)))
        reduction[args[-1]] = start
        first_k = block.add(
            arith.AddiOp(block.add(arith.MuliOp(linear, block.const(shape[-1]))), start)
        )
        rows: list[SSAValue] = []
        for offset in range(BLOCK):
            column = block.add(arith.AddiOp(base, block.const(offset)))
            columns = block.split(column, self._dims(found.columns))
            at = {**mapping, **reduction}
            at.update(zip(found.args(found.columns), columns, strict=True))
            local = self._clone_chain(block, found.b, at, skip=load)
            indices = [local.get(i, i) for i in load.indices]
            source = local.get(load.buffer, load.buffer)
            rows.append(block.add(vector.LoadOp(source, indices, _BLOCK_VEC)))
        for q, column_values in enumerate(transpose8(block.add, rows)):
            k = block.add(arith.AddiOp(first_k, block.const(q)))
            block.put(vector.StoreOp(column_values, self.packed_b, [slot, p, k, lane0]))
        self._close(block, em)

    def _task(self, em: _Emitter, number: SSAValue) -> None:
        """Task `number`: (batch point, row block, panel block), row-major. For each panel
        of its block, the row block's full tiles, then (last row block only) the tail."""
        found = self.found
        per_point = self.row_blocks * self.panel_blocks
        point, within = em.divide(number, per_point)
        row_block, panel_block = em.divide(within, self.panel_blocks)
        mapping = self._batch(em, point)
        self.slots = (
            point if self.a_batched else em.const(0),
            point if self.b_batched else em.const(0),
        )
        tile = em.add(memref.AllocaOp.get(f32, shape=[MR, self.nr]))
        full, tail = found.m // MR, found.m % MR
        first_panel, last_panel = em.chunk(panel_block, self.panels_per_task, self.panels)
        first, last = em.chunk(row_block, self.per_task, full)
        _, panel_loop = em.loop(first_panel, last_panel)
        panel = panel_loop.block.args[0]
        if self.b_in_task:
            next_panel = panel_loop.add(arith.AddiOp(panel, panel_loop.const(1)))
            batch = mapping if self.b_batched else {}
            self._pack_b_panels(panel_loop, self.slots[1], (panel, next_panel), batch)
        if full:
            _, rows = panel_loop.loop(first, last)
            row0 = rows.add(arith.MuliOp(rows.block.args[0], rows.const(MR)))
            self._tile(rows, mapping, row0, panel, MR, tile)
            rows.put(scf.YieldOp())
        if tail:
            is_last = panel_loop.add(
                arith.CmpiOp(row_block, panel_loop.const(self.row_blocks - 1), "eq")
            )
            then = _Emitter(Block())
            self._tile(then, mapping, then.const(full * MR), panel, tail, tile)
            then.put(scf.YieldOp())
            panel_loop.put(scf.IfOp(is_last, [], Region(then.block)))
        panel_loop.put(scf.YieldOp())

    def _tile(
        self,
        em: _Emitter,
        mapping: Mapping,
        row0: SSAValue,
        panel: SSAValue,
        rows: int,
        tile: SSAValue,
    ) -> None:
        """Sums of rows row0..row0+rows x the panel's columns, then the epilogue."""
        found = self.found
        slot_a, slot_b = self.slots
        init = em.add(vector.BroadcastOp(found.reduce.init, self.vec))
        row_values = [em.add(arith.AddiOp(row0, em.const(r))) for r in range(rows)]
        halves = [em.const(h * self.lanes) for h in range(2)]
        for_op, step = em.loop(em.const(0), em.const(found.k), [init] * (2 * rows))
        k = step.block.args[0]
        accumulators = list(step.block.args[1:])
        b_halves = [
            step.add(vector.LoadOp(self.packed_b, [slot_b, panel, k, h], self.vec)) for h in halves
        ]
        sums: list[SSAValue] = []
        for r, row in enumerate(row_values):
            scalar = self._a_value(step, mapping, slot_a, row, k)
            spread = step.add(vector.BroadcastOp(scalar, self.vec))
            for h in range(2):
                sums.append(step.add(vector.FMAOp(spread, b_halves[h], accumulators[2 * r + h])))
        step.put(scf.YieldOp(*sums))
        for r in range(rows):
            for h in range(2):
                em.put(vector.StoreOp(for_op.results[2 * r + h], tile, [em.const(r), halves[h]]))
        self._epilogue(em, mapping, row_values, panel, tile)

    def _a_value(
        self, em: _Emitter, mapping: Mapping, slot: SSAValue, row: SSAValue, k: SSAValue
    ) -> SSAValue:
        """A at (row, k) of the task's batch point: from A itself or its packed copy."""
        if self.a_in_place is None:
            return em.add(memref.LoadOp.get(self.packed_a, [slot, row, k]))
        row_arg, k_arg = self.a_in_place
        return self._value(em, self.found.a, {**mapping, row_arg: row, k_arg: k})

    def _epilogue(
        self,
        em: _Emitter,
        mapping: Mapping,
        row_values: Sequence[SSAValue],
        panel: SSAValue,
        tile: SSAValue,
    ) -> None:
        found = self.found
        column0 = em.add(arith.MuliOp(panel, em.const(self.nr)))
        if found.n % self.nr == 0 and vector_epilogue_fits(found, self.lanes):
            self._vector_epilogue(em, mapping, row_values, column0, tile)
            return
        columns = em.const(self.nr)
        if found.n % self.nr:
            left = em.add(arith.SubiOp(em.const(found.n), column0))
            columns = em.add(arith.MinUIOp(left, columns))
        body = found.nest.body.block
        for r, row in enumerate(row_values):
            local_rows = dict(mapping)
            local_rows.update(
                zip(found.args(found.rows), em.split(row, self._dims(found.rows)), strict=True)
            )
            _, point = em.loop(em.const(0), columns)
            c = point.block.args[0]
            local = dict(local_rows)
            column = point.add(arith.AddiOp(column0, c))
            local.update(
                zip(
                    found.args(found.columns),
                    point.split(column, self._dims(found.columns)),
                    strict=True,
                )
            )
            local[found.reduce.result] = point.add(memref.LoadOp.get(tile, [point.const(r), c]))
            for op in body.ops:
                if op is not found.reduce and not isinstance(op, loop.YieldOp):
                    point.put(op.clone(value_mapper=local))
            point.put(scf.YieldOp())

    def _vector_epilogue(
        self,
        em: _Emitter,
        mapping: Mapping,
        row_values: Sequence[SSAValue],
        column0: SSAValue,
        tile: SSAValue,
    ) -> None:
        """The epilogue of a full tile, `lanes` columns at a time (tile_epilogue.py)."""
        found = self.found
        halves: list[Mapping] = []
        for h in range(self.nr // self.lanes):
            column = em.add(arith.AddiOp(column0, em.const(h * self.lanes)))
            split = em.split(column, self._dims(found.columns))
            halves.append(dict(zip(found.args(found.columns), split, strict=True)))
        for r, row in enumerate(row_values):
            rows = dict(
                zip(found.args(found.rows), em.split(row, self._dims(found.rows)), strict=True)
            )
            for h, columns in enumerate(halves):
                sums = em.add(
                    vector.LoadOp(tile, [em.const(r), em.const(h * self.lanes)], self.vec)
                )
                emit_vector_epilogue(
                    em.block, found, {**mapping, **rows, **columns}, sums, self.lanes
                )


@dataclass(frozen=True)
class TileMatmulPass(ModulePass):
    """Matmul and convolution nests of loop kernels to tiled, vectorised GEMM micro-kernels
    (CPU)."""

    name = "loop-tile-matmul"

    threads: bool = False
    """Split packing and row blocks over threads (scf.parallel)."""

    lanes: int = 8
    """f32 lanes of the target's vector registers: 8 (AVX2), 16 (AVX-512)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        added: dict[str, int] = {}
        constants = constant_arguments(op)
        for kernel in [k for k in op.ops if isinstance(k, loop.KernelOp)]:
            before = len(kernel.body.block.args)
            positions = constants.get(kernel.sym_name.data, set())
            for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
                found = match_contraction(nest)
                if found is not None:
                    _Tiler(found, self.threads, positions, self.lanes).emit()
            if len(kernel.body.block.args) > before:
                added[kernel.sym_name.data] = before
        for call in [c for c in op.walk() if isinstance(c, loop.CallOp)]:
            first = added.get(call.callee.string_value())
            if first is not None:
                _pass_scratch(call, first)


def _pass_scratch(call: loop.CallOp, first: int) -> None:
    """Gives `call` host scratch buffers for its kernel's arguments from `first` on (the
    packed operands): new arguments of the calling function, counted in its
    `graphfuse.scratch`, so the caller allocates them once, not every call."""
    function = call.parent_op()
    assert isinstance(function, func.FuncOp)
    kernel = SymbolTable.lookup_symbol(call, call.callee)
    assert isinstance(kernel, loop.KernelOp)
    block = function.body.block
    buffers = list(call.buffers)
    for typ in kernel.arg_types[first:]:
        buffers.append(block.insert_arg(typ, len(block.args)))
    Rewriter.replace_op(call, loop.CallOp(call.callee.string_value(), buffers))
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [])
    count = function.attributes.get(abi.SCRATCH)
    if isinstance(count, IntegerAttr):
        added = len(kernel.arg_types) - first
        function.attributes[abi.SCRATCH] = IntegerAttr(count.value.data + added, i64)
