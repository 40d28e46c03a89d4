"""loop-tile-matmul: a matmul loop nest becomes a register-tiled, vectorised micro-kernel,
with the kernel's fused epilogue applied to each tile while it is in cache.

convert-graph-to-loop writes `C = epilogue(A @ B)` as one nest over the output points with
a `loop.reduce add` over K inside: a dot product per point. LLVM vectorises the dot
product but reuses nothing between points, so each point streams a row of A and a column
of B through the cache, about 20 GFLOP/s at 2048^3 on this VM's two cores. This pass
rewrites such a nest the way BLAS libraries compute a GEMM (Goto's algorithm):

- B is packed once (per batch, when B has one) into panels of NR = 16 columns,
  `Bp[N/16][K][16]`, zero-padded, so the inner loop reads 16 consecutive floats per k;
- the output is cut into tiles of MR = 6 rows x 16 columns. A tile's 96 sums live in 12
  vector registers (vector<8xf32>) for the whole K loop: per k, two vector loads of the B
  panel, six broadcasts of A, twelve fused multiply-adds, nothing stored;
- the finished tile is written to a small stack buffer and the epilogue (bias, activation,
  residual add: the nest's body after the reduction, unchanged) runs over its points,
  reading the sums from L1 and storing the results;
- blocks of up to 16 row tiles, for every batch, are the iterations of one `scf.parallel`
  (split over the cores by mlir-opt's async-parallel-for), each walking all panels over
  its rows, so a panel is reused across up to 96 rows from L2; short matmuls get smaller
  blocks so that there are at least 8. Rows left over (M mod 6) get a narrower tile.

Measured in a prototype on this VM (2 threads): 145 GFLOP/s at 2048^3 and 139 at 1024^3,
against onnxruntime's 138 and 124 (bench/bench_gemm.py gives the current figures).

The nest qualifies when its body holds exactly one `loop.reduce add` over one dimension of
f32 whose body is `load A[..., m, k] * load B[..., k, n]` (m and n the nest's last two
indices; leading indices nest indices or constants), and nothing else with a region.
Everything else is left for convert-loop-to-upstream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IndexType,
    ModuleOp,
    VectorType,
    f32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from graphfuse.dialects import loop
from graphfuse.lowering.gpu_indexing import delinearize, index

MR = 6
NR = 16
LANES = 8
MAX_TILES_PER_TASK = 16
"""A task's row tiles share each B panel from L2 (16 tiles: 96 rows)."""
MIN_TASKS = 8
"""Fewer tiles per task on short matmuls, so both cores still get work."""
MIN_FLOPS = 1 << 16
"""Smaller matmuls keep the dot-product form (packing would cost more than it saves)."""

_VEC = VectorType(f32, [LANES])


@dataclass(frozen=True)
class _Matmul:
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    a: loop.LoadOp
    b: loop.LoadOp

    @property
    def m(self) -> int:
        return self.nest.shape[-2]

    @property
    def n(self) -> int:
        return self.nest.shape[-1]

    @property
    def k(self) -> int:
        return self.reduce.shape[0]


def _outer_index(value: SSAValue, batch_args: Sequence[SSAValue]) -> bool:
    """An index a batch dimension may use: a batch index of the nest, or a constant."""
    return value in batch_args or isinstance(value.owner, arith.ConstantOp)


def match(nest: loop.ParallelOp) -> _Matmul | None:
    """The matmul in `nest`, if it has the shape this pass tiles."""
    shape, body = nest.shape, nest.body.block
    regions = [op for op in body.ops if op.regions]
    if len(shape) < 2 or len(regions) != 1 or not isinstance(regions[0], loop.ReduceOp):
        return None
    reduce = regions[0]
    if reduce.kind.data != loop.ReduceKind.ADD or len(reduce.shape) != 1:
        return None
    init = reduce.init.owner
    inside = nest.is_ancestor(init) if isinstance(init, Operation) else init.parent_op() is nest
    if not isinstance(reduce.result.type, Float32Type) or inside:
        return None
    if math.prod(shape) * reduce.shape[0] < MIN_FLOPS:
        return None
    ops = list(reduce.body.block.ops)
    if len(ops) != 4 or not isinstance(ops[2], arith.MulfOp):
        return None
    first, second, product, end = ops
    if not (
        isinstance(first, loop.LoadOp)
        and isinstance(second, loop.LoadOp)
        and isinstance(end, loop.YieldOp)
        and tuple(end.values) == (product.results[0],)
        and {product.operands[0], product.operands[1]} == {first.result, second.result}
    ):
        return None
    k = reduce.body.block.args[0]
    m_index, n_index, batch = body.args[-2], body.args[-1], body.args[:-2]
    for a, b in ((first, second), (second, first)):
        if (
            len(a.indices) >= 2
            and len(b.indices) >= 2
            and a.indices[-2:] == (m_index, k)
            and b.indices[-2:] == (k, n_index)
            and all(_outer_index(i, batch) for i in (*a.indices[:-2], *b.indices[:-2]))
        ):
            return _Matmul(nest, reduce, a, b)
    return None


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


class _Tiler:
    """Emits the tiled computation of one matched nest in place of it."""

    def __init__(self, found: _Matmul, threads: bool):
        self.found = found
        self.threads = threads
        self.panels = -(-found.n // NR)
        self.batch_args = list(found.nest.body.block.args[:-2])

    def emit(self) -> None:
        found = self.found
        nest = found.nest
        parent = nest.parent_block()
        assert parent is not None
        em = _Emitter(Block())
        batch_shape = nest.shape[:-2]
        points = math.prod(batch_shape)
        b_varies = any(i in self.batch_args for i in found.b.indices[:-2])
        slots = points if b_varies else 1
        packed = memref.AllocOp.get(f32, 64, [slots, self.panels, found.k, NR])
        em.put(packed)
        self.packed = packed.memref
        self._parallel(em, slots, lambda task, slot: self._pack(task, slot, b_varies))
        full, tail = found.m // MR, found.m % MR
        self.per_task = max(1, min(MAX_TILES_PER_TASK, -(-full // MIN_TASKS)))
        blocks = -(-full // self.per_task) + (1 if tail else 0)
        self._parallel(em, points * blocks, lambda task, t: self._task(task, t, blocks, b_varies))
        em.put(memref.DeallocOp.get(self.packed))
        for op in list(em.block.ops):
            op.detach()
            parent.insert_op_before(op, nest)
        nest.detach()
        nest.erase()

    def _parallel(
        self, em: _Emitter, count: int, body: Callable[[_Emitter, SSAValue], None]
    ) -> None:
        """`body` for each of `count` iterations: an scf.parallel when threads are on and
        there are several, else an scf.for."""
        block = Block(arg_types=[IndexType()])
        task = _Emitter(block)
        body(task, block.args[0])
        bounds = (em.const(0), em.const(count), em.const(1))
        if self.threads and count > 1:
            block.add_op(scf.ReduceOp())
            em.put(scf.ParallelOp([bounds[0]], [bounds[1]], [bounds[2]], Region(block)))
        else:
            block.add_op(scf.YieldOp())
            em.put(scf.ForOp(*bounds, [], block))

    def _batch_mapping(self, em: _Emitter, point: SSAValue) -> dict[SSAValue, SSAValue]:
        """The nest's batch indices at batch point `point` (row-major)."""
        positions: list[Operation] = []
        values = delinearize(point, self.found.nest.shape[:-2], positions)
        em.block.add_ops(positions)
        return dict(zip(self.batch_args, values, strict=True))

    def _b_index(
        self, mapping: dict[SSAValue, SSAValue], k: SSAValue, n: SSAValue
    ) -> list[SSAValue]:
        lead = [mapping.get(i, i) for i in self.found.b.indices[:-2]]
        return [*lead, k, n]

    def _pack(self, em: _Emitter, slot: SSAValue, b_varies: bool) -> None:
        """Bp[slot][p][k][c] = B[batch, k, 16p + c], zero past column N."""
        found = self.found
        mapping = self._batch_mapping(em, slot) if b_varies else {}
        _, panel = em.loop(em.const(0), em.const(self.panels))
        _, row = panel.loop(panel.const(0), panel.const(found.k))
        _, lane = row.loop(row.const(0), row.const(NR))
        p, k, c = panel.block.args[0], row.block.args[0], lane.block.args[0]
        column = lane.add(arith.AddiOp(lane.add(arith.MuliOp(p, lane.const(NR))), c))
        if found.n % NR == 0:
            value = lane.add(loop.LoadOp(found.b.buffer, self._b_index(mapping, k, column)))
        else:
            inside = lane.add(arith.CmpiOp(column, lane.const(found.n), "ult"))
            then, otherwise = Block(), Block()
            load = loop.LoadOp(found.b.buffer, self._b_index(mapping, k, column))
            then.add_ops([load, scf.YieldOp(load.result)])
            zero = arith.ConstantOp(FloatAttr(0.0, f32))
            otherwise.add_ops([zero, scf.YieldOp(zero.result)])
            value = lane.add(scf.IfOp(inside, [f32], Region(then), Region(otherwise)))
        lane.put(memref.StoreOp.get(value, self.packed, [slot, p, k, c]))
        for inner in (lane, row, panel):
            inner.put(scf.YieldOp())

    def _task(self, em: _Emitter, number: SSAValue, blocks: int, b_varies: bool) -> None:
        """Task `number`: row block `number mod blocks` of batch point `number / blocks`.
        Blocks of `per_task` full tiles come first; with a row tail, the last block
        is the tail's narrower tile."""
        found = self.found
        point = em.add(arith.DivUIOp(number, em.const(blocks)))
        block = em.add(arith.RemUIOp(number, em.const(blocks)))
        mapping = self._batch_mapping(em, point)
        self.slot = point if b_varies else em.const(0)
        tile = em.add(memref.AllocaOp.get(f32, shape=[MR, NR]))
        full, tail = found.m // MR, found.m % MR
        if not tail:
            self._full_tiles(em, mapping, block, full, tile)
            return
        if not full:
            self._tail(em, mapping, tile)
            return
        is_full = em.add(arith.CmpiOp(block, em.const(blocks - 1), "ult"))
        then, otherwise = _Emitter(Block()), _Emitter(Block())
        self._full_tiles(then, mapping, block, full, tile)
        self._tail(otherwise, mapping, tile)
        then.put(scf.YieldOp())
        otherwise.put(scf.YieldOp())
        em.put(scf.IfOp(is_full, [], Region(then.block), Region(otherwise.block)))

    def _full_tiles(
        self,
        em: _Emitter,
        mapping: dict[SSAValue, SSAValue],
        block: SSAValue,
        full: int,
        tile: SSAValue,
    ) -> None:
        first = em.add(arith.MuliOp(block, em.const(self.per_task)))
        end = em.add(arith.AddiOp(first, em.const(self.per_task)))
        last = em.add(arith.MinUIOp(end, em.const(full)))
        _, panel = em.loop(em.const(0), em.const(self.panels))
        _, rows = panel.loop(first, last)
        row0 = rows.add(arith.MuliOp(rows.block.args[0], rows.const(MR)))
        self._tile(rows, mapping, row0, panel.block.args[0], MR, tile)
        rows.put(scf.YieldOp())
        panel.put(scf.YieldOp())

    def _tail(self, em: _Emitter, mapping: dict[SSAValue, SSAValue], tile: SSAValue) -> None:
        found = self.found
        _, panel = em.loop(em.const(0), em.const(self.panels))
        row0 = panel.const(found.m // MR * MR)
        self._tile(panel, mapping, row0, panel.block.args[0], found.m % MR, tile)
        panel.put(scf.YieldOp())

    def _tile(
        self,
        em: _Emitter,
        mapping: dict[SSAValue, SSAValue],
        row0: SSAValue,
        panel: SSAValue,
        rows: int,
        tile: SSAValue,
    ) -> None:
        """Sums of rows row0..row0+rows x the panel's 16 columns, then the epilogue."""
        found = self.found
        init = em.add(vector.BroadcastOp(found.reduce.init, _VEC))
        row_values = [em.add(arith.AddiOp(row0, em.const(r))) for r in range(rows)]
        halves = [em.const(h * LANES) for h in range(2)]
        for_op, step = em.loop(em.const(0), em.const(found.k), [init] * (2 * rows))
        k = step.block.args[0]
        accumulators = list(step.block.args[1:])
        b_halves = [
            step.add(vector.LoadOp(self.packed, [self.slot, panel, k, h], _VEC)) for h in halves
        ]
        lead = [mapping.get(i, i) for i in found.a.indices[:-2]]
        sums: list[SSAValue] = []
        for r, row in enumerate(row_values):
            scalar = step.add(loop.LoadOp(found.a.buffer, [*lead, row, k]))
            spread = step.add(vector.BroadcastOp(scalar, _VEC))
            for h in range(2):
                sums.append(step.add(vector.FMAOp(spread, b_halves[h], accumulators[2 * r + h])))
        step.put(scf.YieldOp(*sums))
        for r in range(rows):
            for h in range(2):
                em.put(vector.StoreOp(for_op.results[2 * r + h], tile, [em.const(r), halves[h]]))
        self._epilogue(em, mapping, row_values, panel, tile)

    def _epilogue(
        self,
        em: _Emitter,
        mapping: dict[SSAValue, SSAValue],
        row_values: Sequence[SSAValue],
        panel: SSAValue,
        tile: SSAValue,
    ) -> None:
        found = self.found
        column0 = em.add(arith.MuliOp(panel, em.const(NR)))
        columns = em.const(NR)
        if found.n % NR:
            left = em.add(arith.SubiOp(em.const(found.n), column0))
            columns = em.add(arith.MinUIOp(left, columns))
        body = found.nest.body.block
        m_index, n_index = body.args[-2], body.args[-1]
        for r, row in enumerate(row_values):
            _, point = em.loop(em.const(0), columns)
            c = point.block.args[0]
            local = dict(mapping)
            local[m_index] = row
            local[n_index] = point.add(arith.AddiOp(column0, c))
            local[found.reduce.result] = point.add(memref.LoadOp.get(tile, [point.const(r), c]))
            for op in body.ops:
                if op is not found.reduce and not isinstance(op, loop.YieldOp):
                    point.put(op.clone(value_mapper=local))
            point.put(scf.YieldOp())


@dataclass(frozen=True)
class TileMatmulPass(ModulePass):
    """Matmul nests of loop kernels to tiled, vectorised micro-kernels (CPU)."""

    name = "loop-tile-matmul"

    threads: bool = False
    """Split the row blocks over threads (scf.parallel)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, loop.KernelOp)]:
            for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
                found = match(nest)
                if found is not None:
                    _Tiler(found, self.threads).emit()
