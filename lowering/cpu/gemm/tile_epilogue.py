"""The epilogue of a loop-tile-matmul tile on `lanes` columns at a time (vector<lanes x T>).

A finished tile's sums each need the kernel's epilogue (bias, batch-norm, activation,
residual add, the store). Point by point that is scalar code with the columns' index
arithmetic per point, which for a short reduction costs more than the tile's multiply-adds.
Here each tile row runs the epilogue once per `lanes` columns: values that vary along the
columns become vectors, the others stay scalars (broadcast where a vector op needs them),
loads and stores along the columns become vector loads and stores, and the columns' split
into dimensions is done once per `lanes`.

That is exact only if those columns are neighbouring elements of every buffer the
epilogue touches along them, and the ops have vector forms: `vector_epilogue_fits` says
when; otherwise the scalar epilogue runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.dialects import arith, memref, vector
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, MemRefType, VectorType, i1, i64
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.gemm.contractions import Contraction
from graphfuse.lowering.cpu.gemm.gemm_builder import Mapping

_VECTOR_MATH = (math_dialect.AbsFOp, math_dialect.SqrtOp)


def _epilogue_ops(found: Contraction) -> list[Operation]:
    return [
        op
        for op in found.nest.body.block.ops
        if op is not found.reduce and not isinstance(op, loop.YieldOp)
    ]


def _access_fits(
    indices: Sequence[SSAValue], shape: Sequence[int], run: RunAccess, varying: set[SSAValue]
) -> bool:
    """A load or store the columns reach: its last indices are the run's column indices
    themselves, over dimensions of the run's extents, and no other index varies."""
    count = len(run.args)
    if len(indices) < count or list(indices[len(indices) - count :]) != list(run.args):
        return False
    if list(shape[len(shape) - count :]) != list(run.extents):
        return False
    return not any(i in varying for i in indices[: len(indices) - count])


def _varying_bool(op: Operation, varying: set[SSAValue]) -> bool:
    """Whether a lane-reached `op` takes or gives a lane-varying i1. It would be a
    vector<8xi1>, which xDSL's compares do not give and its `arith.select` prints in the
    scalar-condition form that mlir-opt then rejects (a select on a mask loaded along the
    columns); an i1 buffer also holds bytes (bool_buffers). A uniform i1 (a select on a
    per-row condition) stays scalar and is fine."""
    return any(r.type == i1 for r in op.results) or any(
        v.type == i1 and v in varying for v in op.operands
    )


def _shape(buffer: SSAValue) -> Sequence[int]:
    typ = buffer.type
    return cast(MemRefType[Attribute], typ).get_shape() if isinstance(typ, MemRefType) else ()


def _op_fits(op: Operation, run: RunAccess, varying: set[SSAValue]) -> bool:
    reached = any(v in varying for v in op.operands)
    if isinstance(op, loop.LoadOp | loop.StoreOp):
        if isinstance(op, loop.StoreOp) and op.value not in varying:
            return False
        if not reached and isinstance(op, loop.LoadOp):
            return True
        return _access_fits(op.indices, _shape(op.buffer), run, varying) and not (
            _varying_bool(op, varying)
        )
    if op.regions or not (op.dialect_name() == "arith" or isinstance(op, _VECTOR_MATH)):
        return False
    if reached and _varying_bool(op, varying):
        return False
    # The run's indices stand for `lanes` positions each: only loads and stores may take them.
    return not any(a in op.operands for a in run.args) and (
        not reached or all(not isinstance(r.type, IndexType) for r in op.results)
    )


@dataclass(frozen=True)
class RunAccess:
    """The trailing column dimensions whose points lie side by side in every buffer the
    epilogue reaches along the columns (a run of `length` elements)."""

    args: tuple[SSAValue, ...]
    extents: tuple[int, ...]
    whole: bool
    """The run spans every column dimension: the columns are one run."""

    @property
    def dims(self) -> int:
        return len(self.args)

    @property
    def length(self) -> int:
        return math.prod(self.extents)


def vector_epilogue_run(found: Contraction, lanes: int) -> RunAccess | None:
    """How the nest's epilogue can run on `lanes` neighbouring columns at once, or None.

    The run is the longest block of trailing column dimensions that every load and store
    the columns reach indexes by those column indices themselves, last and in order, over
    memref dimensions of the same extents (nothing else indexed by what the columns
    reach), so `lanes` columns in a run are neighbours in each buffer; its length is a
    multiple of `lanes` (a group of columns from a multiple of `lanes` never leaves it) or
    it spans all columns (a last partial group is left to the scalar epilogue). No index
    arithmetic may use the run's indices, and the ops must be arith ops, loads, stores,
    math.absf or math.sqrt (LLVM has vector forms of those; the f32 expansions of
    math-approximate are scalar), with no lane-varying i1 (`_varying_bool`; relu is a
    `maximumf`)."""
    columns = found.args(found.columns)
    extents = [found.nest.shape[d] for d in found.columns]
    for dims in range(len(columns), 0, -1):
        run = RunAccess(tuple(columns[-dims:]), tuple(extents[-dims:]), whole=dims == len(columns))
        if run.length % lanes and not run.whole:
            continue
        varying: set[SSAValue] = {*run.args, found.reduce.result}
        fits = True
        for op in _epilogue_ops(found):
            if not _op_fits(op, run, varying):
                fits = False
                break
            if any(v in varying for v in op.operands):
                varying.update(op.results)
        if fits:
            return run
    return None


class _VectorBody:
    """Clones the epilogue into `out`'s block with lane-varying values as vectors."""

    def __init__(
        self,
        out: BlockBuilder,
        mapping: Mapping,
        varying: set[SSAValue],
        lanes: int,
        access: tuple[RunAccess, SSAValue],
    ):
        self.out = out
        self.mapping = mapping
        self.varying = varying
        self.lanes = lanes
        self.run, self.position = access

    def _at(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> tuple[SSAValue, list[SSAValue]]:
        """The view and indices of a run access: the run's dimensions collapsed into one
        (a vector never crosses a memref dimension), indexed by the run position."""
        leading = [self.get(i) for i in indices[: len(indices) - self.run.dims]]
        view = self.get(buffer)
        if self.run.dims > 1:
            view = self.out.emit(_collapse(view, self.run.dims))
        return view, [*leading, self.position]

    def get(self, value: SSAValue) -> SSAValue:
        """The clone's value for `value` (itself if defined outside the nest)."""
        return self.mapping.get(value, value)

    def vector_of(self, value: SSAValue) -> SSAValue:
        """The mapped value as a vector (uniform ones broadcast)."""
        mapped = self.get(value)
        if value in self.varying:
            return mapped
        return self.out.emit(vector.BroadcastOp(mapped, VectorType(mapped.type, [self.lanes])))

    def operand_of(self, op: Operation, index: int) -> SSAValue:
        """Operand #index of `op`'s vector form: a vector, except a row-uniform select
        condition. arith.select's scalar-condition form picks whole vectors, and xDSL's
        select takes only an i1 and prints that form: a broadcast vector<lanes x i1> would
        disagree with the printed type."""
        value = op.operands[index]
        if isinstance(op, arith.SelectOp) and index == 0 and value not in self.varying:
            return self.get(value)
        return self.vector_of(value)

    def clone(self, op: Operation) -> None:
        if not any(v in self.varying for v in op.operands):
            copy = op.clone(value_mapper=self.mapping)
            self.out.add(copy)
            self.mapping.update(zip(op.results, copy.results, strict=True))
            return
        self.varying.update(op.results)
        if isinstance(op, loop.LoadOp):
            typ = VectorType(op.result.type, [self.lanes])
            view, indices = self._at(op.buffer, op.indices)
            self.mapping[op.result] = self.out.emit(vector.LoadOp(view, indices, typ))
        elif isinstance(op, loop.StoreOp):
            view, indices = self._at(op.buffer, op.indices)
            self.out.add(vector.StoreOp(self.vector_of(op.value), view, indices))
        else:
            operands = [self.operand_of(op, i) for i in range(len(op.operands))]
            result_types: list[Attribute] = [VectorType(r.type, [self.lanes]) for r in op.results]
            copy = type(op).create(
                operands=operands,
                result_types=result_types,
                properties=dict(op.properties),
                attributes=dict(op.attributes),
            )
            self.out.add(copy)
            self.mapping.update(zip(op.results, copy.results, strict=True))


def _collapse(buffer: SSAValue, dims: int) -> Operation:
    """`buffer` with its last `dims` dimensions collapsed into one."""
    typ = cast(MemRefType[Attribute], buffer.type)
    shape = list(typ.get_shape())
    leading = len(shape) - dims
    groups = [[i] for i in range(leading)] + [list(range(leading, len(shape)))]
    reassociation = ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups])
    return memref.CollapseShapeOp.create(
        operands=[buffer],
        result_types=[
            MemRefType(typ.get_element_type(), [*shape[:leading], math.prod(shape[leading:])])
        ],
        properties={"reassociation": reassociation},
    )


def emit_vector_epilogue(
    out: BlockBuilder,
    found: Contraction,
    mapping: Mapping,
    sums: SSAValue,
    lanes: int,
    access: tuple[RunAccess, SSAValue],
) -> None:
    """The epilogue on `lanes` columns of a run: `mapping` gives the nest's indices but the
    run's, `access` the run and the position of the first column in it, `sums` is the
    tile's vector<lanes x f32> of them."""
    run = access[0]
    body = _VectorBody(out, dict(mapping), {*run.args, found.reduce.result}, lanes, access)
    body.mapping[found.reduce.result] = sums
    for op in _epilogue_ops(found):
        body.clone(op)
