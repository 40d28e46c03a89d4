"""Buffers of lowered tensors: the memref type holding a tensor value, and the module-level
`memref.global`s that hold constants (shared by every kernel and function of a module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, StringAttr, UnitAttr
from xdsl.ir import Attribute, SSAValue

from graphfuse.dialects.graph import tensor_type_of


def memref_of(value: SSAValue | Attribute) -> MemRefType[Attribute]:
    """The buffer type holding a tensor value (same shape and element type)."""
    tensor = tensor_type_of(value)
    return MemRefType(tensor.get_element_type(), tensor.get_shape())


@dataclass
class GlobalPool:
    """Module-level `memref.global`s for non-splat constants, named uniquely."""

    ops: list[memref.GlobalOp] = field(default_factory=list[memref.GlobalOp])

    def add(self, value: DenseIntOrFPElementsAttr) -> tuple[str, MemRefType[Attribute]]:
        name = f"__graphfuse_constant_{len(self.ops)}"
        typ = memref_of(value.get_type())
        self.ops.append(
            memref.GlobalOp.get(StringAttr(name), typ, value, constant=UnitAttr(), alignment=64)
        )
        return name, typ
