"""Signless buffers: memref<...xui8> becomes memref<...xi8> (ui16, ui32, ui64 alike).

Graph tensors of unsigned integers keep their `uiN` element type through the loop dialect,
so a converted function's signature still tells its callers (the runtime) to pass and
return unsigned arrays; their scalars are signless already (`loop.signless`). Upstream
`arith` takes signless integers only, and the bytes are the same, so before lowering every
such buffer, function signature and constant global turns signless.

    func.func @f(%a: memref<4xui8>)   ->  func.func @f(%a: memref<4xi8>)
"""

from __future__ import annotations

from xdsl.dialects import func, gpu, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FunctionType,
    IntegerType,
    MemRefType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.hints import isa

from graphfuse.dialects import loop


def _signless_type(typ: Attribute) -> MemRefType[Attribute] | None:
    """memref<...xiN> for a memref<...xuiN>, else None."""
    if not isa(typ, MemRefType[Attribute]):
        return None
    element = typ.get_element_type()
    signless = loop.signless(element)
    if signless == element:
        return None
    return MemRefType[Attribute](signless, typ.get_shape(), typ.layout, typ.memory_space)


def _retype_values(values: tuple[SSAValue, ...] | list[SSAValue]) -> None:
    for value in list(values):
        new_type = _signless_type(value.type)
        if new_type is not None:
            Rewriter.replace_value_with_new_type(value, new_type)


def _retype_global(op: memref.GlobalOp) -> None:
    new_type = _signless_type(op.type)
    if new_type is None:
        return
    op.type = new_type
    initial = op.initial_value
    if isinstance(initial, DenseIntOrFPElementsAttr):
        element = new_type.get_element_type()
        assert isinstance(element, IntegerType)
        tensor = TensorType(element, list(initial.get_shape()))
        op.initial_value = DenseIntOrFPElementsAttr(tensor, initial.data)


def _retype_function(op: func.FuncOp | gpu.FuncOp) -> None:
    types = op.function_type
    inputs = [_signless_type(t) or t for t in types.inputs.data]
    outputs = [_signless_type(t) or t for t in types.outputs.data]
    op.function_type = FunctionType.from_lists(inputs, outputs)


def store_unsigned_as_signless(module: ModuleOp) -> None:
    """Rewrite every buffer of unsigned integers in `module` into a signless one."""
    for op in list(module.walk()):
        if isinstance(op, memref.GlobalOp):
            _retype_global(op)
        elif isinstance(op, func.FuncOp | gpu.FuncOp):
            _retype_function(op)
        _retype_values(op.results)
        for region in op.regions:
            for block in region.blocks:
                _retype_values(block.args)
