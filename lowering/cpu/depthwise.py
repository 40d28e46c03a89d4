"""Depthwise convolutions vectorised across channels.

convert-graph-to-loop writes a depthwise convolution (one input channel per group) as a
nest over the NCHW output points `[N, C, Ho, Wo]` with a `loop.reduce add [1, KH, KW]`
inside. convert-loop-to-upstream vectorises the innermost dimension, the output row, around
the reduction's loops. For 3x3 and 5x5 taps that holds down to rows of a few points (short
rows run as masked vectors, scf-predicate-short-loops); 7x7 taps (ConvNeXt's) stay loops
inside the vector loop (2-3 GFLOP/s), and a row of 2-4 points leaves most of a vector idle.

Here such a nest, when its rows are very narrow or its taps many (see `_MANY_TAPS`), becomes
- a copy of the (padded) input into channels-last order `[N, Hp, Wp, C]` and of the
  weights into `[1, KH, KW, C]`, scratch buffers of the kernel;
- a nest over `[N, Ho, Wo, C]`, channels innermost (contiguous in both copies), whose body
  is the reduction's body once per tap (the taps unrolled, summed in a few independent
  chains so the multiply-adds overlap), then the nest's own epilogue (bias, activation,
  residual, ...) and stores, as before, at the same NCHW output points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set
from dataclasses import dataclass
from itertools import product
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.utils import FastMathFlag
from xdsl.ir import Attribute, Block, SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.channels_last_stores import store_through_transposes
from graphfuse.lowering.cpu.first_call import keep_between_calls, on_first_call
from graphfuse.lowering.cpu.nest_indices import buffer_shape, constant, index_in, own_index
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

_CONTRACT = arith.FastMathFlagsAttr((FastMathFlag.ALLOW_CONTRACT,))
_CHAINS = 4
"""Independent partial sums of the taps (a multiply-add's latency over its throughput)."""
_MANY_TAPS = 49
"""From this many taps (7x7) on, the channels-last nest is taken at any row width: the
row-vectorised nest keeps the taps as loops inside the vector loop (7x7 [8,96,56,56]: 7.5x
the time; [1,96,56,56] 371 against 3042 us, [1,768,7,7] 152 against 408, 2 threads).
Fewer taps (3x3, 5x5) take it only on rows of at most a quarter of a vector (4 points with
16 lanes): the row path's padded copy and masked rows are vectorised since the kernels'
buffers are marked not to alias (scf_outline_tasks.py), and the copies and stores across
channels then cost more than they save on wider rows. 2 threads, 16 lanes, channels-last
against the row path: [1,960,4,4] 3x3 17.3 against 25.3 us, [1,320,2,2] 9.5 against 12.5;
[1,384,5,5] 15.3 against 15.5; [1,384,6,6] 17.5 against 15.4; [1,960,7,7] 38.1 against
27.4; 3x3/2 from [1,576,14,14] 38.9 against 24.0, from [1,192,28,28] 40.4 against 25.0;
5x5 [1,1152,7,7] 75.8 against 61.4, 5x5/2 from [1,240,28,28] 65.1 against 49.1."""
_NARROW_SHARE = 4
"""Rows of at most lanes / _NARROW_SHARE points take the channels-last nest."""
_L1_BYTES = 24 * 1024
"""What a block of channels may read between two uses of an input vector: most of a
32 KB L1 data cache."""
_MAX_TAPS = 81
"""More taps than this stay a loop (the unrolled body would grow past what is worth it)."""


@dataclass(frozen=True)
class _Depthwise:
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    image: loop.LoadOp
    """The input load: [n, c, h, w] with n, c the nest's first two indices."""
    weight: loop.LoadOp
    """The weight load: [c, ...] with c the nest's second index."""


def match_depthwise(nest: loop.ParallelOp, lanes: int) -> _Depthwise | None:
    """The depthwise convolution `nest` computes, if it is one this module takes."""
    if len(nest.shape) != 4 or nest.shape[1] < 8:
        return None
    reduces = [op for op in nest.body.block.ops if isinstance(op, loop.ReduceOp)]
    others = [op for op in nest.body.block.ops if op.regions and op not in reduces]
    if len(reduces) != 1 or others:
        return None
    reduce = reduces[0]
    if reduce.kind.data != loop.ReduceKind.ADD or len(reduce.shape) != 3:
        return None
    taps = reduce.shape[0] * reduce.shape[1] * reduce.shape[2]
    if reduce.shape[0] != 1 or taps > _MAX_TAPS or inside(reduce.init, nest):
        return None
    loads = depthwise_loads(nest, reduce)
    if loads is None:
        return None
    image, weight = loads
    worth = taps >= _MANY_TAPS or _NARROW_SHARE * nest.shape[3] <= lanes
    return _Depthwise(nest, reduce, image, weight) if worth else None


def depthwise_loads(
    nest: loop.ParallelOp, reduce: loop.ReduceOp
) -> tuple[loop.LoadOp, loop.LoadOp] | None:
    """The reduction's image and weight loads, if it reads exactly those two."""
    body = list(reduce.body.block.ops)
    loads = [op for op in body if isinstance(op, loop.LoadOp)]
    if len(loads) != 2 or any(op.regions or isinstance(op, loop.StoreOp) for op in body):
        return None
    n, c = nest.body.block.args[0], nest.body.block.args[1]
    image = weight = None
    for load in loads:
        shape = buffer_shape(load.buffer)
        if shape is None or len(shape) != 4 or inside(load.buffer, nest):
            return None
        if own_index(load.indices[0], n, nest.shape[0]) and load.indices[1] is c:
            image = load
        elif load.indices[0] is c and shape[0] == nest.shape[1]:
            weight = load
    if image is None or weight is None or buffer_shape(image.buffer)[1] != nest.shape[1]:  # type: ignore[index]
        return None
    if c in image.indices[2:] or c in weight.indices[1:]:
        return None
    return image, weight


def _channels_last(source: SSAValue, perm: tuple[int, ...], target: SSAValue) -> loop.ParallelOp:
    """A nest copying `source` into `target` with target[i] = source[i permuted by perm]
    (target dimension d is source dimension perm[d])."""
    shape = buffer_shape(target)
    assert shape is not None
    nest = loop.ParallelOp(shape)
    block = nest.body.block
    args = list(block.args)
    indices = [SSAValue.get(args[perm.index(d)]) for d in range(len(perm))]
    load = loop.LoadOp(source, indices)
    block.add_ops([load, loop.StoreOp(load.result, target, args), loop.YieldOp()])
    return nest


_IMAGE_PERM = (0, 2, 3, 1)
_WEIGHT_PERM = (1, 2, 3, 0)


def _permuted_type(value: SSAValue, perm: tuple[int, ...]) -> MemRefType[Attribute]:
    typ = value.type
    assert isinstance(typ, MemRefType)
    memref_type = cast(MemRefType[Attribute], typ)
    shape = memref_type.get_shape()
    return MemRefType(memref_type.get_element_type(), [shape[d] for d in perm])


def _retarget_copies(found: _Depthwise, image: SSAValue) -> bool:
    """Where the convolution's input is the kernel's own padded copy (written by earlier
    top-level nests: a fill and an interior copy, see padded_copies.py, and read by the
    convolution alone), those nests write the channels-last copy `image` instead: a fill
    over its shape, stores at permuted indices. False (nothing changed) otherwise."""
    stores = _copy_stores(found)
    if not stores:
        return False
    for store in stores:
        indices = [store.indices[d] for d in _IMAGE_PERM]
        top = store.parent_op()
        assert isinstance(top, loop.ParallelOp)
        if _is_fill(top, store):
            _fill(top, store.value, image)
            continue
        replacement = loop.StoreOp(store.value, image, indices)
        store.parent_block().insert_op_before(replacement, store)  # type: ignore[union-attr]
        store.detach()
        store.erase()
        if not inside(store.value, top) and len(top.shape) == len(_IMAGE_PERM):
            _channels_innermost(top)
    return True


def _copy_stores(found: _Depthwise) -> list[loop.StoreOp]:
    """The stores of the top-level nests before the convolution that write its input, when
    that is a buffer of the kernel written by those alone; else none."""
    buffer = found.image.buffer
    nest = found.nest
    if not isinstance(buffer.owner, Block):
        return []
    stores: list[loop.StoreOp] = []
    for use in buffer.uses:
        op = use.operation
        if op is found.image:
            continue
        if not isinstance(op, loop.StoreOp) or op.buffer is not buffer:
            return []
        top = op.parent_op()
        if not isinstance(top, loop.ParallelOp) or top.parent_block() is not nest.parent_block():
            return []
        if top.is_before_in_block(nest) is False:
            return []
        stores.append(op)
    return stores


def _channels_innermost(top: loop.ParallelOp) -> None:
    """A border slab of the channels-last copy (a constant stored over [N, C, h, w]) loops
    over [N, h, w, C] instead, so its stores are contiguous vectors, not one per channel
    C apart."""
    shape = top.shape
    nest = loop.ParallelOp([shape[d] for d in _IMAGE_PERM])
    old = top.body.block.args
    mapping: dict[SSAValue, SSAValue] = {
        old[d]: new for d, new in zip(_IMAGE_PERM, nest.body.block.args, strict=True)
    }
    _replace_nest(top, nest, mapping)


def _replace_nest(
    old: loop.ParallelOp, new: loop.ParallelOp, mapping: dict[SSAValue, SSAValue]
) -> None:
    """`new` (its body begun, `mapping` taking `old`'s indices to its values) gets the rest
    of `old`'s body and takes its place."""
    for op in old.body.block.ops:
        new.body.block.add_op(op.clone(value_mapper=mapping))
    parent = old.parent_block()
    assert parent is not None
    parent.insert_op_before(new, old)
    old.detach()
    old.erase()


def _is_fill(top: loop.ParallelOp, store: loop.StoreOp) -> bool:
    """`top` stores one value defined outside it at its own indices (a constant 0 for a
    dimension of 1, as a batch of 1) over the whole buffer, and nothing else. (A border
    slab of padded_copies.py, at the top or left edge, stores at its own indices over
    part of the buffer: it is moved to the channels-last copy like the other stores.)"""
    ops = list(top.body.block.ops)
    args = top.body.block.args
    own = len(store.indices) == len(args) and all(
        own_index(index, arg, extent)
        for index, arg, extent in zip(store.indices, args, top.shape, strict=True)
    )
    whole = tuple(top.shape) == buffer_shape(store.buffer)
    return len(ops) == 2 and own and whole and not inside(store.value, top)


def _fill(top: loop.ParallelOp, value: SSAValue, image: SSAValue) -> None:
    """Replaces the fill nest `top` by one over `image`'s shape (channels innermost)."""
    shape = buffer_shape(image)
    assert shape is not None
    nest = loop.ParallelOp(shape)
    block = nest.body.block
    block.add_ops([loop.StoreOp(value, image, list(block.args)), loop.YieldOp()])
    parent = top.parent_block()
    assert parent is not None
    parent.insert_op_before(nest, top)
    top.detach()
    top.erase()


def rewrite_depthwise(
    found: _Depthwise, threads: bool = False, constants: Set[SSAValue] = frozenset()
) -> None:
    """Replaces the nest of `found` by the channels-last copies and the channel-vectorised
    nest (see the module's doc); the copies are new scratch arguments of the kernel. The
    weights' copy is made on the first call only when they are among `constants` (kernel
    arguments every call fills with a constant)."""
    nest = found.nest
    kernel = nest.parent_op()
    parent = nest.parent_block()
    assert isinstance(kernel, loop.KernelOp) and parent is not None
    entry = kernel.body.block
    image = entry.insert_arg(_permuted_type(found.image.buffer, _IMAGE_PERM), len(entry.args))
    weight = entry.insert_arg(_permuted_type(found.weight.buffer, _WEIGHT_PERM), len(entry.args))
    copy = _channels_last(found.weight.buffer, _WEIGHT_PERM, weight)
    if found.weight.buffer in constants:
        em = BlockBuilder()
        flag = on_first_call(em, entry, lambda then: then.add(copy))
        keep_between_calls(kernel, [flag, weight])
        for op in em.take():
            parent.insert_op_before(op, nest)
    else:
        parent.insert_op_before(copy, nest)
    if not _retarget_copies(found, image):
        parent.insert_op_before(_channels_last(found.image.buffer, _IMAGE_PERM, image), nest)
    n_, c_, h_, w_ = nest.shape
    new = loop.ParallelOp([n_, h_, w_, c_])
    block = new.body.block
    n, h, w, c = block.args
    old = nest.body.block.args
    mapping: dict[SSAValue, SSAValue] = {old[0]: n, old[1]: c, old[2]: h, old[3]: w}
    for op in nest.body.block.ops:
        if isinstance(op, loop.YieldOp):
            break
        if op is found.reduce:
            mapping[op.results[0]] = _taps(found, block, mapping, image, weight)
            continue
        block.add_op(op.clone(value_mapper=mapping))
    block.add_op(loop.YieldOp())
    parent.insert_op_before(new, nest)
    nest.detach()
    nest.erase()
    store_through_transposes(new, threads)
    rows = found.reduce.shape[1]
    image_shape = buffer_shape(image)
    assert image_shape is not None
    _block_channels(new, _channel_block(c_, rows * image_shape[2], found.reduce.shape))


def _channel_block(channels: int, window_points: int, taps: Sequence[int]) -> int:
    """Channels per block of the channel-vectorised nest: the most (a multiple of 16
    dividing `channels`) whose working set, the input rows one output row reads
    (`window_points` points) and the taps' weights, fits `_L1_BYTES`. All of them when
    they fit. With every channel innermost, a 3x3 [1,960,7,7] read 100 KB between uses
    of an input vector and ran from L2 at a quarter of its FMA rate."""
    per_channel = 4 * (window_points + math.prod(taps))
    if channels * per_channel <= _L1_BYTES:
        return channels
    blocks = [b for b in range(16, channels, 16) if channels % b == 0]
    fitting = [b for b in blocks if b * per_channel <= _L1_BYTES]
    return max(fitting) if fitting else min(blocks, default=channels)


def _block_channels(nest: loop.ParallelOp, block: int) -> None:
    """The nest over [N, Ho, Wo, C] loops over [N, C / block, Ho, Wo, block] instead
    (c = its second index * block + its last), so one block of channels is finished over
    the whole image, its inputs reused from L1, before the next."""
    batch, rows, columns, channels = nest.shape
    if block >= channels:
        return
    blocked = loop.ParallelOp([batch, channels // block, rows, columns, block])
    body = blocked.body.block
    n, outer, h, w, inner = body.args
    scaled = arith.MuliOp(outer, index_in(body, block))
    body.add_op(scaled)
    c = arith.AddiOp(scaled.result, inner)
    body.add_op(c)
    old = nest.body.block.args
    _replace_nest(nest, blocked, {old[0]: n, old[1]: h, old[2]: w, old[3]: c.result})


def _taps(
    found: _Depthwise,
    block: Block,
    mapping: dict[SSAValue, SSAValue],
    image: SSAValue,
    weight: SSAValue,
) -> SSAValue:
    """The reduction's body once per tap into `block`, summed in `_CHAINS` partial sums
    added to the reduction's init; returns the sum."""
    reduce = found.reduce
    args = reduce.body.block.args
    chains: list[SSAValue | None] = [None] * _CHAINS
    for number, point in enumerate(product(*(range(e) for e in reduce.shape))):
        local = dict(mapping)
        for arg, position in zip(args, point, strict=True):
            local[arg] = index_in(block, position)
        value: SSAValue | None = None
        for op in reduce.body.block.ops:
            if isinstance(op, loop.YieldOp):
                value = local[op.values[0]]
                break
            if isinstance(op, loop.LoadOp) and (op is found.image or op is found.weight):
                perm = _IMAGE_PERM if op is found.image else _WEIGHT_PERM
                indices = [local.get(i, i) for i in op.indices]
                load = loop.LoadOp(
                    image if op is found.image else weight, [indices[d] for d in perm]
                )
                block.add_op(load)
                local[op.result] = load.result
                continue
            clone = op.clone(value_mapper=local)
            if isinstance(clone, arith.MulfOp):
                clone.fastmath = _CONTRACT
            block.add_op(clone)
        assert value is not None
        k = number % _CHAINS
        previous = chains[k]
        if previous is None:
            chains[k] = value
        else:
            add = arith.AddfOp(previous, value, _CONTRACT)
            block.add_op(add)
            chains[k] = add.result
    partial = [v for v in chains if v is not None]
    while len(partial) > 1:
        add = arith.AddfOp(partial[0], partial[1], _CONTRACT)
        block.add_op(add)
        partial = [*partial[2:], add.result]
    init = mapping.get(reduce.init, reduce.init)
    if constant(init) == 0:
        return partial[0]
    add = arith.AddfOp(init, partial[0], _CONTRACT)
    block.add_op(add)
    return add.result


def vectorise_depthwise(
    kernel: loop.KernelOp,
    lanes: int,
    threads: bool = False,
    constant_positions: Set[int] = frozenset(),
) -> None:
    """Rewrites every top-level depthwise nest of `kernel` this module takes (`threads`:
    the NCHW stores' transposing loop may run on threads; `constant_positions`: the
    kernel's arguments every call fills with a constant)."""
    constants = {kernel.body.block.args[n] for n in constant_positions}
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        found = match_depthwise(nest, lanes)
        if found is not None:
            rewrite_depthwise(found, threads, constants)
