"""Depthwise convolutions computed from the input rows in registers, without a padded copy.

convert-graph-to-loop gives a depthwise convolution a zero-padded copy of its input; the
CPU rewrites write it one plane at a time (image_copies.py), at stride 2 with its columns
stored by phase (strided_phases.py), and the convolution reads it back a vector of
output columns at a time, one unaligned load per tap. MobileNetV2's [1,96,112,112] 3x3/2
layer spent 63% of its time writing that copy (LLVM splits the phases with 8-wide
shuffles, and fills the border columns with scatters) and took twice onnxruntime's time
in the model (109 us against 49); its 3x3/1 layers a third.

Here such a convolution reads its input directly, one output row at a time per
(image, channel) plane, `lanes` output columns per vector:
- for each tap row kh inside the image, the input row s * oy + kh - top is loaded a
  vector at a time (masked past the row's end: the padding's zeros), at stride 2 two
  vectors split by two shuffles into their even and odd columns;
- tap kw reads input column s * ox + kw - left: the phase (kw - left) mod s of its vector,
  shifted by (kw - left) div s lanes with the neighbouring vector's lanes shuffled in
  (zero before the row: the left padding);
- the tap rows past the image (the padding's zero rows) are left out of the first and
  last output rows, so the loop over the rows in between has no tests;
- the row's sums go to a stack buffer, and the convolution's own epilogue (bias,
  activation, residual add, the store) runs over it as a loop LLVM vectorises.
The padded copy is no longer written. The planes are split over threads.

Taken for a top-level nest over [N, C, Ho, Wo] whose one reduction sums, over [1, K, K]
(K = 3 or 5), the product of the kernel's padded copy at [n, c, s * oy + kh, s * ox + kw]
(s = 1 or 2) and a weight at [c, 0, kh, kw], where the copy is written only by a
padded-copy nest (padded_copies.py) with at most K // 2 rows and columns of padding before
the image (or, with no padding, the convolution reads the kernel's input itself), and the
output rows are more than a quarter of a vector (narrower ones go channels-last,
depthwise.py), not between half a vector and one at stride 1 (`_one_vector_left`), and
at most MAX_VECTORS vectors long.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import FloatAttr, VectorType, f32, i1
from xdsl.ir import Block, Operation, Region, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.depthwise import depthwise_loads
from graphfuse.lowering.cpu.gemm.contractions import float_sum, summed_product
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder
from graphfuse.lowering.cpu.gemm.transposed_pack import shuffle_mask
from graphfuse.lowering.cpu.nest_indices import buffer_shape, own_index, pair
from graphfuse.lowering.cpu.padded_copies import match_padded_copy
from graphfuse.lowering.cpu.tuning.loop_annotations import LoopAnnotation
from graphfuse.lowering.loop_to_upstream.convert_loop_to_upstream import PARALLEL_MIN_WORK

SIZES = (3, 5)
"""Square tap windows taken."""
STRIDES = (1, 2)
MAX_VECTORS = 8
"""Output rows of at most this many vectors (128 columns at 16 lanes) are taken: each
vector of a row is unrolled, and its sum lives in a register."""


@dataclass(frozen=True)
class _DepthwiseRows:
    copy: loop.ParallelOp | None
    """The padded-copy nest, which writes only the buffer the convolution reads; None where
    the convolution, unpadded, reads its input itself."""
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    source: SSAValue
    """The convolution's input, [N, C, H, W]."""
    weight: SSAValue
    """The weights, read at [c, 0, kh, kw]."""
    stride: int
    taps: int
    """K: the window is K x K."""
    pads: tuple[int, int]
    """The padding before the image's rows and before its columns."""


def depthwise_rows(kernel: loop.KernelOp, lanes: int, threads: bool) -> int:
    """Rewrites each depthwise convolution of `kernel` this module takes; returns how
    many."""
    done = 0
    for nest in [op for op in kernel.body.block.ops if isinstance(op, loop.ParallelOp)]:
        found = _match(nest, lanes)
        if found is not None:
            _rewrite(found, lanes, threads)
            done += 1
    return done


def _scaled(index: SSAValue, outer: SSAValue, tap: SSAValue) -> int | None:
    """s when `index` is `s * outer + tap` (`outer + tap` for s = 1), else None."""
    if not isinstance(index.owner, arith.AddiOp):
        return None
    add = index.owner
    for scaled, rest in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        if rest is not tap:
            continue
        if scaled is outer:
            return 1
        owner = scaled.owner
        found = pair(owner, arith.MuliOp) if isinstance(owner, Operation) else None
        if found is not None and found[0] is outer:
            return found[1]
    return None


def _match(nest: loop.ParallelOp, lanes: int) -> _DepthwiseRows | None:
    if len(nest.shape) != 4:
        return None
    columns = nest.shape[3]
    if 4 * columns <= lanes or -(-columns // lanes) > MAX_VECTORS:
        return None
    product = _product(nest)
    if product is None:
        return None
    reduce, image, weight = product
    _, _, oy, ox = nest.body.block.args
    group, kh, kw = reduce.body.block.args
    strides = {_scaled(image.indices[2], oy, kh), _scaled(image.indices[3], ox, kw)}
    if len(strides) != 1 or not strides <= set(STRIDES):
        return None
    if not own_index(weight.indices[1], group, 1) or list(weight.indices[2:]) != [kh, kw]:
        return None
    stride = strides.pop()
    assert stride is not None
    if stride == 1 and _one_vector_left(columns, lanes):
        return None
    return _with_copy(nest, reduce, image, weight.buffer, stride)


def _one_vector_left(columns: int, lanes: int) -> bool:
    """At stride 1, rows of more than half a vector and at most one keep the padded copy,
    whose rows (16 floats for 14 columns) are aligned, where here a masked load of the
    14-float row straddles cache lines and one vector's taps are one chain of
    multiply-adds: [1,384,14,14] 17 us that way against 24 here, [1,576,14,14] 22 against
    33. Rows of half a vector or less gain ([1,960,7,7] 20 -> 14 us, [1,1152,7,7] 24 ->
    16): the copy's 9-float rows are not aligned either."""
    return lanes // 2 < columns <= lanes


def _product(nest: loop.ParallelOp) -> tuple[loop.ReduceOp, loop.LoadOp, loop.LoadOp] | None:
    """The nest's float sum (contractions.float_sum) over [1, K, K] of an image load times
    a weight load (depthwise_loads), with those loads."""
    reduce = float_sum(nest)
    if reduce is None or reduce.shape not in [(1, k, k) for k in SIZES]:
        return None
    loads = depthwise_loads(nest, reduce)
    product = summed_product(reduce)
    if loads is None or product is None:
        return None
    image, weight = loads
    if {product.lhs, product.rhs} != {image.result, weight.result}:
        return None
    return reduce, image, weight


def _with_copy(
    nest: loop.ParallelOp, reduce: loop.ReduceOp, image: loop.LoadOp, weight: SSAValue, stride: int
) -> _DepthwiseRows | None:
    """The match, when the image is the kernel's input (no padding) or the kernel's padded
    copy of it written by one top-level nest before `nest`."""
    padded = image.buffer
    if not isinstance(padded.owner, Block) or padded.owner.parent_op() is not nest.parent_op():
        return None
    writers = [u.operation for u in padded.uses if u.operation is not image]
    taps = reduce.shape[1]
    if any(isinstance(op, loop.StoreOp) for op in writers):
        found = _padded_copy(nest, writers, taps)
    else:
        found = (None, padded, (0, 0))  # no padding: the kernel's input, written elsewhere
    if found is None:
        return None
    copy, source, pads = found
    shape = buffer_shape(source)
    if shape is None or len(shape) != 4 or tuple(shape[:2]) != tuple(nest.shape[:2]):
        return None
    return _DepthwiseRows(copy, nest, reduce, source, weight, stride, taps, pads)


def _padded_copy(
    nest: loop.ParallelOp, writers: list[Operation], taps: int
) -> tuple[loop.ParallelOp, SSAValue, tuple[int, int]] | None:
    """(the copy nest, its source, the padding before rows and columns) when `writers`
    is one store of a padded-copy nest before `nest`, with at most taps // 2 rows and
    columns of padding before the image."""
    if len(writers) != 1 or not isinstance(writers[0], loop.StoreOp):
        return None
    copy = writers[0].parent_op()
    if not isinstance(copy, loop.ParallelOp) or copy.parent_block() is not nest.parent_block():
        return None
    found = match_padded_copy(copy)
    if found is None or found.store is not writers[0] or not copy.is_before_in_block(nest):
        return None
    if sorted(found.clamps) != [2, 3]:
        return None
    if any(not 0 <= -c.offset <= taps // 2 for c in found.clamps.values()):
        return None
    source = found.load.buffer
    args = copy.body.block.args
    first, second = found.load.indices[:2]
    if not (own_index(first, args[0], copy.shape[0]) and second is args[1]):
        return None
    shape = buffer_shape(source)
    if shape is None or len(shape) != 4:
        return None
    if (shape[2], shape[3]) != (found.clamps[2].extent, found.clamps[3].extent):
        return None
    return copy, source, (-found.clamps[2].offset, -found.clamps[3].offset)


class _Rows:
    """Emits the rows of one plane (image n, channel c)."""

    def __init__(
        self, found: _DepthwiseRows, lanes: int, scope: GemmBuilder, plane: list[SSAValue]
    ):
        self.found = found
        self.lanes = lanes
        self.plane = plane
        """The plane's image and channel indices."""
        self.vec = VectorType(f32, [lanes])
        shape = buffer_shape(found.source)
        assert shape is not None
        self.height, self.width = shape[2], shape[3]
        self.vectors = -(-found.nest.shape[3] // lanes)
        zero = scope.emit(arith.ConstantOp(FloatAttr(0.0, f32)))
        self.zero = scope.emit(vector.BroadcastOp(zero, self.vec))
        self.init = scope.emit(vector.BroadcastOp(found.reduce.init, self.vec))
        taps = range(found.taps)
        self.weights = [[self._weight(scope, kh, kw) for kw in taps] for kh in taps]
        """Each tap's weight, in every lane."""
        self.buffer = scope.emit(memref.AllocaOp.get(f32, shape=[self.vectors * lanes]))
        """The row's sums, for the epilogue."""
        left = found.pads[1]
        self.offsets = [kw - left for kw in range(found.taps)]
        """Tap kw's input column, less s * ox."""

    def _weight(self, scope: GemmBuilder, kh: int, kw: int) -> SSAValue:
        at = [self.plane[1], scope.index(0), scope.index(kh), scope.index(kw)]
        weight = scope.emit(memref.LoadOp.get(self.found.weight, at))
        return scope.emit(vector.BroadcastOp(weight, self.vec))

    def taps(self, oy: int) -> list[int]:
        """The tap rows of output row `oy` inside the input."""
        found = self.found
        top = found.pads[0]
        return [kh for kh in range(found.taps) if 0 <= found.stride * oy + kh - top < self.height]

    def load(self, em: GemmBuilder, at: list[SSAValue], start: int) -> SSAValue:
        """`lanes` columns of the input row from `start`, zero past its end."""
        count = min(max(self.width - start, 0), self.lanes)
        if count == 0:
            return self.zero
        indices = [*at, em.index(start)]
        if count == self.lanes:
            return em.emit(vector.LoadOp(self.found.source, indices, self.vec))
        mask_type = VectorType(i1, [self.lanes])
        mask = em.emit(vector.CreateMaskOp([em.index(count)], mask_type))
        return em.emit(vector.MaskedLoadOp(self.found.source, indices, mask, self.zero, self.vec))

    def shuffle(self, em: GemmBuilder, a: SSAValue, b: SSAValue, lanes: list[int]) -> SSAValue:
        return em.emit(vector.ShuffleOp(a, b, shuffle_mask(lanes), result_type=self.vec))

    def phases(self, em: GemmBuilder, at: list[SSAValue]) -> list[list[SSAValue]]:
        """The input row's vectors by phase: [phase][j] holds the row's columns
        s * (j * lanes + i) + phase, for j from -1 (zeros: the padding before the row) to
        one past the last output vector."""
        lanes, stride = self.lanes, self.found.stride
        phases: list[list[SSAValue]] = [[self.zero] for _ in range(stride)]
        for j in range(self.vectors + 1):
            start = stride * lanes * j
            loaded = [self.load(em, at, start + lanes * h) for h in range(stride)]
            if stride == 1:
                phases[0].append(loaded[0])
                continue
            for phase in range(stride):
                lanes_of = [stride * i + phase for i in range(lanes)]
                phases[phase].append(self.shuffle(em, loaded[0], loaded[1], lanes_of))
        return phases

    def column(
        self, em: GemmBuilder, phases: list[list[SSAValue]], j: int, offset: int
    ) -> SSAValue:
        """Vector j of the input columns s * ox + offset."""
        lanes = self.lanes
        shift, phase = divmod(offset, self.found.stride)
        vectors = phases[phase]
        if shift == 0:
            return vectors[j + 1]
        if shift > 0:
            return self.shuffle(
                em, vectors[j + 1], vectors[j + 2], list(range(shift, shift + lanes))
            )
        return self.shuffle(
            em, vectors[j], vectors[j + 1], list(range(lanes + shift, 2 * lanes + shift))
        )

    def sums(self, em: GemmBuilder, oy: SSAValue, taps: list[int]) -> list[SSAValue]:
        """Output row `oy`'s sums over the tap rows `taps`, one vector per `lanes` output
        columns."""
        found = self.found
        sums = [self.init] * self.vectors
        for kh in taps:
            row = oy
            if found.stride != 1:
                row = em.emit(arith.MuliOp(oy, em.index(found.stride)))
            if kh != found.pads[0]:
                row = em.emit(arith.AddiOp(row, em.index(kh - found.pads[0])))
            phases = self.phases(em, [*self.plane, row])
            for j in range(self.vectors):
                for kw, offset in enumerate(self.offsets):
                    column = self.column(em, phases, j, offset)
                    sums[j] = em.emit(vector.FMAOp(column, self.weights[kh][kw], sums[j]))
        return sums

    def row(self, em: GemmBuilder, oy: SSAValue, taps: list[int]) -> None:
        """Output row `oy`: its sums into the row buffer, then the nest's epilogue over
        them."""
        for j, total in enumerate(self.sums(em, oy, taps)):
            em.add(vector.StoreOp(total, self.buffer, [em.index(j * self.lanes)]))
        nest, reduce = self.found.nest, self.found.reduce
        columns = nest.shape[3]
        epilogue, body = em.loop(em.index(0), em.index(columns))
        if columns % self.lanes:
            # A short row runs as masked vectors, not scalars (scf_predicate_short_loops).
            hint = LoopAnnotation(width=self.lanes, no_unroll=columns <= self.lanes)
            epilogue.attributes["loop_annotation"] = hint
        ox = body.block.args[0]
        value = body.emit(memref.LoadOp.get(self.buffer, [ox]))
        n, c, y, x = nest.body.block.args
        mapping: dict[SSAValue, SSAValue] = {n: self.plane[0], c: self.plane[1], y: oy, x: ox}
        mapping[reduce.result] = value
        for op in nest.body.block.ops:
            if op is not reduce and not isinstance(op, loop.YieldOp):
                body.add(op.clone(value_mapper=mapping))
        body.add(scf.YieldOp())


def _plane(found: _DepthwiseRows, lanes: int, body: GemmBuilder, number: SSAValue) -> None:
    """Plane `number` (image-major) of the convolution, in a stack scope of its own."""
    batch, channels, rows, _ = found.nest.shape
    image, channel = body.divide(number, channels)
    scope = GemmBuilder()
    emit = _Rows(found, lanes, scope, [image if batch > 1 else scope.index(0), channel])
    inner = [oy for oy in range(rows) if len(emit.taps(oy)) == found.taps]
    first, last = (inner[0], inner[-1] + 1) if inner else (rows, rows)
    for oy in [*range(first), *range(last, rows)]:
        emit.row(scope, scope.index(oy), emit.taps(oy))
    if inner:
        _, rows_loop = scope.loop(scope.index(first), scope.index(last))
        emit.row(rows_loop, rows_loop.block.args[0], list(range(found.taps)))
        rows_loop.add(scf.YieldOp())
    scope.add(memref.AllocaScopeReturnOp.build(operands=[[]]))
    body.add(memref.AllocaScopeOp.build(regions=[Region(scope.block)], result_types=[[]]))


def _rewrite(found: _DepthwiseRows, lanes: int, threads: bool) -> None:
    nest = found.nest
    batch, channels, rows, columns = nest.shape
    work = batch * channels * rows * columns * found.taps * found.taps
    em = GemmBuilder()
    em.parallel(
        batch * channels,
        threads and work >= PARALLEL_MIN_WORK,
        lambda body, number: _plane(found, lanes, body, number),
    )
    parent = nest.parent_block()
    assert parent is not None
    for op in em.take():
        parent.insert_op_before(op, nest)
    for old in (nest, found.copy):
        if old is not None:
            old.detach()
            old.erase()
