"""Packing a GEMM's B panels with vector loads where B's rows are contiguous runs.

loop-tile-matmul's B panel holds, for each reduction index k, NR output columns side by
side. When B is a matmul's `[K, N]` or a 1x1 convolution's NCHW input (`x[n, c, h, w]`:
for one channel the (h, w) columns are one contiguous run of H*W floats), a panel row is a
slice of one row of B. Rather than element by element, with each column split into its
dimensions, each `lanes` columns of a panel row are then one vector load from B, viewed
with the run's dimensions collapsed into one (so the load never crosses a dimension of the
memref it reads), and one vector store. It applies when B is one load whose trailing
indices are the trailing column indices themselves over memref dimensions of the same
extents (the run), no other index reads the run's columns, and `lanes` columns from a
multiple of `lanes` stay inside one run (the run a multiple of `lanes`, or all columns one
run). Full panels only: a last panel past N is packed point by point, with its clamps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.dialects import memref
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, i64
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.cpu.gemm.contractions import Contraction, factor


@dataclass(frozen=True)
class RowRun:
    """B's load and the number of trailing column dimensions forming each contiguous run."""

    load: loop.LoadOp
    dims: int

    @property
    def leading_indices(self) -> Sequence[SSAValue]:
        """The load's indices before the run's."""
        return self.load.indices[: -self.dims]


def row_run(found: Contraction, lanes: int) -> RowRun | None:
    """How B's full panels can be packed by vector loads along its rows, or None."""
    load = found.b.direct_load()
    if load is None:
        return None
    columns = found.args(found.columns)
    extents = [found.nest.shape[d] for d in found.columns]
    typ = load.buffer.type
    assert isinstance(typ, MemRefType)
    shape = cast(MemRefType[Attribute], typ).get_shape()
    dims = 0
    while (
        dims < min(len(columns), len(shape))
        and load.indices[-1 - dims] is columns[-1 - dims]
        and shape[-1 - dims] == extents[-1 - dims]
    ):
        dims += 1
    if dims == 0:
        return None
    run_columns = set(columns[-dims:])
    for index in load.indices[:-dims]:
        depends = factor(index, found.nest)
        if depends is None or depends.depends & run_columns:
            return None
    if math.prod(extents[-dims:]) % lanes and math.prod(extents[:-dims]) > 1:
        return None
    return RowRun(load, dims)


def collapsed_source(run: RowRun) -> tuple[Operation, int]:
    """A `memref.collapse_shape` of B's memref merging the run's dimensions into its last,
    and the run's length."""
    typ = run.load.buffer.type
    assert isinstance(typ, MemRefType)
    memref_type = cast(MemRefType[Attribute], typ)
    shape = list(memref_type.get_shape())
    leading = len(shape) - run.dims
    length = math.prod(shape[leading:])
    groups = [[i] for i in range(leading)] + [list(range(leading, len(shape)))]
    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])
    collapse = memref.CollapseShapeOp.create(
        operands=[run.load.buffer],
        result_types=[MemRefType(memref_type.get_element_type(), [*shape[:leading], length])],
        properties={"reassociation": reassociation},
    )
    return collapse, length
