"""Max and average pooling as a pass down the window's rows, then one along its columns.

convert-graph-to-loop writes a pool as a nest over the output points `[..., Ho, Wo]` with
a `loop.reduce max` (or `add`, average pooling) `[KH, KW]` inside. A max pool reads the
input at clamped positions `min(max(ow * sw + j - left, 0), W - 1)` (a padded tap reads
the nearest column, which is in the same window); an average pool reads there too but
selects 0 for a tap outside the input (`select(inside, x, 0)`), and divides after. The
clamped column is not affine, so LLVM leaves the nest scalar: one float and two index
compares per tap, 3-4 GFLOP/s. ResNet's stem pool took as long as one of its 3x3
convolutions, and an Inception branch's 3x3 average pool 8x onnxruntime's time.

A maximum (a sum) over a window is the maximum (the sum) over its columns of the maxima
(the sums) down them, so here such a nest becomes
- a nest over `[..., Ho, Q]` (Q = (Wo - 1) * sw + KW window columns) that reduces over
  the KH taps of each column into a scratch buffer `V`, its inner loop reading the input
  rows contiguously (the rows' clamps and tests do not move with the column). Columns
  left of or past the input get the reduction's identity (its init: -inf for a float
  maximum, 0 for a sum). A sum's taps there were the select's 0 already; a maximum's read
  a repeated column, which the identity replaces only where every window holds an input
  column (the graph dialect's rule that padding is smaller than the kernel makes it so);
- the pooling nest itself, its reduction now over the KW columns of `V` at the affine
  `ow * sw + j`, which LLVM vectorises as strided (interleaved) loads. What follows the
  reduction (an average's divisor, the stores) is unchanged.

Windows that do not overlap (KW <= sw) and read no padding are left alone: their loads
are affine already, and the scratch pass only adds traffic (2x2 at stride 2: 1.2x the
time).

The reduction's body may hold what fused into the pool before it (an elementwise
prologue, `relu(a + b)`): it is evaluated once per input point read, in the first nest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, MemRefType, i1
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.hints import isa

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.contractions import factor
from graphfuse.lowering.cpu.nest_indices import (
    andi_tests,
    buffer_shape,
    clamped,
    constant,
    index_in,
)
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

_SEPARABLE = (loop.ReduceKind.MAX, loop.ReduceKind.MIN, loop.ReduceKind.ADD)
_IDEMPOTENT = (loop.ReduceKind.MAX, loop.ReduceKind.MIN)
"""Reductions a repeated or an identity column leaves unchanged: only these may read a
clamped column outside the input as the identity."""


@dataclass(frozen=True)
class _Pool:
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    column: SSAValue
    """The column index every load of the window reads (clamped or not)."""
    offset: int
    """The column read by window column q (q = ow * sw + j) is q + offset..."""
    clamped: bool
    """...clamped into [0, width) (else it is always inside)."""
    width: int
    stride: int
    column_ops: frozenset[Operation]
    """The body's ops that compute the column from ow and j (not cloned into the first
    nest, which has no ow or j)."""
    inside_tests: frozenset[Operation]
    """Compares of the column position with 0 and the width, guarding the value (true
    in the first nest, which reads inside columns only)."""


def _linear(value: SSAValue, args: Sequence[SSAValue]) -> tuple[list[int], int] | None:
    """`value` as sum(coefficients[k] * args[k]) + constant, through index constants,
    addi, subi and muli by a constant; None for anything else."""
    number = constant(value)
    if isinstance(number, int):
        return [0] * len(args), number
    if value in args:
        coefficients = [0] * len(args)
        coefficients[list(args).index(value)] = 1
        return coefficients, 0
    op = value.owner
    if isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        left, right = _linear(op.lhs, args), _linear(op.rhs, args)
        if left is None or right is None:
            return None
        if isinstance(op, arith.MuliOp):
            if any(left[0]) and any(right[0]):
                return None
            scale, other = (left[1], right) if not any(left[0]) else (right[1], left)
            return [scale * c for c in other[0]], scale * other[1]
        sign = -1 if isinstance(op, arith.SubiOp) else 1
        coefficients = [a + sign * b for a, b in zip(left[0], right[0], strict=True)]
        return coefficients, left[1] + sign * right[1]
    return None


def _window_reduce(nest: loop.ParallelOp) -> loop.ReduceOp | None:
    """The nest's one region op, a float max, min or sum over a 2-d window whose body
    stores nothing and nests no loops, reading the nest's indices and values from
    outside the nest only (the first nest is built from the body alone)."""
    ops = list(nest.body.block.ops)
    reduces = [op for op in ops if isinstance(op, loop.ReduceOp)]
    if len(nest.shape) < 2 or len(reduces) != 1:
        return None
    reduce = reduces[0]
    if any(op.regions and op is not reduce for op in ops) or len(reduce.shape) != 2:
        return None
    if reduce.kind.data not in _SEPARABLE or not isa(reduce.result.type, AnyFloat):
        return None
    body = list(reduce.body.block.ops)
    if any(op.regions or isinstance(op, loop.StoreOp) for op in body):
        return None
    if inside(reduce.init, nest):
        return None
    args = set(nest.body.block.args)
    for operand in (operand for op in body for operand in op.operands):
        if inside(operand, nest) and not inside(operand, reduce) and operand not in args:
            return None
    return reduce


def match_pool(nest: loop.ParallelOp) -> _Pool | None:
    """The max, min or sum pooling `nest` computes, if it is one this module takes."""
    reduce = _window_reduce(nest)
    if reduce is None:
        return None
    loads = [op for op in reduce.body.block.ops if isinstance(op, loop.LoadOp)]
    if not loads or any(not load.indices for load in loads):
        return None  # a scalar read in the window (a rank-0 buffer) is no pool's column
    if any(load.indices[-1] is not loads[0].indices[-1] for load in loads):
        return None
    column = loads[0].indices[-1]
    ow, j = nest.body.block.args[-1], reduce.body.block.args[1]
    clamp = clamped(column)
    position, extent = clamp if clamp is not None else (column, None)
    linear = _linear(position, [ow, j])
    shapes = {buffer_shape(load.buffer) for load in loads}
    if linear is None or linear[0][1] != 1 or linear[0][0] < 1 or len(shapes) != 1:
        return None
    shape = shapes.pop()
    if shape is None or (extent is not None and extent != shape[-1]):
        return None
    width = shape[-1]
    computed = factor(column, reduce)
    tests = _inside_tests(reduce, position, width)
    if computed is None or tests is None:
        return None
    column_ops = frozenset(computed.chain)
    if not _window_columns_only(reduce, column_ops, tests, ow):
        return None
    stride = linear[0][0]
    if clamp is None and reduce.shape[1] <= stride:
        return None  # affine loads, no window overlaps: LLVM vectorises the nest as it is
    if clamp is not None and not tests and reduce.kind.data not in _IDEMPOTENT:
        return None  # a clamped column outside the input counts in a sum
    found = _Pool(
        nest, reduce, column, linear[1], clamp is not None, width, stride, column_ops, tests
    )
    return found if _every_window_reads_input(found) else None


def _inside_tests(
    reduce: loop.ReduceOp, position: SSAValue, width: int
) -> frozenset[Operation] | None:
    """The compares `position >= 0` and `position < width` when the body's value is
    `select(those and row tests, value, init)` (a tap outside the input gives the
    identity: average pooling); no compares when the column is not tested; None when
    it is tested some other way."""
    compares = frozenset(
        use.operation for use in position.uses if isinstance(use.operation, arith.CmpiOp)
    )
    if not compares:
        return frozenset()
    last = reduce.body.block.last_op
    assert isinstance(last, loop.YieldOp)
    select = last.values[0].owner
    if not isinstance(select, arith.SelectOp) or constant(select.rhs) != constant(reduce.init):
        return None
    leaves = andi_tests(select.cond)
    if leaves is None or len(compares) != 2:
        return None
    tested = {(name, bound) for x, name, bound in leaves if x is position}
    if tested != {("sge", 0), ("slt", width)}:
        return None
    # Each compare feeds the select's andi tree alone.
    tree: set[Operation] = {select}
    stack = [select.cond]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, arith.AndIOp):
            tree.add(owner)
            stack.extend(owner.operands)
    if any(use.operation not in tree for op in compares for use in op.result.uses):
        return None
    return compares


def _window_columns_only(
    reduce: loop.ReduceOp,
    column_ops: frozenset[Operation],
    tests: frozenset[Operation],
    ow: SSAValue,
) -> bool:
    """ow and the column tap j reach nothing but the loads' last index and the column's
    inside tests: every other load index and every value of the body is the same for
    all of a window's columns."""
    moving = {ow, reduce.body.block.args[1], *(r for op in column_ops for r in op.results)}
    allowed = column_ops | tests
    for op in reduce.body.block.ops:
        if op in tests:
            continue
        if op in column_ops:
            if any(
                use.operation not in allowed and not isinstance(use.operation, loop.LoadOp)
                for result in op.results
                for use in result.uses
            ):
                return False
            continue
        indices = list(op.indices[:-1]) if isinstance(op, loop.LoadOp) else list(op.operands)
        if any(operand in moving for operand in indices):
            return False
    return True


def _every_window_reads_input(pool: _Pool) -> bool:
    """Each window holds a column inside the input (so the identity fill never wins), and
    an unclamped window never leaves it."""
    kw = pool.reduce.shape[1]
    for ow in range(pool.nest.shape[-1]):
        first = ow * pool.stride + pool.offset
        last = first + kw - 1
        if last < 0 or first > pool.width - 1:
            return False
        if not pool.clamped and (first < 0 or last > pool.width - 1):
            return False
    return True


def _shifted(block: Block, index: SSAValue, offset: int) -> SSAValue:
    """`index + offset`, computed at the end of `block` unless `offset` is 0."""
    if not offset:
        return index
    add = arith.AddiOp(index, index_in(block, offset))
    block.add_op(add)
    return add.result


def _fill(shape: Sequence[int], value: SSAValue, buffer: SSAValue, first: int) -> loop.ParallelOp:
    """A nest storing `value` into `buffer`'s last-dimension columns first..first + shape[-1]."""
    nest = loop.ParallelOp(shape)
    block = nest.body.block
    *outer, t = block.args
    column = _shifted(block, t, first)
    block.add_ops([loop.StoreOp(value, buffer, [*outer, column]), loop.YieldOp()])
    return nest


def _columns(pool: _Pool, buffer: SSAValue, first: int, count: int) -> loop.ParallelOp:
    """The nest reducing down the window's rows for window columns first..first + count
    (all inside the input), storing into `buffer`."""
    nest, reduce = pool.nest, pool.reduce
    new = loop.ParallelOp([*nest.shape[:-1], count])
    block = new.body.block
    *outer, t = block.args
    mapping: dict[SSAValue, SSAValue] = dict(zip(nest.body.block.args[:-1], outer, strict=True))
    rows = loop.ReduceOp(reduce.kind.data, reduce.shape[:1], mapping.get(reduce.init, reduce.init))
    inner = rows.body.block
    mapping[reduce.body.block.args[0]] = inner.args[0]
    mapping[pool.column] = _shifted(inner, t, first + pool.offset)
    if pool.inside_tests:
        true = arith.ConstantOp(IntegerAttr(1, i1))
        inner.add_op(true)
        mapping.update({test.results[0]: true.result for test in pool.inside_tests})
    for op in reduce.body.block.ops:
        if op not in pool.column_ops and op not in pool.inside_tests:
            inner.add_op(op.clone(value_mapper=mapping))
    window_column = _shifted(block, t, first)
    block.add_ops(
        [rows, loop.StoreOp(rows.result, buffer, [*outer, window_column]), loop.YieldOp()]
    )
    return new


def _along_rows(pool: _Pool, buffer: SSAValue) -> loop.ReduceOp:
    """The pooling nest's new reduction: over the KW window columns of `buffer`."""
    nest, reduce = pool.nest, pool.reduce
    new = loop.ReduceOp(reduce.kind.data, reduce.shape[1:], reduce.init)
    block = new.body.block
    *outer, ow = nest.body.block.args
    scaled = arith.MuliOp(ow, index_in(block, pool.stride))
    column = arith.AddiOp(scaled.result, block.args[0])
    load = loop.LoadOp(buffer, [*outer, column.result])
    block.add_ops([scaled, column, load, loop.YieldOp(load.result)])
    return new


def rewrite_pool(pool: _Pool) -> None:
    """Replaces `pool`'s window reduction by the two passes of the module's doc; the
    columns' reductions are a new scratch argument of the kernel."""
    nest, reduce = pool.nest, pool.reduce
    kernel = nest.parent_op()
    parent = nest.parent_block()
    assert isinstance(kernel, loop.KernelOp) and parent is not None
    span = (nest.shape[-1] - 1) * pool.stride + reduce.shape[1]
    typ: MemRefType[Attribute] = MemRefType(reduce.result.type, [*nest.shape[:-1], span])
    entry = kernel.body.block
    buffer = entry.insert_arg(typ, len(entry.args))
    first = max(0, -pool.offset)
    last = min(span - 1, pool.width - 1 - pool.offset)
    outer = list(nest.shape[:-1])
    if first:
        parent.insert_op_before(_fill([*outer, first], reduce.init, buffer, 0), nest)
    parent.insert_op_before(_columns(pool, buffer, first, last - first + 1), nest)
    if last < span - 1:
        parent.insert_op_before(
            _fill([*outer, span - 1 - last], reduce.init, buffer, last + 1), nest
        )
    along = _along_rows(pool, buffer)
    nest.body.block.insert_op_before(along, reduce)
    reduce.result.replace_all_uses_with(along.result)
    reduce.detach()
    reduce.erase()


def separate_pools(kernel: loop.KernelOp) -> None:
    """Rewrites every top-level pooling nest of `kernel` this module takes."""
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        found = match_pool(nest)
        if found is not None:
            rewrite_pool(found)
