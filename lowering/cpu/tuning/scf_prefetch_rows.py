"""scf-prefetch-rows: in a row kernel that reads each row more than once (softmax's
max, exp-and-sum and scale passes; layer-norm's mean, variance and normalise passes),
fetch the next row into cache while the current row is being computed.

Only the first pass over a row reads it from memory; the later ones find it in L1. That
first pass does next to no arithmetic per load (a max, a sum), so it runs at memory
latency while the compute-heavy passes after it leave the memory system idle, and the
hardware prefetcher does not help when every row starts a new page. After the first pass
of row i this pass issues one `memref.prefetch` per 64-byte line of row i + 1 (clamped to
the last row). A row loop is an outermost `scf.parallel` or `scf.for` whose body holds two
or more `scf.for` loops that load `buffer[outer indices..., j]`, j their own induction
variable. Rows shorter than MIN_ROW_BYTES (consecutive rows then share pages and the
hardware prefetcher follows them) and buffers smaller than MIN_BUFFER_BYTES (they stay in
cache between calls) are left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    BoolAttr,
    FixedBitwidthType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    i32,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    var_operand_def,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from graphfuse.dialects.graph import element_bytes
from graphfuse.dialects.loop import memref_type
from graphfuse.dialects.loop.emitter import BlockBuilder

MIN_ROW_BYTES = 1024
MIN_BUFFER_BYTES = 1 << 20
LINE_BYTES = 64


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """Upstream MLIR's `memref.prefetch` (xDSL has none), printed in generic form for
    mlir-opt: fetch the line holding `memref[indices]` for reading, into all cache levels."""

    name = "memref.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    isWrite = prop_def(BoolAttr)
    localityHint = prop_def(IntegerAttr)
    isDataCache = prop_def(BoolAttr)

    def __init__(self, buffer: SSAValue, indices: list[SSAValue]):
        super().__init__(
            operands=[buffer, indices],
            properties={
                "isWrite": BoolAttr.from_bool(False),
                "localityHint": IntegerAttr(3, i32),
                "isDataCache": BoolAttr.from_bool(True),
            },
        )


def _row_loads(loop: scf.ForOp, outer: tuple[SSAValue, ...]) -> list[memref.LoadOp]:
    """Loads in `loop` of `buffer[outer..., j]`, j the loop's induction variable."""
    j = loop.body.block.args[0]
    found: list[memref.LoadOp] = []
    for op in loop.body.walk():
        if isinstance(op, memref.LoadOp) and tuple(op.indices) == (*outer, j):
            found.append(op)
    return found


def _worth_it(buffer: SSAValue) -> bool:
    typ = memref_type(buffer.type)
    if typ is None:
        return False
    shape = typ.get_shape()
    if not isinstance(typ.get_element_type(), FixedBitwidthType) or any(d <= 0 for d in shape):
        return False
    width = element_bytes(typ.get_element_type())
    return shape[-1] * width >= MIN_ROW_BYTES and math.prod(shape) * width >= MIN_BUFFER_BYTES


_RowPass = tuple[scf.ForOp, SSAValue]


def _first_reread_row(body: Block, outer: tuple[SSAValue, ...]) -> _RowPass | None:
    """The first inner loop that reads a row some later inner loop reads again."""
    loops = [op for op in body.ops if isinstance(op, scf.ForOp)]
    rows = [[load.memref for load in _row_loads(op, outer)] for op in loops]
    for n, first in enumerate(loops):
        later = {buffer for reads in rows[n + 1 :] for buffer in reads}
        for buffer in rows[n]:
            if buffer in later and _worth_it(buffer):
                return first, buffer
    return None


def _prefetch_next_row(after: scf.ForOp, buffer: SSAValue, outer: tuple[SSAValue, ...]) -> None:
    typ = cast(MemRefType[Attribute], buffer.type)
    shape = typ.get_shape()
    line = max(1, LINE_BYTES // element_bytes(typ.get_element_type()))
    b = BlockBuilder()
    # The next row: the innermost outer index plus one, kept inside the buffer.
    one, last = b.index(1), b.index(shape[len(outer) - 1] - 1)
    clamped = b.emit(arith.MinUIOp(b.emit(arith.AddiOp(outer[-1], one)), last))
    next_row = (*outer[:-1], clamped)
    body = Block(arg_types=[IndexType()])
    body.add_ops([PrefetchOp(buffer, [*next_row, body.args[0]]), scf.YieldOp()])
    b.add(scf.ForOp(b.index(0), b.index(shape[-1]), b.index(line), [], Region(body)))
    Rewriter.insert_op(b.take(), InsertPoint.after(after))


def _row_loops(module: ModuleOp) -> list[tuple[Block, tuple[SSAValue, ...]]]:
    found: list[tuple[Block, tuple[SSAValue, ...]]] = []
    loops = (scf.ParallelOp, scf.ForOp)
    for op in module.walk():
        if isinstance(op.parent_op(), loops):
            continue
        if isinstance(op, scf.ParallelOp):
            block = op.body.block
            found.append((block, tuple(block.args[: len(op.lowerBound)])))
        elif isinstance(op, scf.ForOp):
            found.append((op.body.block, (op.body.block.args[0],)))
    return found


@dataclass(frozen=True)
class ScfPrefetchRowsPass(ModulePass):
    """Prefetch the next row after the first of several passes over a row."""

    name = "scf-prefetch-rows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for body, outer in _row_loops(op):
            found = _first_reread_row(body, outer)
            if found is not None:
                _prefetch_next_row(found[0], found[1], outer)
