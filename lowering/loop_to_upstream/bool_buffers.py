"""Store i1 buffers as bytes: memref<...xi1> becomes memref<...xi8>.

MLIR's MemRefToLLVM lowering loads and stores only element types of at least 8 bits (a
memref<4xi1> load or store trips an assertion in mlir-opt), and NumPy keeps a bool array
as one byte per element holding 0 or 1. So every i1 buffer is a byte buffer: loads
truncate the byte to i1, stores zero-extend the i1 to a byte, constant globals hold 0 and
1, and function signatures change with their arguments. The byte layout is the one NumPy
uses for `np.bool_`, so callers pass and get bool arrays unchanged.

    %v = memref.load %m[%i] : memref<4xi1>   ->  %b = memref.load %m[%i] : memref<4xi8>
                                                 %v = arith.trunci %b : i8 to i1
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    TensorType,
    i1,
    i8,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from graphfuse.dialects import loop
from graphfuse.lowering.loop_to_upstream.buffer_types import retype_buffers


def _byte_type(typ: Attribute) -> MemRefType[Attribute] | None:
    """memref<...xi8> for a memref<...xi1>, else None."""
    buffer = loop.memref_type(typ)
    if buffer is not None and buffer.get_element_type() == i1:
        return MemRefType[Attribute](i8, buffer.get_shape())
    return None


def _byte_initial(
    initial: DenseIntOrFPElementsAttr, typ: MemRefType[Attribute]
) -> DenseIntOrFPElementsAttr:
    values = cast(list[int], initial.get_values())
    tensor = TensorType(i8, list(initial.get_shape()))
    return DenseIntOrFPElementsAttr.from_list(tensor, [1 if v else 0 for v in values])


def _byte_access(op: Operation) -> None:
    """Convert at loads and stores between the i1 value and its byte in memory."""
    if isinstance(op, memref.LoadOp) and op.res.type == i1:
        load = memref.LoadOp.get(op.memref, op.indices)
        bit = arith.TruncIOp(load.res, i1)
        Rewriter.replace_op(op, [load, bit])
    elif isinstance(op, memref.StoreOp) and op.value.type == i1 and _holds_bytes(op.memref):
        byte = arith.ExtUIOp(op.value, IntegerType(8))
        Rewriter.insert_op(byte, InsertPoint.before(op))
        op.operands[0] = byte.result


def _holds_bytes(buffer: SSAValue) -> bool:
    typ = loop.memref_type(buffer.type)
    return typ is not None and typ.get_element_type() == i8


def store_bools_as_bytes(module: ModuleOp) -> None:
    """Rewrite every i1 buffer in `module` (upstream memref form) into a byte buffer."""
    for op in retype_buffers(module, _byte_type, _byte_initial):
        _byte_access(op)
