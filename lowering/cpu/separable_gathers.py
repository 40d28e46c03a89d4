"""Gathered columns read from a pass over the rows.

A bilinear Resize is imported as gathers by row and by column through constant index and
weight tables: each output point reads four input points, `x[r0(oh), c(ow)]` and
`x[r1(oh), c(ow)]` for two columns c, the column index loaded from a table. LLVM keeps
such a nest scalar (a column from a table is not affine), and [1,64,56,56] x2 took 2.2x
onnxruntime's time.

The part of the point's value that depends on the output column only through one gathered
column c, here `x[r0, c] * w0 + x[r1, c] * w1`, is the same for every output column that
gathers c. So the nest becomes two:
1. over [..., oh, j] for every input column j: that part, with j for c, stored to a
   scratch buffer R (its row indices and weights fixed per row, its loads contiguous in j:
   LLVM vectorises it);
2. the nest itself, reading R[..., oh, c] where the part was: two gathers from a row of R
   (in cache) per point, not four from the input.
Parts that are the same expression of different gathered columns share one R.

Taken for a top-level nest of one store whose part, for some gathered column c (an index
computed from a load that depends on the nest's last index), reads at least two points of
a kernel argument at column c and at indices that do not depend on the last index, and
depends on that index through c alone; and where the pass computes at most
MAX_COLUMNS_PER_OUTPUT times the parts the nest did (not a resize down by more than 4).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.contractions import clonable, factor
from graphfuse.lowering.cpu.gemm.split_reductions import remove_dead
from graphfuse.lowering.cpu.nest_indices import buffer_shape
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

MAX_COLUMNS_PER_OUTPUT = 2
"""A rows pass is made only where it computes at most this many times the parts the
nest computed itself (one per output point and part of the group): a bilinear resize
down by 4 computes 2 parts per output point, and its pass as many, vectorised; further
down, the pass would mostly compute parts nobody reads."""


def separate_gathers(kernel: loop.KernelOp) -> int:
    """Rewrites every top-level nest of `kernel` this module takes; returns how many
    scratch rows buffers it made."""
    made = 0
    for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
        made += _rewrite(kernel, nest)
    return made


def _leaves(
    value: SSAValue, stop: SSAValue, nest: Operation
) -> tuple[set[SSAValue], list[Operation]] | None:
    """The nest indices `value` depends on, not looking through `stop`, and the ops
    between in operand-first order (the same order for the same expression, which
    `_rewrite` compares); None if one of them cannot be cloned."""
    args: set[SSAValue] = set()
    ops: list[Operation] = []
    seen: set[Operation] = set()

    def visit(current: SSAValue) -> bool:
        if current is stop or not inside(current, nest):
            return True
        if isinstance(current, BlockArgument):
            args.add(current)
            return True
        op = current.owner
        assert isinstance(op, Operation)
        if op in seen:
            return True
        if not clonable(op):
            return False
        seen.add(op)
        if not all(visit(operand) for operand in op.operands):
            return False
        ops.append(op)
        return True

    return (args, ops) if visit(value) else None


def _gathered(load: loop.LoadOp, nest: loop.ParallelOp) -> SSAValue | None:
    """The load's column when it is gathered: computed from a load that depends on the
    nest's last index, its other indices free of that index."""
    if not load.indices:
        return None
    last = nest.body.block.args[-1]
    column = load.indices[-1]
    found = factor(column, nest)
    if found is None or last not in found.depends:
        return None
    if not any(isinstance(op, loop.LoadOp) for op in found.chain):
        return None
    for index in load.indices[:-1]:
        other = factor(index, nest)
        if other is None or last in other.depends:
            return None
    return column


def _part(load: loop.LoadOp, column: SSAValue, nest: loop.ParallelOp) -> SSAValue:
    """The largest value over `load` that depends on the nest's last index through
    `column` alone (climbing single uses)."""
    last = nest.body.block.args[-1]
    value: SSAValue = load.result
    while len(uses := list(value.uses)) == 1:
        user = uses[0].operation
        if isinstance(user, loop.StoreOp | loop.YieldOp) or user.regions or not user.results:
            break
        if user.dialect_name() != "arith" or user.parent_op() is not nest:
            break
        found = _leaves(user.results[0], column, nest)
        if found is None or last in found[0]:
            break
        value = user.results[0]
    return value


Part = tuple[SSAValue, int, list[Operation]]
"""A part's gathered column, the width of the source it gathers from, and its ops in
operand-first order (`_leaves`)."""


def _parts(kernel: loop.KernelOp, nest: loop.ParallelOp) -> dict[SSAValue, Part]:
    """Each part of `nest` worth a rows pass."""
    body = nest.body.block
    if len(nest.shape) < 2 or sum(isinstance(op, loop.StoreOp) for op in nest.walk()) != 1:
        return {}
    if any(op.regions for op in body.ops):
        return {}
    parts: dict[SSAValue, Part] = {}
    for load in [op for op in body.ops if isinstance(op, loop.LoadOp)]:
        shape = buffer_shape(load.buffer)
        column = _gathered(load, nest) if load.buffer.owner is kernel.body.block else None
        if shape is None or column is None:
            continue
        part = _part(load, column, nest)
        found = _leaves(part, column, nest)
        if part in parts or found is None:
            continue
        ops = found[1]
        reads = sum(isinstance(op, loop.LoadOp) and op.buffer is load.buffer for op in ops)
        if reads >= 2 and _columns_in_bounds(ops, column, shape[-1]):
            parts[part] = (column, shape[-1], ops)
    return parts


def _rewrite(kernel: loop.KernelOp, nest: loop.ParallelOp) -> int:
    """Moves each part of `nest` (see `_parts`) to a rows pass before it; the same
    expression of different columns shares one. Returns the passes made."""
    body, entry = nest.body.block, kernel.body.block
    parent = nest.parent_block()
    assert parent is not None
    groups: dict[str, list[tuple[SSAValue, SSAValue, loop.ParallelOp, loop.ParallelOp]]] = {}
    for part, (column, width, ops) in _parts(kernel, nest).items():
        rows, inner = _rows_nest(nest, column, ops, width)
        groups.setdefault(str(rows), []).append((part, column, rows, inner))
    made = 0
    for group in groups.values():
        first, _, rows, inner = group[0]
        width = inner.shape[0]
        # `width` parts a row, where the nest computed len(group) per output point.
        if width > MAX_COLUMNS_PER_OUTPUT * len(group) * nest.shape[-1]:
            for _, _, other, _ in group:
                other.erase()
            continue
        typ: MemRefType[Attribute] = MemRefType(first.type, [*nest.shape[:-1], width])
        buffer = entry.insert_arg(typ, len(entry.args))
        _store_rows(rows, inner, buffer)
        parent.insert_op_before(rows, nest)
        for part, column, other, _ in group:
            if other is not rows:
                other.erase()
            owner = part.owner
            assert isinstance(owner, Operation)
            read = loop.LoadOp(buffer, [*body.args[:-1], column])
            body.insert_op_before(read, owner)
            part.replace_all_uses_with(read.result)
        made += 1
    if made:
        remove_dead(body)
    return made


def _columns_in_bounds(ops: Sequence[Operation], column: SSAValue, width: int) -> bool:
    """Every load of `ops` reading at `column` reads it as the last index of a buffer
    `width` wide, so every j below `width` stays in bounds."""
    for op in ops:
        if isinstance(op, loop.LoadOp) and column in op.indices:
            shape = buffer_shape(op.buffer)
            if (
                shape is None
                or shape[-1] != width
                or list(op.indices).index(column) != len(shape) - 1
            ):
                return False
    return True


def _rows_nest(
    nest: loop.ParallelOp, column: SSAValue, ops: Sequence[Operation], width: int
) -> tuple[loop.ParallelOp, loop.ParallelOp]:
    """A nest over [...] (the nest's own but its last) holding one over j (the source's
    `width` columns), computing the part `ops` end with, j for `column`; returns both.
    The ops that do not depend on j (row indices and weights) sit in the outer nest, so
    LLVM sees them as invariants of the inner loop (it cannot hoist their loads past the
    scratch stores itself). The part's result is left unstored, see `_store_rows`."""
    rows = loop.ParallelOp(nest.shape[:-1])
    inner = loop.ParallelOp([width])
    outer_block, block = rows.body.block, inner.body.block
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(nest.body.block.args[:-1], outer_block.args, strict=True)
    )
    mapping[column] = block.args[0]
    varying: set[SSAValue] = {column}
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        if any(operand in varying for operand in op.operands):
            varying.update(op.results)
            block.add_op(clone)
        else:
            outer_block.add_op(clone)
    outer_block.add_ops([inner, loop.YieldOp()])
    return rows, inner


def _store_rows(rows: loop.ParallelOp, inner: loop.ParallelOp, buffer: SSAValue) -> None:
    """Ends `inner` (in `rows`) with the store of its last op's result, the part, at the
    indices of both nests."""
    block = inner.body.block
    last = block.last_op
    assert last is not None and last.results
    indices = [*rows.body.block.args, *block.args]
    block.add_ops([loop.StoreOp(last.results[0], buffer, indices), loop.YieldOp()])
