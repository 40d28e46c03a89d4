"""Index maps of the data-movement ops: which input element an output element reads.

Each function takes the output index tuple and returns the operand's index tuple (a mix of
known integers and `index` values; the emitter folds the known parts). Broadcast, transpose,
reshape and slice are pure index arithmetic; pad and concat also need a condition, which
`data_movement_rules` turns into a clamped load and a select so the loop body stays
branch-free (and vectorisable).
"""

from __future__ import annotations

from collections.abc import Sequence

from graphfuse.dialects.graph.shape_rules import reshape_kept_dims
from graphfuse.dialects.loop.emitter import Emitter, Index

IndexTuple = tuple[Index, ...]


def broadcast(index: Sequence[Index], operand_shape: Sequence[int]) -> IndexTuple:
    """NumPy broadcasting: align trailing dims; a size-1 operand dim always reads 0."""
    tail = index[len(index) - len(operand_shape) :]
    return tuple(0 if dim == 1 else i for i, dim in zip(tail, operand_shape, strict=True))


def transpose(index: Sequence[Index], perm: Sequence[int]) -> IndexTuple:
    """Output dim i is input dim perm[i]."""
    result: list[Index] = [0] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        result[in_dim] = index[out_dim]
    return tuple(result)


def linearize(em: Emitter, index: Sequence[Index], shape: Sequence[int]) -> Index:
    """Row-major offset of `index` in `shape`."""
    offset: Index = 0
    for i, dim in zip(index, shape, strict=True):
        offset = em.iadd(em.imul(offset, dim), i)
    return offset


def delinearize(em: Emitter, offset: Index, shape: Sequence[int]) -> IndexTuple:
    """The row-major index tuple at `offset` (within `shape`) in `shape`. The outermost
    index is the quotient itself, with no remainder: a reshape that only splits dims then
    reads its input at an affine index, which loop-tile-matmul takes as a GEMM operand."""
    result: list[Index] = []
    for dim in reversed(shape[1:]):
        result.append(em.irem(offset, dim))
        offset = em.idiv(offset, dim)
    if shape:
        result.append(offset)
    return tuple(reversed(result))


def reshape(
    em: Emitter, index: Sequence[Index], out_shape: Sequence[int], in_shape: Sequence[int]
) -> IndexTuple:
    """Same row-major element; dims shared at the front or back map directly (no div/mod)."""
    head, tail = reshape_kept_dims(out_shape, in_shape)
    out_mid = out_shape[head : len(out_shape) - tail]
    in_mid = in_shape[head : len(in_shape) - tail]
    offset = linearize(em, index[head : len(index) - tail], out_mid)
    middle = delinearize(em, offset, in_mid)
    return (*index[:head], *middle, *index[len(index) - tail :])


def strided_slice(
    em: Emitter, index: Sequence[Index], starts: Sequence[int], strides: Sequence[int]
) -> IndexTuple:
    """input[start + i * stride] per dimension."""
    return tuple(
        em.iadd(em.imul(i, stride), start)
        for i, start, stride in zip(index, starts, strides, strict=True)
    )
