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

from collections.abc import Sequence

from xdsl.dialects import arith, math, vector
from xdsl.dialects.builtin import IndexType, VectorType, i1
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.cpu.gemm.contractions import Contraction
from graphfuse.lowering.cpu.gemm.gemm_builder import Mapping

_VECTOR_MATH = (math.AbsFOp, math.SqrtOp)


def _epilogue_ops(found: Contraction) -> list[Operation]:
    return [
        op
        for op in found.nest.body.block.ops
        if op is not found.reduce and not isinstance(op, loop.YieldOp)
    ]


def _access_fits(indices: Sequence[SSAValue], lane: SSAValue, varying: set[SSAValue]) -> bool:
    """A load or store the columns reach: the last index is the innermost column, and
    no other index varies."""
    *outer, last = indices
    return last is lane and not any(i in varying for i in outer)


def _varying_bool(op: Operation, varying: set[SSAValue]) -> bool:
    """Whether a lane-reached `op` takes or gives a lane-varying i1. It would be a
    vector<8xi1>, which xDSL's compares do not give and its `arith.select` prints in the
    scalar-condition form that mlir-opt then rejects (a select on a mask loaded along the
    columns); an i1 buffer also holds bytes (bool_buffers). A uniform i1 (a select on a
    per-row condition) stays scalar and is fine."""
    return any(r.type == i1 for r in op.results) or any(
        v.type == i1 and v in varying for v in op.operands
    )


def _op_fits(op: Operation, lane: SSAValue, varying: set[SSAValue]) -> bool:
    reached = any(v in varying for v in op.operands)
    if isinstance(op, loop.LoadOp):
        return not reached or (
            _access_fits(op.indices, lane, varying) and not _varying_bool(op, varying)
        )
    if isinstance(op, loop.StoreOp):
        return (
            op.value in varying
            and _access_fits(op.indices, lane, varying)
            and not _varying_bool(op, varying)
        )
    if op.regions or not (op.dialect_name() == "arith" or isinstance(op, _VECTOR_MATH)):
        return False
    if reached and _varying_bool(op, varying):
        return False
    # The lane index itself stands for 8 indices: only loads and stores may take it.
    return lane not in op.operands and (
        not reached or all(not isinstance(r.type, IndexType) for r in op.results)
    )


def vector_epilogue_fits(found: Contraction, lanes: int) -> bool:
    """Whether the nest's epilogue can run on `lanes` neighbouring columns at once: the
    innermost column dimension's extent is a multiple of `lanes` (so `lanes` columns from a
    multiple of `lanes` never wrap into the next outer index), every load or store the
    columns reach indexes its last dimension by exactly that innermost column index (and
    nothing else by what the columns reach), no index arithmetic uses it, and the ops are
    arith ops, loads, stores, math.absf or math.sqrt (LLVM has vector forms of those; the
    f32 expansions of math-approximate are scalar), with no lane-varying i1
    (`_varying_bool`; relu is a `maximumf`)."""
    lane_dim = found.columns[-1]
    if found.nest.shape[lane_dim] % lanes:
        return False
    lane = found.nest.body.block.args[lane_dim]
    varying: set[SSAValue] = {lane, found.reduce.result}
    for op in _epilogue_ops(found):
        if not _op_fits(op, lane, varying):
            return False
        if any(v in varying for v in op.operands):
            varying.update(op.results)
    return True


class _VectorBody:
    """Clones the epilogue into `out`'s block with lane-varying values as vectors."""

    def __init__(self, out: BlockBuilder, mapping: Mapping, varying: set[SSAValue], lanes: int):
        self.out = out
        self.mapping = mapping
        self.varying = varying
        self.lanes = lanes

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
            indices = [self.get(i) for i in op.indices]
            self.mapping[op.result] = self.out.emit(
                vector.LoadOp(self.get(op.buffer), indices, typ)
            )
        elif isinstance(op, loop.StoreOp):
            indices = [self.get(i) for i in op.indices]
            value = self.vector_of(op.value)
            self.out.add(vector.StoreOp(value, self.get(op.buffer), indices))
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


def emit_vector_epilogue(
    out: BlockBuilder, found: Contraction, mapping: Mapping, sums: SSAValue, lanes: int
) -> None:
    """The epilogue on `lanes` columns: `mapping` gives the nest's indices (the innermost
    column index: the first of them), `sums` is the tile's vector<lanes x f32> of them."""
    lane = found.nest.body.block.args[found.columns[-1]]
    body = _VectorBody(out, dict(mapping), {lane, found.reduce.result}, lanes)
    body.mapping[found.reduce.result] = sums
    for op in _epilogue_ops(found):
        body.clone(op)
