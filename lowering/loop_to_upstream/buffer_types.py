"""Changing the element type of every buffer of a module at once (i1 -> i8 bytes, uiN ->
signless iN): op results, block arguments, function signatures and constant globals, so
that no value keeps the old type while another has the new one."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import func, gpu, memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FunctionType, MemRefType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

NewType = Callable[[Attribute], MemRefType[Attribute] | None]
"""The buffer type a type becomes, or None to keep it."""
NewInitial = Callable[[DenseIntOrFPElementsAttr, MemRefType[Attribute]], DenseIntOrFPElementsAttr]
"""A constant global's initial value in its new buffer type."""


def retype_buffers(module: ModuleOp, new_type: NewType, new_initial: NewInitial) -> list[Operation]:
    """Retype every buffer `new_type` names; returns the module's ops, walked once."""
    ops = list(module.walk())
    for op in ops:
        if isinstance(op, memref.GlobalOp):
            _retype_global(op, new_type, new_initial)
        elif isinstance(op, func.FuncOp | gpu.FuncOp):
            types = op.function_type
            inputs = [new_type(t) or t for t in types.inputs.data]
            outputs = [new_type(t) or t for t in types.outputs.data]
            op.function_type = FunctionType.from_lists(inputs, outputs)
        _retype_values(op.results, new_type)
        for region in op.regions:
            for block in region.blocks:
                _retype_values(block.args, new_type)
    return ops


def _retype_values(values: tuple[SSAValue, ...] | list[SSAValue], new_type: NewType) -> None:
    for value in list(values):
        typ = new_type(value.type)
        if typ is not None:
            Rewriter.replace_value_with_new_type(value, typ)


def _retype_global(op: memref.GlobalOp, new_type: NewType, new_initial: NewInitial) -> None:
    typ = new_type(op.type)
    if typ is None:
        return
    op.type = typ
    if isinstance(op.initial_value, DenseIntOrFPElementsAttr):
        op.initial_value = new_initial(op.initial_value, typ)
