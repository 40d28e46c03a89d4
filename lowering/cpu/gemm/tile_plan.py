"""What loop-tile-matmul decides for one GEMM before it emits anything.

The tile and panel sizes, which operands are packed and where (up front, once for
constants, or by the task that reads them), how B's panels are read (along B's rows, by
8x8 transposes, or point by point) and how the work is cut into parallel tasks: a pure
function of the matched contraction and the pass options, so the packing and tile code
(operand_packing.py, tile_kernels.py) only follow it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import Float32Type, MemRefType, VectorType, f32
from xdsl.ir import Attribute, SSAValue

from graphfuse.lowering.cpu.gemm.contractions import Contraction, factor, reads_constants
from graphfuse.lowering.cpu.gemm.row_panels import RowRun, row_run
from graphfuse.lowering.cpu.gemm.task_balance import finish, task_costs
from graphfuse.lowering.cpu.gemm.transposed_pack import TransposedRun, transposable_load
from graphfuse.lowering.cpu.nest_indices import constant

PACK_PANELS = 16
"""Panels of B packed by one task: rows of B are read in runs of 256 floats."""
MIN_PACK_TASKS = 4
"""On threads, B's packing is cut into at least this many tasks where it has the panels
for them (fewer panels to a task, shorter runs of B's rows): as one task, a 3x3
convolution's im2col on 14x14 images (7 panels of 2304 x 32) ran on one thread while the
other waited (perf: 6% of the samples serial or spinning); in 4 tasks the layer took
1086 us against 1112 on 2 threads."""
MR = 6
"""Rows of a register tile: its 2 * MR vector accumulators (12 ymm of AVX2's 16) leave
room for the two B vectors and A's broadcast. On AVX-512 targets (lanes = 16) the same 12
accumulators are 32 columns wide and use 15 of the 32 zmm registers; a 12-row tile would
use 27."""
DOT_COLUMNS = 4
"""At most this many columns past a last panel's vectors are computed as dot products."""
MAX_TILES_PER_TASK = 16
"""A row block has at least this many row tiles where it has them (ROW_BLOCK_A_BYTES):
they share each B panel from L2."""
ROW_BLOCK_A_BYTES = 1 << 22
"""A row block takes as many row tiles as keep its A rows (f32, all of K) within this
many bytes (MAX_TILES_PER_TASK at least), in blocks of even size; A's block is read
again per panel, from L3. Where B is a model's weights (packed once and, in a large
model, evicted from every cache by the next call), the first tile over a panel reads it
from memory at a fifth of the FMA rate, and more tiles share that read: BERT-base 196.8
-> 189.3 ms (its feed-forward GEMM 512 x 3072 x 768 in 16-tile row blocks lost 6% with
its weights flushed from cache, onnxruntime nothing). Where B is computed (a
convolution's input), one row block lets each task pack its own panels right before its
tiles read them, with no packing pass through L3 before: ResNet-50 19.56 -> 19.30 ms."""
STORE_BOUND_K = 64
"""A GEMM with a computed B and K up to this keeps row blocks of MAX_TILES_PER_TASK where
its tasks' panels then fit ROWS_OUTER_B_BYTES: such a GEMM is bound by its stores, which
row tiles run across the panels write as streams (attention's 1500 x 64 @ 64 x 1500
scores per head: 3317 us so, 3422 in one row block)."""
MIN_TASKS = 8
"""Fewer tiles per task on short threaded GEMMs, so both cores still get work (a GEMM on
the calling thread is cut into row blocks only)."""
MOST_OWN_PACKING_TASKS = 16
"""The cap on tasks in place of MIN_TASKS where each task packs its own panels (one row
block): more of them cost no packing, and their equal blocks of panels balance better
(ResNet-50's 3x3 convolution on 64 x 56 x 56: 98 panels as 14 tasks of 7, not 7 of 13
and one of 7; 1170 -> 1121 us on 2 threads)."""
MACS_PER_TASK = 1 << 18
"""A short GEMM is cut into no more tasks than it has this many multiply-adds (two at
least): each task packs its own B panels and takes its chunk from the shared loop
counter, which on a tiny ResNet's 3x3 convolutions (150-300 k multiply-adds) cost more
than the balance eight tasks buy. Past that, finer tasks shorten the wait at the end of
each GEMM for the other thread's last task: MobileNetV2's 1x1 convolutions (1-8 M
multiply-adds) went from 8-9 tasks to 16 with 256 Ki here instead of 512 Ki, and the
model from 1875-1950 to 1840-1894 us (2 threads, alternating; 128 Ki: 1863 us);
ResNet-50, MobileViT, DistilBERT, Swin-T and ConvNeXt-tiny moved by 0.5% or less."""
MIN_THREADED_MACS = 1 << 17
"""GEMMs with fewer multiply-adds (batch points included) run on the calling thread: a
tiny ResNet's 3x3 convolutions of 150-300 k multiply-adds (3-6 us) took as long or longer
on 2 threads, whose fork and join cost more than the second core saved."""
ROWS_OUTER_B_BYTES = 1 << 19
"""A task whose packed B panels take at most this many bytes (half a 1 MiB L2) runs each
row tile across them. Whisper's scores (1500 x 64 @ 64 x 1500 per head: 47 panels of
8 KiB) took 11.1 ms with the panels outside, writing a tile's 12 lines a row apart at a
time, and 8.3 ms this way (onnxruntime: 8.6); past L2 each tile would read the panels
from L3."""
BALANCE_GAIN = 0.03
"""A threaded split is cut again for the team (task_balance.py) where another cut of its
rows and panels would end this much sooner in the simulated schedule."""


@dataclass(frozen=True)
class TilePlan:
    """How one matched nest is packed, tiled and split into tasks: data only (making it
    emits nothing), which the packing and tile code follow."""

    found: Contraction
    threads: bool
    """Tasks and packing run as scf.parallel (else scf.for)."""
    lanes: int
    """f32 lanes of a vector register; a tile row is two of them."""
    batch_args: Sequence[SSAValue]
    batch_shape: Sequence[int]
    a_batched: bool
    b_batched: bool
    a_in_place: tuple[SSAValue, SSAValue] | None
    """A's row and reduction indices when the tiles read A where it is, else None."""
    a_constant: bool
    b_constant: bool
    """The operand reads only constants: packed on the first call only."""
    b_in_task: bool
    """Each task packs its own panels right before its tiles read them, one at a time,
    into a slot of its own (Bp[task][0]) that stays in cache for the panel's tiles."""
    per_task: int
    """Full row tiles per row block."""
    row_blocks: int
    panels_per_task: int
    panel_blocks: int
    b_columns_fastest: bool
    """B's memory runs along the columns (a matmul's B[k, n]), not along k."""
    b_rows: RowRun | None
    """B's full panels are packed by vector loads along its rows (row_panels.py)."""
    b_transposed: TransposedRun | None
    """B's full panels are packed by 8x8 transposes along this run (transposed_pack.py)."""

    @property
    def rows_outer(self) -> bool:
        """Each row tile runs across the task's panels (the panels' loop inside the
        rows'): the tile's MR output rows are then written as MR streams along their
        columns, not a tile's worth of lines a row apart each time. Taken where the task's
        packed panels (f32) fit ROWS_OUTER_B_BYTES and are not packed inside the task."""
        return _rows_outer(self.b_in_task, self.panels_per_task, self.found.k, self.lanes)

    @property
    def nr(self) -> int:
        """Panel width: a tile row is two vector registers."""
        return 2 * self.lanes

    @property
    def vec(self) -> VectorType[Float32Type]:
        """A vector register of f32."""
        return VectorType(f32, [self.lanes])

    @property
    def panels(self) -> int:
        return -(-self.found.n // self.nr)

    @property
    def last_columns(self) -> int:
        """Columns of the last panel below N."""
        return _last_columns(self.found.n, self.lanes)

    @property
    def dot_columns(self) -> int:
        """The last panel's columns past its last full vector when there are at most
        DOT_COLUMNS of them (at AVX-512, N = 49 is 32 + 16 + 1 and N = 196 is 6 x 32 + 4;
        at AVX2, N = 49 is 3 x 16 + 1): each is computed by dot
        products along K (a vector of A's row times one of B's packed column), MR * K /
        lanes multiply-adds, not the MR * K of one more vector of tile columns."""
        return _last_panel(self.found.n, self.lanes)[1]

    @property
    def last_panel_vectors(self) -> int:
        """Vector registers a tile row of the last panel needs: the vectors its columns
        below N fill, those past them taken by dot products or by one more vector (N = 44
        at AVX-512 is 32 + 12 columns: the last panel's tiles are 16 wide, not 32)."""
        return _last_panel(self.found.n, self.lanes)[0]

    @property
    def special_last(self) -> bool:
        """The last panel's tiles differ from the others' (narrower or with dot columns)."""
        return self.last_panel_vectors < 2 or self.dot_columns > 0

    @property
    def paired_rows(self) -> bool:
        """The last panel's tiles are one vector wide and there are two full row tiles or
        more: the row tiles then go in pairs, and over that panel a pair is one tile of
        2 * MR rows (tile_kernels.py). A tile of MR rows and one vector holds only MR
        accumulators, fewer than the multiply-adds a core keeps in flight (latency times
        pipes: 4 x 2 on Zen 4/5 and recent Intel cores), and loads an A broadcast per
        multiply-add. A 1x1 convolution 960 -> 320 on 7x7 (N = 49 = 32 + 16 + 1), 2
        threads: 80.3 us with single tiles, 75.9 paired; 6x8 (N = 48): 73.8, 70.1."""
        return self.special_last and self.last_panel_vectors == 1 and self.found.m >= 2 * MR

    @property
    def tile_rows(self) -> int:
        """Rows of the largest tile: 2 * MR where rows go in pairs."""
        return 2 * MR if self.paired_rows else MR

    @property
    def dot_panel(self) -> int:
        """Bp's panel (in a slot) that holds the dot columns, each along K: one past the
        panels (past a task's one panel when the tasks pack B)."""
        return 1 if self.b_in_task else self.panels

    @property
    def points(self) -> int:
        """Batch points."""
        return math.prod(self.batch_shape)

    @property
    def tasks(self) -> int:
        return self.points * self.row_blocks * self.panel_blocks

    def dims(self, dims: Sequence[int]) -> list[int]:
        """The nest's extents of `dims`."""
        return [self.found.nest.shape[d] for d in dims]

    @property
    def slot_counts(self) -> tuple[int, int]:
        """Slots of Ap and Bp: one per batch point when the operand has a batch, else 1;
        Bp packed in the tasks has one slot per task."""
        b_slots = self.tasks if self.b_in_task else self.points if self.b_batched else 1
        return (self.points if self.a_batched else 1, b_slots)

    @property
    def pack_panels(self) -> int:
        """Panels of B one task of the packing pass packs: PACK_PANELS, fewer where that
        leaves less than MIN_PACK_TASKS tasks on threads."""
        if not self.threads:
            return PACK_PANELS
        groups = -(-MIN_PACK_TASKS // self.slot_counts[1])
        return max(1, min(PACK_PANELS, -(-self.panels // groups)))

    def packed_types(self) -> tuple[MemRefType[Attribute], MemRefType[Attribute]]:
        """The packed operands' buffers: Ap[slots][M][K] and Bp[slots][N/NR][K][NR]
        (Bp[tasks][1][K][NR] when the tasks pack it: one panel at a time)."""
        found = self.found
        a_slots, b_slots = self.slot_counts
        panels = 1 if self.b_in_task else self.panels
        if self.dot_columns:
            panels += 1
        return (
            MemRefType(f32, [a_slots, found.m, found.k]),
            MemRefType(f32, [b_slots, panels, found.k, self.nr]),
        )


@dataclass(frozen=True)
class _Split:
    """How a GEMM's rows and panels are cut into tasks, for a given row block size."""

    per_task: int
    row_blocks: int
    b_in_task: bool
    threaded: bool
    panels: int
    panels_per_task: int

    @staticmethod
    def of(
        found: Contraction,
        full: int,
        per_task: int,
        b_batched: bool,
        b_constant: bool,
        threads: bool,
        lanes: int,
        workers: int,
    ) -> _Split:
        """Row blocks of `per_task` of the `full` row tiles; then, on threads, the panels
        are split too, until there is a task per MACS_PER_TASK (two at least, MIN_TASKS at
        most), and the cut balanced for a team of `workers` threads. The row tail joins
        the last block."""
        points = math.prod(found.nest.shape[d] for d in found.batch)
        row_blocks = max(1, -(-full // per_task))
        # With one row block (and B per batch point, or one point) every panel belongs to
        # one task: that task packs it right before its tiles use it (from L2), not a pass
        # over all of B before (through memory when B's panels outgrow the cache, and one
        # more fork and join).
        b_in_task = row_blocks == 1 and (b_batched or points == 1) and not b_constant
        panels = -(-found.n // (2 * lanes))
        macs = found.m * found.n * found.k * points
        threaded = threads and macs >= MIN_THREADED_MACS
        most = MOST_OWN_PACKING_TASKS if b_in_task else MIN_TASKS
        fewest = max(2, min(most, macs // MACS_PER_TASK)) if threaded else 1
        wanted = -(-fewest // (points * row_blocks))
        vectors = points * (2 * (panels - 1) + _last_panel(found.n, lanes)[0])
        uneven = points * panels == 1 or vectors % 2 == 1
        if threaded and row_blocks == 1 and points * panels < fewest and full > 1 and uneven:
            # Few panels whose work (in vectors of columns) does not split evenly in two:
            # one panel (32 x 32 from a 4x4 image pair), or a narrow last one (a 7x7
            # layer's N = 49 is a panel of 32 and one of 16 and a dot column). The row
            # tiles are split in two as well, and the halves balance. A computed B is
            # packed by each task for its own panel: packing it twice costs less than a
            # pass over B before the tasks, with its own fork and join. 1x1 convolution
            # 960 -> 320 on 7x7, 2 threads: 87 -> 76 us (the 32-column panel's task had
            # run alone while the other thread, done with the 16 columns, waited); an
            # even split is left as it is (8x8, N = 64: 86 us, 89 with its rows split).
            per_task = -(-full // 2)
            row_blocks = -(-full // per_task)
            wanted = -(-fewest // (points * row_blocks))
        panels_per_task = -(-panels // min(panels, max(1, wanted)))
        split = _Split(per_task, row_blocks, b_in_task, threaded, panels, panels_per_task)
        return split.balanced(found, lanes, workers) if threaded and workers > 1 else split

    def costs(self, found: Contraction, lanes: int) -> list[float]:
        """Each task's work in task order, in rows times vectors of columns
        (task_balance.py)."""
        full = found.m // MR
        tiles = [min(self.per_task, full - b * self.per_task) for b in range(self.row_blocks)]
        rows = [MR * t for t in tiles]
        rows[-1] += found.m % MR
        vectors, dots = _last_panel(found.n, lanes)
        panel = [2.0] * (self.panels - 1) + [vectors + dots / lanes]
        step = self.panels_per_task
        blocks = [sum(panel[p : p + step]) for p in range(0, self.panels, step)]
        points = math.prod(found.nest.shape[d] for d in found.batch)
        return task_costs(points, rows, blocks, MR if self.b_in_task else 0)

    def balanced(self, found: Contraction, lanes: int, workers: int) -> _Split:
        """This split, or where it leaves threads idle at its end, the cut of rows (into
        as many blocks as here, up to twice as many) and of panels that ends soonest in
        the simulated schedule, with the fewest tasks of those within 1% of that: as many
        tasks as here at least (what MIN_TASKS and MACS_PER_TASK ask for), twice as many
        at most. Taken where it ends BALANCE_GAIN sooner than this one."""
        costs = self.costs(found, lanes)
        now = finish(costs, workers)
        if now <= (1 + BALANCE_GAIN) * sum(costs) / workers:
            return self
        full = found.m // MR
        tasks = self.row_blocks * -(-self.panels // self.panels_per_task)
        cuts: list[tuple[float, int, _Split]] = []
        for blocks in range(self.row_blocks, min(full, 2 * self.row_blocks) + 1):
            per_task = -(-full // blocks)
            row_blocks = -(-full // per_task)
            for step in sorted({-(-self.panels // p) for p in range(1, self.panels + 1)}):
                count = row_blocks * -(-self.panels // step)
                if tasks <= count <= 2 * tasks:
                    cut = replace(
                        self, per_task=per_task, row_blocks=row_blocks, panels_per_task=step
                    )
                    cuts.append((finish(cut.costs(found, lanes), workers), count, cut))
        if not cuts:
            return self
        best = min(end for end, _, _ in cuts)
        _, _, chosen = min((c for c in cuts if c[0] <= best * 1.01), key=lambda c: (c[1], c[0]))
        return chosen if best <= (1 - BALANCE_GAIN) * now else self

    def rows_outer(self, k: int, lanes: int) -> bool:
        """TilePlan.rows_outer for this split."""
        return _rows_outer(self.b_in_task, self.panels_per_task, k, lanes)


def _last_columns(n: int, lanes: int) -> int:
    """Columns of the last panel (2 * `lanes` wide) below N = `n`."""
    return n - (-(-n // (2 * lanes)) - 1) * 2 * lanes


def _last_panel(n: int, lanes: int) -> tuple[int, int]:
    """The vectors and dot columns of the last panel's tiles for N = `n` (TilePlan's
    `last_panel_vectors` and `dot_columns`)."""
    last = _last_columns(n, lanes)
    rest = last % lanes
    dots = rest if rest <= DOT_COLUMNS and n > rest else 0
    return -(-(last - dots) // lanes), dots


def _rows_outer(b_in_task: bool, panels_per_task: int, k: int, lanes: int) -> bool:
    """A task's packed panels (f32, 2 * lanes wide) fit ROWS_OUTER_B_BYTES and are not
    packed inside the task (TilePlan.rows_outer)."""
    return not b_in_task and panels_per_task * k * 2 * lanes * 4 <= ROWS_OUTER_B_BYTES


def plan_tiling(
    found: Contraction, threads: bool, constants: set[SSAValue], lanes: int, workers: int
) -> TilePlan:
    """The plan for `found`, its tasks balanced for `workers` threads; `constants` are the
    kernel's arguments every caller fills with a constant."""
    batch_args = found.args(found.batch)
    batch_shape = [found.nest.shape[d] for d in found.batch]
    b_batched = any(x in found.b.depends for x in batch_args)
    b_constant = reads_constants(found.b, constants)
    full = found.m // MR
    per_task = _tiles_per_task(found, full)
    split = _Split.of(found, full, per_task, b_batched, b_constant, threads, lanes, workers)
    if not b_constant and found.k <= STORE_BOUND_K:
        # A short K keeps 16-tile row blocks where their row tiles run across the panels.
        most = min(full, MAX_TILES_PER_TASK) or 1
        short = _Split.of(found, full, most, b_batched, False, threads, lanes, workers)
        if short.rows_outer(found.k, lanes):
            split = short
    columns_fastest = _columns_fastest(found)
    return TilePlan(
        found=found,
        threads=split.threaded,
        lanes=lanes,
        batch_args=batch_args,
        batch_shape=batch_shape,
        a_batched=any(x in found.a.depends for x in batch_args),
        b_batched=b_batched,
        a_in_place=_a_in_place(found, batch_args),
        a_constant=reads_constants(found.a, constants),
        b_constant=b_constant,
        b_in_task=split.b_in_task,
        per_task=split.per_task,
        row_blocks=split.row_blocks,
        panels_per_task=split.panels_per_task,
        panel_blocks=-(-split.panels // split.panels_per_task),
        b_columns_fastest=columns_fastest,
        b_rows=row_run(found, lanes) if columns_fastest else None,
        b_transposed=None if columns_fastest else transposable_load(found),
    )


def _tiles_per_task(found: Contraction, full: int) -> int:
    """Full row tiles per row block, of `full`: as many as ROW_BLOCK_A_BYTES of A rows
    hold (MAX_TILES_PER_TASK at least), the blocks made even (85 tiles in two blocks:
    43 and 42, not 56 and 29)."""
    most = max(MAX_TILES_PER_TASK, ROW_BLOCK_A_BYTES // (4 * found.k * MR))
    blocks = -(-full // most)
    return -(-full // blocks) if full else 1


def _a_in_place(
    found: Contraction, batch_args: Sequence[SSAValue]
) -> tuple[SSAValue, SSAValue] | None:
    """A's row and reduction indices when A is a buffer read at [batch..., m, k] with m
    and k the GEMM's single row and reduction index, last, and the leading indices batch
    indices or constants (the 0 of a size-1 dimension, as attention's [1, heads, S, S]
    scores are read): its rows are then already Ap's rows (k contiguous), and the tiles
    read it where it is instead of from a packed copy (as BLAS SGEMM reads A). None when
    A must be packed."""
    load = found.a.direct_load()
    rows = found.args(found.rows)
    reduction = found.reduce.body.block.args
    if load is None or len(rows) != 1 or len(reduction) != 1:
        return None
    indices = list(load.indices)
    leading = indices[: len(indices) - 2]
    if indices[-2:] != [rows[0], reduction[0]]:
        return None
    if not all(i in batch_args or constant(i) is not None for i in leading):
        return None
    return rows[0], reduction[0]


def _columns_fastest(found: Contraction) -> bool:
    """Whether B's memory runs along the columns (its last load index moves with
    them, as a matmul's B[k, n]) rather than along k (a convolution's NHWC input)."""
    loads = found.b.loads
    if len(loads) != 1:
        return True
    last = factor(loads[0].indices[-1], found.nest)
    columns = set(found.args(found.columns))
    return last is None or bool(last.depends & columns) or loads[0].indices[-1] in columns
