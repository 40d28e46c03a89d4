"""Packing a convolution's im2col panels from a channels-last input 8x8 at a time.

loop-tile-matmul's B panel holds, for each reduction index k = (kh, kw, c), the 16 output
points of the panel side by side. A convolution's input copy is NHWC: for one output point
the channels c are contiguous, so a panel row (one k, 16 points) is a gather of 16 floats
C apart, slow element by element. Here the packing reads 8 channels of each of 8 points as
8 vector loads, transposes the 8x8 block in registers (unpack, shuffle and 128-bit permute
stages, the classic AVX transpose, as `vector.shuffle`s LLVM lowers to those instructions)
and stores 8 panel rows of 8 lanes.

It applies when B is one load whose last index is the reduction's innermost index itself
(no other index reads it) and that extent is a multiple of 8, to the full panels: a last
panel past N (14x14 and 7x7 layers: N = 196 or 49 a batch) is packed point by point, with
its clamps. Panels of 32 (AVX-512 targets) take their 8 columns four times, still 8x8.

A stem convolution has few channels (RGB: C = 3), too few for 8 at a time. But when the
load reads every channel of its buffer and its x index is (something) + kw, a point's
(kw, c) values are one contiguous run of KW x C floats (21 for a 7x7 stem), so the packing
transposes blocks of that run instead: blocks at 0, 8, ... and a last one ending at the
run's end (overlapping the one before: it stores the same values twice), read from the
buffer with its last two dimensions collapsed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.dialects import arith, vector
from xdsl.dialects.builtin import I64, DenseArrayBase, MemRefType, VectorType, f32, i64
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.gemm.contractions import Contraction, factor

BLOCK = 8
"""The transposed blocks are BLOCK x BLOCK floats."""


@dataclass(frozen=True)
class TransposedRun:
    """B's load whose full panels are packed by 8x8 transposes along a run of the
    reduction's innermost `dims` indices (1: the channels; 2: kw and the channels, read
    from the buffer with its last two dimensions collapsed), `length` floats long."""

    load: loop.LoadOp
    dims: int
    length: int

    @property
    def blocks(self) -> int:
        """8-float blocks covering the run (the last one may overlap the one before)."""
        return -(-self.length // BLOCK)


def transposable_load(found: Contraction) -> TransposedRun | None:
    """How B's full panels are packed by 8x8 transposes, or None when they cannot be."""
    load = found.b.direct_load()
    args = found.reduce.body.block.args
    if load is None or load.indices[-1] is not args[-1]:
        return None
    if found.reduce.shape[-1] % BLOCK == 0:
        return TransposedRun(load, 1, found.reduce.shape[-1]) if _free_of(found, load, 1) else None
    return _kw_channel_run(found, load)


def _free_of(found: Contraction, load: loop.LoadOp, dims: int) -> bool:
    """Whether no load index but the last `dims` reads the reduction's last `dims`
    indices."""
    inner = set(found.reduce.body.block.args[-dims:])
    for index in load.indices[:-dims]:
        depends = factor(index, found.nest)
        if depends is None or inner & depends.depends:
            return False
    return True


def _kw_channel_run(found: Contraction, load: loop.LoadOp) -> TransposedRun | None:
    """The (kw, c) run of a channels-last load reading all C channels at x = u + kw."""
    args, shape = found.reduce.body.block.args, found.reduce.shape
    buffer = load.buffer.type
    if len(args) < 2 or len(load.indices) < 2 or not isinstance(buffer, MemRefType):
        return None
    channels = cast(MemRefType[Attribute], buffer).get_shape()[-1]
    length = shape[-1] * shape[-2]
    if channels != shape[-1] or length < BLOCK:
        return None
    x = load.indices[-2].owner
    if not isinstance(x, arith.AddiOp) or args[-2] not in x.operands:
        return None
    base = x.rhs if x.lhs is args[-2] else x.lhs
    depends = factor(base, found.nest)
    if depends is None or set(args[-2:]) & depends.depends:
        return None
    if not _free_of(found, load, 2):
        return None
    return TransposedRun(load, 2, length)


def block_start(builder: BlockBuilder, block: SSAValue, extent: int) -> SSAValue:
    """Where 8-wide block number `block` of a run of `extent` (at least 8) starts: at
    8 x `block`, the last one at `extent` - 8, overlapping the one before (which holds the
    same values), so no run needs a masked tail."""
    start = builder.emit(arith.MuliOp(block, builder.index(BLOCK)))
    if extent % BLOCK == 0:
        return start
    return builder.emit(arith.MinUIOp(start, builder.index(extent - BLOCK)))


def transposed_block(
    builder: BlockBuilder,
    source: SSAValue,
    row: Callable[[int], Sequence[SSAValue]],
    target: SSAValue,
    column: Callable[[int], Sequence[SSAValue]],
) -> None:
    """Copies an 8x8 block transposed: 8 vectors loaded from `source` at `row`(i), the
    register transpose, and column j stored into `target` at `column`(j). (`row` may emit
    the ops its indices need; it is called in order, before any store.)"""
    typ = VectorType(f32, [BLOCK])
    rows = [builder.emit(vector.LoadOp(source, list(row(i)), typ)) for i in range(BLOCK)]
    for j, values in enumerate(transpose8(builder.emit, rows)):
        builder.add(vector.StoreOp(values, target, list(column(j))))


def shuffle_mask(values: Sequence[int]) -> DenseArrayBase[I64]:
    return DenseArrayBase.from_list(i64, list(values))


def transpose8(add: Callable[[Operation], SSAValue], rows: Sequence[SSAValue]) -> list[SSAValue]:
    """The 8 columns of the 8x8 block whose rows are `rows` (vector<8xf32> each)."""
    typ = VectorType(f32, [BLOCK])

    def shuffle(a: SSAValue, b: SSAValue, mask: Sequence[int]) -> SSAValue:
        return add(vector.ShuffleOp(a, b, shuffle_mask(mask), result_type=typ))

    # Interleave pairs of rows (unpcklps / unpckhps within each 128-bit half).
    low = [shuffle(rows[r], rows[r + 1], (0, 8, 1, 9, 4, 12, 5, 13)) for r in range(0, 8, 2)]
    high = [shuffle(rows[r], rows[r + 1], (2, 10, 3, 11, 6, 14, 7, 15)) for r in range(0, 8, 2)]
    # Pairs of pairs (shufps): four rows' elements 4q..4q+3 of columns c and c + 4.
    quads: list[SSAValue] = []
    for first, second in ((low[0], low[1]), (low[2], low[3])):
        quads.append(shuffle(first, second, (0, 1, 8, 9, 4, 5, 12, 13)))
        quads.append(shuffle(first, second, (2, 3, 10, 11, 6, 7, 14, 15)))
    for first, second in ((high[0], high[1]), (high[2], high[3])):
        quads.append(shuffle(first, second, (0, 1, 8, 9, 4, 5, 12, 13)))
        quads.append(shuffle(first, second, (2, 3, 10, 11, 6, 7, 14, 15)))
    # quads: [c0|c4 of rows 0-3, c1|c5 rows 0-3, c0|c4 rows 4-7, c1|c5 rows 4-7,
    #         c2|c6 rows 0-3, c3|c7 rows 0-3, c2|c6 rows 4-7, c3|c7 rows 4-7]
    top = {0: quads[0], 1: quads[1], 2: quads[4], 3: quads[5]}
    bottom = {0: quads[2], 1: quads[3], 2: quads[6], 3: quads[7]}
    columns = list(rows)
    for c in range(4):  # 128-bit halves (vperm2f128): column c low, column c + 4 high
        columns[c] = shuffle(top[c], bottom[c], (0, 1, 2, 3, 8, 9, 10, 11))
        columns[c + 4] = shuffle(top[c], bottom[c], (4, 5, 6, 7, 12, 13, 14, 15))
    return columns
