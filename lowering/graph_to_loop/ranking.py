"""Sort and top-k as ranking kernels: each element counts the elements that precede it.

An element's output position along the axis is the number of elements that come before it
in the sorted order (ties broken by position, so the sort is stable as NumPy's), and the
kernel stores it there. That needs no control flow but a guard for top-k's `rank < k`, and
every point is independent, so it runs in parallel; it costs n² comparisons per row, which
suits the short axes (class scores, small top-k) these opaque ops see in inference graphs.

Order, as the reference: ascending sort puts NaN last; a descending sort is the ascending
one reversed (NaN first); top-k takes the largest first with NaN after every number and the
lower index first among equals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerType, i64
from xdsl.ir import Block, Region, SSAValue

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.loop.emitter import Emitter, Index, is_float, point_index

ValueAt = Callable[[SSAValue, Sequence[Index]], SSAValue]

RANKING_OPS = (graph.SortOp, graph.TopKOp)
"""Ops that scatter their results: always materialised, by `emit_ranking`."""


def _precedes_ascending(em: Emitter, a: SSAValue, b: SSAValue, unsigned: bool = False) -> SSAValue:
    """a sorts strictly before b ascending (NaN last)."""
    if not is_float(a.type):
        return em.emit(arith.CmpiOp(a, b, "ult" if unsigned else "slt"))
    less = em.emit(arith.CmpfOp(a, b, "olt"))
    b_nan = em.emit(arith.CmpfOp(b, b, "uno"))
    a_number = em.emit(arith.CmpfOp(a, a, "ord"))
    return em.emit(arith.OrIOp(less, em.emit(arith.AndIOp(b_nan, a_number))))


def _precedes_largest_first(
    em: Emitter, a: SSAValue, b: SSAValue, unsigned: bool = False
) -> SSAValue:
    """a comes before b when taking the largest first (NaN after every number)."""
    if not is_float(a.type):
        return em.emit(arith.CmpiOp(a, b, "ugt" if unsigned else "sgt"))
    greater = em.emit(arith.CmpfOp(a, b, "ogt"))
    b_nan = em.emit(arith.CmpfOp(b, b, "uno"))
    a_number = em.emit(arith.CmpfOp(a, a, "ord"))
    return em.emit(arith.OrIOp(greater, em.emit(arith.AndIOp(b_nan, a_number))))


def _equal(em: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    if not is_float(a.type):
        return em.emit(arith.CmpiOp(a, b, "eq"))
    same = em.emit(arith.CmpfOp(a, b, "oeq"))
    both_nan = em.emit(
        arith.AndIOp(em.emit(arith.CmpfOp(a, a, "uno")), em.emit(arith.CmpfOp(b, b, "uno")))
    )
    return em.emit(arith.OrIOp(same, both_nan))


def emit_ranking(
    em: Emitter,
    op: graph.SortOp | graph.TopKOp,
    value_at: ValueAt,
    buffers: Sequence[Sequence[SSAValue]],
) -> None:
    """Store `op`'s results into `buffers` (one list per result) by ranking."""
    shape = tuple(graph.tensor_type_of(op.input).get_shape())
    axis = rules.normalize_axis(op.axis.value.data, len(shape))
    descending = isinstance(op, graph.SortOp) and op.descending is not None
    unsigned = graph.is_unsigned(graph.tensor_type_of(op.input).get_element_type())
    nest = loop.ParallelOp(shape)
    em.add(nest)
    with em.inside(nest.body.block):
        index = point_index(nest)
        mine = value_at(op.input, index)
        position = em.index_value(index[axis])

        def before(others: tuple[Index, ...]) -> SSAValue:
            j = others[0]
            theirs = value_at(op.input, (*index[:axis], j, *index[axis + 1 :]))
            if isinstance(op, graph.TopKOp):
                strictly = _precedes_largest_first(em, theirs, mine, unsigned)
            elif descending:
                strictly = _precedes_ascending(em, mine, theirs, unsigned)
            else:
                strictly = _precedes_ascending(em, theirs, mine, unsigned)
            tie_rule = "sgt" if descending else "slt"
            earlier = em.emit(arith.CmpiOp(em.index_value(j), position, tie_rule))
            tie = em.emit(arith.AndIOp(_equal(em, theirs, mine), earlier))
            first = em.emit(arith.OrIOp(strictly, tie))
            return em.emit(arith.ExtUIOp(first, i64))

        count = loop.ReduceOp(loop.ReduceKind.ADD, [shape[axis]], em.constant(0, i64))
        with em.inside(count.body.block):
            em.add(loop.YieldOp(before(tuple(count.body.block.args))))  # j: no folding
        rank = em.emit(arith.IndexCastOp(em.emit(count), IndexType()))
        target = (*index[:axis], rank, *index[axis + 1 :])
        if isinstance(op, graph.SortOp):
            _store_all(em, mine, buffers[0], target)
        else:
            _store_top_k(em, op, mine, position, rank, buffers, target)
        em.add(loop.YieldOp())


def _store_all(
    em: Emitter, value: SSAValue, buffers: Sequence[SSAValue], index: Sequence[Index]
) -> None:
    for buffer in buffers:
        stored = _storage(em, value, buffer)
        em.add(loop.StoreOp(stored, buffer, [em.index_value(i) for i in index]))


def _storage(em: Emitter, value: SSAValue, buffer: SSAValue) -> SSAValue:
    buffer_type = loop.memref_type(buffer.type)
    assert buffer_type is not None, "ranking results are stored to memrefs"
    element = loop.signless(buffer_type.get_element_type())
    return value if value.type == element else em.emit(arith.TruncFOp(value, element))


def _store_top_k(
    em: Emitter,
    op: graph.TopKOp,
    value: SSAValue,
    position: SSAValue,
    rank: SSAValue,
    buffers: Sequence[Sequence[SSAValue]],
    target: Sequence[Index],
) -> None:
    """Only the first k ranks are stored: the store sits in an scf.if."""
    k = op.k.value.data
    kept = em.emit(arith.CmpiOp(rank, em.index_value(k), "slt"))
    then = Block()
    guarded = scf.IfOp(kept, [], Region(then))
    em.add(guarded)
    with em.inside(then):
        _store_all(em, value, buffers[0], target)
        as_i64 = em.emit(arith.IndexCastOp(position, IntegerType(64)))
        for buffer in buffers[1]:
            em.add(loop.StoreOp(as_i64, buffer, [em.index_value(i) for i in target]))
        em.add(scf.YieldOp())
