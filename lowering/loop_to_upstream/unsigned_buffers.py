"""Signless buffers: memref<...xui8> becomes memref<...xi8> (ui16, ui32, ui64 alike).

Graph tensors of unsigned integers keep their `uiN` element type through the loop dialect,
so a converted function's signature still tells its callers (the runtime) to pass and
return unsigned arrays; their scalars are signless already (`loop.signless`). Upstream
`arith` takes signless integers only, and the bytes are the same, so before lowering every
such buffer, function signature and constant global turns signless.

    func.func @f(%a: memref<4xui8>)   ->  func.func @f(%a: memref<4xi8>)
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

from graphfuse.dialects import loop
from graphfuse.lowering.loop_to_upstream.buffer_types import retype_buffers


def _signless_type(typ: Attribute) -> MemRefType[Attribute] | None:
    """memref<...xiN> for a memref<...xuiN>, else None."""
    buffer = loop.memref_type(typ)
    if buffer is None:
        return None
    element = buffer.get_element_type()
    signless = loop.signless(element)
    if signless == element:
        return None
    return MemRefType[Attribute](signless, buffer.get_shape(), buffer.layout, buffer.memory_space)


def _signless_initial(
    initial: DenseIntOrFPElementsAttr, typ: MemRefType[Attribute]
) -> DenseIntOrFPElementsAttr:
    element = typ.get_element_type()
    assert isa(element, IntegerType)
    return DenseIntOrFPElementsAttr(TensorType(element, list(initial.get_shape())), initial.data)


def store_unsigned_as_signless(module: ModuleOp) -> None:
    """Rewrite every buffer of unsigned integers in `module` into a signless one."""
    retype_buffers(module, _signless_type, _signless_initial)
