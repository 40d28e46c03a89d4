"""3x3 convolutions at stride 1 by Winograd's minimal filtering, F(2x2, 3x3).

ResNet-50's 3x3 convolutions ran 12-24% slower than onnxruntime's with 78% of their time
in the GEMM micro-kernel at its peak (the rest: the channels-last copy and the im2col
packing). Doing the same multiply-adds faster had little left to give; F(2x2, 3x3)
(Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016) does fewer:
each 2x2 tile of the output comes from a 4x4 tile of the input with 16 products per pair
of channels instead of 36. With the transforms' matrices B^T (4x4), G (4x3) and A^T (2x4),
a tile's output is Y = A^T [(G g G^T) * (B^T d B)] A, the product elementwise; summed over
the input channels, the 16 elementwise products become 16 GEMMs.

A convolution nest over the NCHW output [N, Co, H, W] whose reduction [3, 3, C]
multiplies a load of the kernel's padded channels-last image at [n, y + kh, x + kw, c] by
one of the weights at [co, c, kh, kw], which the kernel gets as constants, becomes three
nests (T = ceil(H/2) x ceil(W/2) tiles an image):
- the input transform, over [N, ceil(H/2), ceil(W/2), C], channels innermost (contiguous
  loads from the image, contiguous stores): V[ab, n T + t, c] = (B^T d B)[a, b] of each
  tile, in a new scratch argument. Where H (or W) is odd the last tiles' fourth row (or
  column) lies past the copy and is read clamped to its last: only the tiles' second
  output row (or column), past the image and never stored, depends on it;
- the 16 GEMMs, a nest over [16, N T, Co] reducing C: V[ab, t, c] times U[ab, c, co] =
  (G g G^T)[a, b] computed from the weights in the product's second factor, which
  loop-tile-matmul packs once, on the first call (the weights are constants), as B, and
  V read in place as A; the result in a second scratch argument M;
- the output transform, over [N, H, W, Co]: each point (y, x) sums the 9 entries of its
  tile's M that A^T M A takes for its place (y mod 2, x mod 2) in the tile, with signs;
  then the nest's own epilogue (bias, activation, ...) and store, moved to the NCHW output
  by 8x8 transposes (channels_last_stores.py).

The result is the same linear function of the image as the convolution's, whatever the
image holds; its rounding differs (the transforms add and subtract before the products).
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.dialects.utils import FastMathFlag
from xdsl.ir import SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.channels_last_stores import store_through_transposes
from graphfuse.lowering.cpu.gemm.contractions import summed_product
from graphfuse.lowering.cpu.nest_indices import buffer_shape, constant, own_index
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

MIN_MACS = 1 << 21
"""Convolutions of fewer multiply-adds (batch included) keep the direct GEMM: below it
the gain is a microsecond or less, not worth two more scratch buffers and three nests
(2 threads: 64 -> 64 on 8x8, 2.4 M, 15 against 17 us; 32 -> 32 on 8x8, 0.6 M, 9 against
10)."""
MIN_CHANNELS = 32
"""Input channels (the 16 GEMMs' K) of at least this many: with 16 the transforms cost as
much as the multiply-adds saved (16 -> 16 on 56x56: 52 against 51 us; on 112x112 188
against 173), with 24 about even (29 against 30 us on 28x28), with 32 a gain (36 against
47 us on 28x28). Channels in and out a multiple of 8 (the transposed stores), out at least
16."""

_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
"""G: a 3-tap filter row to its 4 transformed taps."""
_CONTRACT = arith.FastMathFlagsAttr((FastMathFlag.ALLOW_CONTRACT,))


@dataclass(frozen=True)
class _Winograd:
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    image: SSAValue
    """[N, >= H + 2, >= W + 2, C], read at [n, y + kh, x + kw, c]."""
    weight: SSAValue
    """[Co, C, 3, 3], read at [co, c, kh, kw]."""

    @property
    def channels(self) -> int:
        return self.reduce.shape[2]


def winograd_convolutions(kernel: loop.KernelOp, threads: bool, constants: Set[int]) -> int:
    """Rewrites each top-level nest of `kernel` that is a convolution this module takes
    (see its doc; `constants`: positions of the kernel's arguments every call fills with a
    constant); returns how many."""
    entry = kernel.body.block
    weights = {entry.args[p] for p in constants}
    found = [
        f
        for nest in entry.ops
        if isinstance(nest, loop.ParallelOp) and (f := match_winograd(nest, weights)) is not None
    ]
    for f in found:
        _rewrite(f, threads)
    return len(found)


def match_winograd(nest: loop.ParallelOp, weights: Set[SSAValue]) -> _Winograd | None:
    """The convolution `nest` computes, if it is one this module takes."""
    reduce = _reduction(nest)
    factors = None if reduce is None else _factors(reduce)
    if reduce is None or factors is None:
        return None
    batch, out_channels, height, width = nest.shape
    channels = reduce.shape[2]
    n, co, y, x = nest.body.block.args
    kh, kw, c = reduce.body.block.args
    image = weight = None
    for load in factors:
        shape = buffer_shape(load.buffer)
        if shape is None or len(shape) != 4 or inside(load.buffer, nest):
            return None
        i = list(load.indices)
        if own_index(i[0], n, batch) and _sum_of(i[1], y, kh) and _sum_of(i[2], x, kw):
            fits = shape[0] == batch and shape[1] >= height + 2 and shape[2] >= width + 2
            image = load.buffer if fits and i[3] is c and shape[3] == channels else None
        elif i == [co, c, kh, kw] and shape == (out_channels, channels, 3, 3):
            weight = load.buffer if load.buffer in weights else None
    if image is None or weight is None:
        return None
    return _Winograd(nest, reduce, image, weight)


def _reduction(nest: loop.ParallelOp) -> loop.ReduceOp | None:
    """The nest's only region op when it is a sum over [3, 3, C] from 0 and the nest's
    sizes are ones this module takes (channels, multiply-adds)."""
    regions = [op for op in nest.body.block.ops if op.regions]
    if len(nest.shape) != 4 or len(regions) != 1 or not isinstance(regions[0], loop.ReduceOp):
        return None
    reduce = regions[0]
    batch, out_channels, height, width = nest.shape
    channels = reduce.shape[2] if len(reduce.shape) == 3 else 0
    taken = (
        reduce.kind.data == loop.ReduceKind.ADD
        and reduce.shape[:2] == (3, 3)
        and constant(reduce.init) == 0
        and not inside(reduce.init, nest)
        and channels >= MIN_CHANNELS
        and out_channels >= 16
        and channels % 8 == 0
        and out_channels % 8 == 0
        and batch * out_channels * height * width * 9 * channels >= MIN_MACS
    )
    return reduce if taken else None


def _factors(reduce: loop.ReduceOp) -> tuple[loop.LoadOp, loop.LoadOp] | None:
    """The two loads whose product the reduction sums, when its body is that product of
    two loads at index sums of its own and the nest's indices."""
    ops = list(reduce.body.block.ops)
    product = summed_product(reduce)
    if product is None:
        return None
    loads = [v.owner for v in product.operands]
    if not all(isinstance(op, loop.LoadOp) for op in loads):
        return None
    rest = [op for op in ops[:-1] if op not in (*loads, product)]
    if any(not isinstance(op, arith.AddiOp) for op in rest):
        return None
    first, second = loads
    assert isinstance(first, loop.LoadOp) and isinstance(second, loop.LoadOp)
    return first, second


def _sum_of(index: SSAValue, a: SSAValue, b: SSAValue) -> bool:
    op = index.owner
    return isinstance(op, arith.AddiOp) and {op.lhs, op.rhs} == {a, b}


def _rewrite(found: _Winograd, threads: bool) -> None:
    """Replaces the nest of `found` by the three nests of the module's doc."""
    nest = found.nest
    kernel = nest.parent_op()
    parent = nest.parent_block()
    assert isinstance(kernel, loop.KernelOp) and parent is not None
    entry = kernel.body.block
    batch, out_channels, _, _ = nest.shape
    tiles = batch * math.prod(_tiles(found))
    v = entry.insert_arg(MemRefType(f32, [16, tiles, found.channels]), len(entry.args))
    m = entry.insert_arg(MemRefType(f32, [16, tiles, out_channels]), len(entry.args))
    output = _output_nest(found, m)
    for new in (_input_nest(found, v), _gemm_nest(found, v, m), output):
        parent.insert_op_before(new, nest)
    nest.detach()
    nest.erase()
    store_through_transposes(output, threads)


def _tile(em: BlockBuilder, n: SSAValue, ty: SSAValue, tx: SSAValue, found: _Winograd) -> SSAValue:
    """The tile's row in V and M: (n ceil(H/2) + ty) ceil(W/2) + tx."""
    rows, columns = _tiles(found)
    row = em.emit(arith.AddiOp(em.emit(arith.MuliOp(n, em.index(rows))), ty))
    return em.emit(arith.AddiOp(em.emit(arith.MuliOp(row, em.index(columns))), tx))


def _tiles(found: _Winograd) -> tuple[int, int]:
    """Tiles down and across an image: ceil(H / 2), ceil(W / 2)."""
    _, _, height, width = found.nest.shape
    return -(-height // 2), -(-width // 2)


def _input_nest(found: _Winograd, v: SSAValue) -> loop.ParallelOp:
    """V[ab, tile, c] = (B^T d B)[a, b] for each 4x4 tile d of the image (tiles 2 apart),
    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]."""
    batch = found.nest.shape[0]
    rows, columns = _tiles(found)
    nest = loop.ParallelOp([batch, rows, columns, found.channels])
    em = BlockBuilder(nest.body.block)
    n, ty, tx, c = nest.body.block.args
    _, image_rows, image_columns, _ = buffer_shape(found.image) or (0, 0, 0, 0)
    ys = _taps(em, ty, 2 * rows + 1 >= image_rows, image_rows)
    xs = _taps(em, tx, 2 * columns + 1 >= image_columns, image_columns)
    rows_transformed: list[list[SSAValue]] = []
    for y in ys:
        d = [em.emit(loop.LoadOp(found.image, [n, y, x, c])) for x in xs]
        rows_transformed.append(_bt(em, d))
    tile = _tile(em, n, ty, tx, found)
    for b in range(4):
        column = _bt(em, [rows_transformed[i][b] for i in range(4)])
        for a in range(4):
            em.add(loop.StoreOp(column[a], v, [em.index(4 * a + b), tile, c]))
    em.add(loop.YieldOp())
    return nest


def _taps(em: BlockBuilder, tile: SSAValue, clamp: bool, size: int) -> list[SSAValue]:
    """The image rows (or columns) 2 tile + 0..3 a tile reads; with `clamp` (an odd
    size: the last tile's fourth row is past the copy) the fourth at most `size` - 1."""
    start = em.emit(arith.MuliOp(tile, em.index(2)))
    taps = [em.emit(arith.AddiOp(start, em.index(i))) for i in range(4)]
    if clamp:
        taps[3] = em.emit(arith.MinSIOp(taps[3], em.index(size - 1)))
    return taps


def _bt(em: BlockBuilder, d: Sequence[SSAValue]) -> list[SSAValue]:
    """B^T d for a column d of 4 values."""

    def sub(a: SSAValue, b: SSAValue) -> SSAValue:
        return em.emit(arith.SubfOp(a, b))

    add = em.emit(arith.AddfOp(d[1], d[2]))
    return [sub(d[0], d[2]), add, sub(d[2], d[1]), sub(d[1], d[3])]


def _gemm_nest(found: _Winograd, v: SSAValue, m: SSAValue) -> loop.ParallelOp:
    """M[ab, tile, co] = sum over c of V[ab, tile, c] U[ab, c, co], U[ab, c, co] =
    (G g G^T)[a, b] of the filter g = weight[co, c] computed inside the product's factor."""
    batch, out_channels, _, _ = found.nest.shape
    nest = loop.ParallelOp([16, batch * math.prod(_tiles(found)), out_channels])
    ab, tile, co = nest.body.block.args
    outer = BlockBuilder(nest.body.block)
    reduce = loop.ReduceOp(loop.ReduceKind.ADD, [found.channels], found.reduce.init)
    em = BlockBuilder(reduce.body.block)
    (c,) = reduce.body.block.args
    transformed = em.emit(loop.LoadOp(v, [ab, tile, c]))
    a_row = _g_row(em, em.emit(arith.DivUIOp(ab, em.index(4))))
    b_row = _g_row(em, em.emit(arith.RemUIOp(ab, em.index(4))))
    terms: list[SSAValue] = []
    for i in range(3):
        for j in range(3):
            tap = em.emit(loop.LoadOp(found.weight, [co, c, em.index(i), em.index(j)]))
            scale = em.emit(arith.MulfOp(a_row[i], b_row[j]))
            terms.append(em.emit(arith.MulfOp(scale, tap)))
    filter_value = terms[0]
    for term in terms[1:]:
        filter_value = em.emit(arith.AddfOp(filter_value, term))
    em.add(loop.YieldOp(em.emit(arith.MulfOp(transformed, filter_value))))
    outer.add(reduce)
    outer.add(loop.StoreOp(reduce.result, m, [ab, tile, co]))
    outer.add(loop.YieldOp())
    return nest


def _g_row(em: BlockBuilder, row: SSAValue) -> list[SSAValue]:
    """The 3 entries of row `row` (an index 0-3) of G, chosen by selects."""
    entries: list[SSAValue] = []
    for k in range(3):
        value = em.constant(_G[3][k], f32)
        for r in (2, 1, 0):
            hit = em.emit(arith.CmpiOp(row, em.index(r), "eq"))
            value = em.emit(arith.SelectOp(hit, em.constant(_G[r][k], f32), value))
        entries.append(value)
    return entries


def _output_nest(found: _Winograd, m: SSAValue) -> loop.ParallelOp:
    """The convolution's output at (n, co, y, x) from M (A^T M A at its place in its
    tile, A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]), then the old nest's epilogue and store."""
    batch, out_channels, height, width = found.nest.shape
    nest = loop.ParallelOp([batch, height, width, out_channels])
    block = nest.body.block
    em = BlockBuilder(block)
    n, y, x, co = block.args
    places: list[tuple[SSAValue, SSAValue, SSAValue]] = []
    for index in (y, x):
        half = em.emit(arith.DivUIOp(index, em.index(2)))
        place = em.emit(arith.RemUIOp(index, em.index(2)))
        first = em.emit(arith.CmpiOp(place, em.index(0), "eq"))
        sign = em.emit(arith.SelectOp(first, em.constant(1.0, f32), em.constant(-1.0, f32)))
        places.append((half, place, sign))
    (ty, u, sign_u), (tx, w, sign_w) = places
    tile = _tile(em, n, ty, tx, found)
    rows: list[SSAValue] = []
    for a in range(3):
        entries: list[SSAValue] = []
        for b in range(3):
            row = em.emit(arith.AddiOp(u, em.index(a)))
            column = em.emit(arith.AddiOp(w, em.index(b)))
            ab = em.emit(arith.AddiOp(em.emit(arith.MuliOp(row, em.index(4))), column))
            entries.append(em.emit(loop.LoadOp(m, [ab, tile, co])))
        rows.append(_signed_sum(em, entries, sign_w))
    value = _signed_sum(em, rows, sign_u)
    old = found.nest.body.block.args
    mapping: dict[SSAValue, SSAValue] = {old[0]: n, old[1]: co, old[2]: y, old[3]: x}
    mapping[found.reduce.result] = value
    for op in found.nest.body.block.ops:
        if op is not found.reduce:
            block.add_op(op.clone(value_mapper=mapping))
    return nest


def _signed_sum(em: BlockBuilder, values: Sequence[SSAValue], sign: SSAValue) -> SSAValue:
    """values[0] + sign (values[1] + values[2]): a row of A^T at a place, 0 (1, 1, 1) or
    1 (1, -1, -1), applied to 3 of a tile's 4 entries starting at that place."""
    pair = em.emit(arith.AddfOp(values[1], values[2]))
    scaled = em.emit(arith.MulfOp(sign, pair, _CONTRACT))
    return em.emit(arith.AddfOp(values[0], scaled, _CONTRACT))
