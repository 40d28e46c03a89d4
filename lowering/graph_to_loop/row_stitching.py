"""Which reduction kernels are lowered row by row ("stitched"), and what each row keeps.

Lowered in stages, each reduction of a softmax over the rows of [N, M] is a loop over all
rows writing a scratch buffer, and every stage streams the whole input again. Stitched, the
kernel is one loop over the rows; per row it computes each reduction once as a scalar, then
writes the row's results in an inner loop while the row is in cache (the reduction
stitching of APOLLO and IREE's dispatch regions):

    loop.parallel [N] {^(%i):
      %max = loop.reduce max [M] {x[i, k]}
      %sum = loop.reduce add [M] {exp(x[i, k] - %max)}
      loop.parallel [M] {^(%j): out[i, j] = exp(x[i, j] - %max) / %sum}
    }

`stitched_rows` says which kernels qualify; `row_plan` which costly values a row keeps.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_of, tensor_type_of
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.loop.emitter import Index, compute_type, is_float
from graphfuse.lowering.graph_to_loop.scalars.scalar_ops import SCALAR_RULES

ROW_BUFFERS = True
"""Keep costly values a row reduction and a later stage both need (see `row_plan`)."""

COSTLY_OPS: tuple[type[Operation], ...] = (
    graph.ExpOp,
    graph.LogOp,
    graph.TanhOp,
    graph.SigmoidOp,
    graph.ErfOp,
    graph.SqrtOp,
    graph.RsqrtOp,
    graph.DivOp,
    graph.PowOp,
)
"""Elementwise ops worth a store and a load of a row rather than a second evaluation."""


@dataclass(frozen=True)
class RowPlan:
    """How a stitched kernel runs: one loop over `rows`; per row, the `row_values` (one
    element per row: the reductions and what is computed from them alone, in program
    order), then the results. Each value of `kept` is written, just before the first
    reduction reading it, into its row of the output buffer at the given result position."""

    rows: tuple[int, ...]
    row_values: list[SSAValue]
    kept: dict[SSAValue, int]

    def trailing(self, value: SSAValue) -> tuple[int, ...]:
        """The dims of `value` inside one row."""
        return shape_of(value)[len(self.rows) :]

    def row_index(self, row: Sequence[Index], value: SSAValue) -> tuple[Index, ...]:
        """The index of a value with one element per row: the row, then zeros."""
        return (*row, *(0 for _ in self.trailing(value)))


def reduced_rows(op: graph.ReduceOp) -> tuple[int, ...] | None:
    """The leading dims `op` keeps when it reduces exactly the trailing dims, else None."""
    shape = shape_of(op.input)
    axes = sorted(rules.normalize_axes(op.axes.get_values(), len(shape)))
    first = len(shape) - len(axes)
    if first < 1 or axes != list(range(first, len(shape))):
        return None
    return shape[:first]


def _forward(values: Iterable[SSAValue]) -> list[SSAValue]:
    """`values` and every value computed from them inside the kernel."""
    seen: dict[SSAValue, None] = {}
    pending = list(values)
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen[value] = None
        for use in value.uses:
            pending.extend(use.operation.results)
    return list(seen)


def _reads_own_row(user: Operation, operand: SSAValue, rows: tuple[int, ...]) -> bool:
    """`user` computes its element at an index starting with row r from `operand`'s
    elements at indices starting with row r (so a row's scalar is reused, never
    recomputed at another row)."""
    if isinstance(user, graph.YieldOp):
        return True
    if isinstance(user, graph.ReduceOp):
        shape = shape_of(user.input)
        axes = rules.normalize_axes(user.axes.get_values(), len(shape))
        return min(axes, default=len(shape)) >= len(rows)
    same_rank = all(len(shape_of(r)) == len(shape_of(operand)) for r in user.results)
    if type(user) in SCALAR_RULES or isinstance(user, graph.BroadcastToOp):
        return same_rank
    # A reshape maps the dims both shapes start with directly; both start with the rows.
    return isinstance(user, graph.ReshapeOp)


def _row_local(values: Iterable[SSAValue], rows: tuple[int, ...]) -> bool:
    """Everything computed from `values` has one row per row and reads its own row."""
    for value in _forward(values):
        if shape_of(value)[: len(rows)] != rows:
            return False
        if not all(_reads_own_row(use.operation, value, rows) for use in value.uses):
            return False
    return True


def stitched_rows(
    materialized: Sequence[Operation], results: Sequence[SSAValue], copied: bool
) -> tuple[int, ...] | None:
    """The row dims L of a kernel that qualifies for the stitched lowering, else None
    (`materialized`: its ops needing a buffer when staged; `copied`: it copies operands).

    A kernel qualifies when every op that would be materialised reduces the trailing dims
    of its input over the same leading "row" dims L (at least two rows), no operand is
    copied to another layout, every result's shape starts with L, and everything computed
    from a reduction reads it at its own row (elementwise ops of one rank, broadcast_to,
    reshapes that keep L, reductions of trailing dims): then each reduction is read only
    at the row being computed, and the emitter's cache finds the row's scalar instead of
    recomputing it."""
    if not materialized or copied:
        return None
    reductions = [op for op in materialized if isinstance(op, graph.ReduceOp)]
    if len(reductions) != len(materialized):
        return None
    found = {reduced_rows(op) for op in reductions}
    rows = found.pop()
    if found or rows is None or math.prod(rows) < 2:
        return None
    if any(shape_of(r)[: len(rows)] != rows for r in results):
        return None
    if not _row_local((op.result for op in reductions), rows):
        return None
    return rows


def _costly(value: SSAValue) -> bool:
    """The elementwise cone computing `value` at one point holds a costly op."""
    shape = shape_of(value)
    pending = [value]
    seen: set[SSAValue] = set()
    while pending:
        current = pending.pop()
        op = current.owner
        if current in seen or not isinstance(op, Operation) or type(op) not in SCALAR_RULES:
            continue
        seen.add(current)
        if isinstance(op, COSTLY_OPS):
            return True
        pending.extend(v for v in op.operands if shape_of(v) == shape)
    return False


def _read_at_own_point(value: SSAValue, rows: tuple[int, ...]) -> bool:
    """Every read of `value` (through elementwise ops of its shape) is at the point being
    computed or by a reduction of whole rows."""
    shape = shape_of(value)
    pending = [value]
    seen: set[SSAValue] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for use in current.uses:
            user = use.operation
            if isinstance(user, graph.ReduceOp) and reduced_rows(user) == rows:
                continue
            if isinstance(user, graph.YieldOp):
                continue
            if type(user) not in SCALAR_RULES or any(shape_of(r) != shape for r in user.results):
                return False
            pending.extend(user.results)
    return True


def _worth_keeping(value: SSAValue, rows: tuple[int, ...]) -> bool:
    trailing = shape_of(value)[len(rows) :]
    return (
        ROW_BUFFERS
        and math.prod(trailing) >= 2
        and any(not isinstance(use.operation, graph.ReduceOp) for use in value.uses)
        and _costly(value)
        and _read_at_own_point(value, rows)
    )


def _home(value: SSAValue, results: Sequence[SSAValue], taken: Collection[int]) -> int | None:
    """A result position, not `taken`, whose buffer can hold `value`'s rows unrounded
    (same shape, stored in `value`'s compute type): `value`'s own if it is a result (its
    result loop then stores nothing), else the first."""
    element = compute_type(tensor_type_of(value).get_element_type())
    if not is_float(element):
        return None
    free = [
        position
        for position, result in enumerate(results)
        if position not in taken
        and shape_of(result) == shape_of(value)
        and tensor_type_of(result).get_element_type() == element
    ]
    own = [position for position in free if results[position] is value]
    return (own or free or [None])[0]


def row_plan(
    ops: Sequence[Operation],
    materialized: Sequence[Operation],
    results: Sequence[SSAValue],
    rows: tuple[int, ...],
) -> RowPlan:
    """The plan of a kernel `stitched_rows` accepted (`ops`: the kernel body in order).

    Kept rows. Softmax needs exp(x - max) twice per row: inside the sum and for the
    output. Recomputing it costs a second exp per element; keeping it costs a store and a
    load of a row that is in L1. So a reduction's input that is costly (its elementwise
    cone holds one of `COSTLY_OPS`) and that something other than a reduction also uses
    is written once per row, by the first reduction that reads it (its body stores each
    element as it sums it), into the row of an output buffer of its shape (PyTorch's CPU
    softmax does the same); later reductions and the result loop load it, and the result
    loop overwrites it last. Cheap inputs (layer-norm's (x - mean)^2, RMS-norm's x*x) are
    recomputed: one multiply costs less than a store and a load.

    That output row is safe to borrow because every read of the kept value is at the
    point being computed (elementwise ops of its shape, or reductions of whole rows, which
    run before any result is stored) and the result loop loads it before storing there.
    Without such an output (an f16 result would round the kept value; no result of its
    shape) the value is recomputed. Not a stack buffer per row: the lowering to `cf`
    restores no stack in an `scf.for`/`scf.parallel` body, so each row's `alloca` would
    stay live until the kernel returns (docs/decisions.md)."""
    reductions = [op for op in materialized if isinstance(op, graph.ReduceOp)]
    dependent = set(_forward(op.result for op in reductions))
    row_values: list[SSAValue] = [
        r
        for op in ops
        if not isinstance(op, graph.YieldOp)
        for r in op.results
        if r in dependent and all(d == 1 for d in shape_of(r)[len(rows) :])
    ]
    kept: dict[SSAValue, int] = {}
    for op in reductions:
        if op.input in kept or not _worth_keeping(op.input, rows):
            continue
        position = _home(op.input, results, kept.values())
        if position is not None:
            kept[op.input] = position
    return RowPlan(rows, row_values, kept)
