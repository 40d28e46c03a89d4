"""A kernel's NCHW -> NHWC operand copy through 8x8 transposes.

A convolution computed as a tiled GEMM reads its input from a padded channels-last copy,
and a depthwise convolution vectorised across channels reads one too
(convert-graph-to-loop, padded_copies.py, depthwise.py). Their interior copy is a nest
storing `P[n, h + t, w + l, c] = X[n, c, h, w]`. Vectorised along the channels, each
vector of X is a gather of floats H x W apart (5% of a 3x3 [1,64,56,56] layer, 12% of a
7x7 depthwise one). Here the copy reads 8 channels x 8 points of a row as 8 vector loads
along the row, transposes them in registers (transposed_pack.py) and stores 8 vectors of
8 channels, one per point. The last block of a row starts 8 before its end (overlapping
the one before, which writes the same values), so rows of 8 or more points work. Rows
narrower than that (7x7 planes) are read as one run of H x W points per plane instead, each
point's vector of channels stored at its own (h, w).

Taken when a top-level nest of the kernel does only that (one load of a kernel argument,
stored unchanged into another at constant offsets along h and w), with channels a multiple
of 8 and planes of at least 8 points. A copy too small to pay for worker threads runs on
the calling thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute, Block, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.channels_last_stores import collapse
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder
from graphfuse.lowering.cpu.gemm.transposed_pack import BLOCK, block_start, transposed_block
from graphfuse.lowering.cpu.nest_indices import constant, pair
from graphfuse.lowering.loop_to_upstream.convert_loop_to_upstream import PARALLEL_MIN_WORK


@dataclass(frozen=True)
class _Copy:
    nest: loop.ParallelOp
    load: loop.LoadOp
    store: loop.StoreOp
    extents: tuple[int, int, int, int]
    """N, C, H, W of the source."""
    offsets: tuple[int, int]
    """t and l: where the source's (0, 0) lands in the copy."""


def _offset(index: SSAValue, args: tuple[SSAValue, ...]) -> tuple[SSAValue, int] | None:
    """(arg, c) when `index` is a nest index plus a constant c >= 0 (c = 0: the index)."""
    if index in args:
        return index, 0
    shifted = pair(index.owner, arith.AddiOp) if isinstance(index.owner, Operation) else None
    return shifted if shifted is not None and shifted[0] in args and shifted[1] >= 0 else None


def _f32_argument(buffer: SSAValue) -> bool:
    typ = buffer.type
    return (
        isinstance(buffer.owner, Block)
        and isinstance(typ, MemRefType)
        and cast(MemRefType[Attribute], typ).get_element_type() == f32
    )


def _load_store(nest: loop.ParallelOp) -> tuple[loop.LoadOp, loop.StoreOp] | None:
    """The nest's load and the store of its value, when that is all it does (besides
    index constants and additions), between f32 kernel arguments, at rank 4."""
    ops = list(nest.body.block.ops)
    loads = [op for op in ops if isinstance(op, loop.LoadOp)]
    stores = [op for op in ops if isinstance(op, loop.StoreOp)]
    allowed = arith.ConstantOp | arith.AddiOp | loop.YieldOp | loop.LoadOp | loop.StoreOp
    if len(loads) != 1 or len(stores) != 1 or len(nest.shape) != 4:
        return None
    if any(op.regions or not isinstance(op, allowed) for op in ops):
        return None
    load, store = loads[0], stores[0]
    if store.value is not load.result or len(load.indices) != 4 or len(store.indices) != 4:
        return None
    if not (_f32_argument(load.buffer) and _f32_argument(store.buffer)):
        return None
    return load, store


def _match(nest: loop.ParallelOp) -> _Copy | None:
    found = _load_store(nest)
    if found is None:
        return None
    load, store = found
    args = tuple(nest.body.block.args)
    n, c, h, w = load.indices
    if not all(i in args for i in (c, h, w)) or len({c, h, w}) != 3:
        return None
    if store.indices[0] is not n or store.indices[3] is not c or not _batch_index(n, args):
        return None
    row, column = (_offset(i, args) for i in store.indices[1:3])
    if row is None or column is None or (row[0], column[0]) != (h, w):
        return None
    extent: dict[SSAValue, int] = dict(zip(args, nest.shape, strict=True))
    extents = (extent[n] if n in args else 1, extent[c], extent[h], extent[w])
    if extents[1] % BLOCK or extents[2] * extents[3] < BLOCK:
        return None
    return _Copy(nest, load, store, extents, (row[1], column[1]))


def transpose_copies(kernel: loop.KernelOp, threads: bool) -> None:
    """Rewrites each top-level NCHW -> NHWC copy nest of `kernel` (see the module's doc)."""
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        found = _match(nest)
        if found is not None:
            _rewrite(found, threads)


def _rewrite(found: _Copy, threads: bool) -> None:
    width = found.extents[3]
    em = GemmBuilder()
    count, task = _plane_blocks(found, em) if width < BLOCK else _row_blocks(found)
    # A copy too small to pay for worker threads stays on the calling thread, as
    # convert-loop-to-upstream keeps such nests serial.
    em.parallel(count, threads and math.prod(found.extents) >= PARALLEL_MIN_WORK, task)
    parent = found.nest.parent_block()
    assert parent is not None
    for op in em.take():
        parent.insert_op_before(op, found.nest)
    found.nest.detach()
    found.nest.erase()


Task = Callable[[GemmBuilder, SSAValue], None]


def _row_blocks(found: _Copy) -> tuple[int, Task]:
    """Tasks of 8 channels x 8 points of a row (rows of 8 points or more)."""
    batch, channels, rows, width = found.extents
    top, left = found.offsets
    source, target = found.load.buffer, found.store.buffer
    row_blocks = -(-width // BLOCK)
    per_image = rows * (channels // BLOCK) * row_blocks

    def task(body: GemmBuilder, number: SSAValue) -> None:
        image, rest = body.divide(number, per_image)
        rest, block = body.divide(rest, row_blocks)
        row, channel_block = body.divide(rest, channels // BLOCK)
        first = block_start(body, block, width)
        channel = block_start(body, channel_block, channels)
        target_row = body.emit(arith.AddiOp(row, body.index(top)))
        target_first = body.emit(arith.AddiOp(first, body.index(left)))
        transposed_block(
            body,
            source,
            lambda j: [image, body.emit(arith.AddiOp(channel, body.index(j))), row, first],
            target,
            lambda i: [
                image,
                target_row,
                body.emit(arith.AddiOp(target_first, body.index(i))),
                channel,
            ],
        )

    return batch * per_image, task


def _plane_blocks(found: _Copy, em: GemmBuilder) -> tuple[int, Task]:
    """Tasks of 8 channels x 8 points of a plane read as one run of H x W points (rows
    narrower than 8, as 7x7 planes): each point's vector of channels is stored at its own
    (h, w), the last block of a plane overlapping the one before."""
    batch, channels, rows, width = found.extents
    top, left = found.offsets
    points = rows * width
    source = em.emit(collapse(found.load.buffer, [[0], [1], [2, 3]], [batch, channels, points]))
    target = found.store.buffer
    point_blocks = -(-points // BLOCK)
    per_image = (channels // BLOCK) * point_blocks

    def task(body: GemmBuilder, number: SSAValue) -> None:
        image, rest = body.divide(number, per_image)
        channel_block, block = body.divide(rest, point_blocks)
        first = block_start(body, block, points)
        channel = block_start(body, channel_block, channels)

        def at(i: int) -> list[SSAValue]:
            row, column = body.divide(body.emit(arith.AddiOp(first, body.index(i))), width)
            return [
                image,
                body.emit(arith.AddiOp(row, body.index(top))),
                body.emit(arith.AddiOp(column, body.index(left))),
                channel,
            ]

        transposed_block(
            body,
            source,
            lambda j: [image, body.emit(arith.AddiOp(channel, body.index(j))), first],
            target,
            at,
        )

    return batch * per_image, task


def _batch_index(n: SSAValue, args: tuple[SSAValue, ...]) -> bool:
    """The copy's batch index is a nest index or a constant 0 (a batch of 1)."""
    return n in args or constant(n) == 0
