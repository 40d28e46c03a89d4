"""The graph-op builder the StableHLO converters share, and their view of one op.

`HloBuilder` is the ONNX importer's `Builder` (values are SSA tensors or NumPy arrays known
at import; known arrays become `graph.constant`s only where a real op reads them) with
messages that name the StableHLO op and its location, and with broadcasts kept cheap: a
known splat or iota stays a NumPy broadcast view, and becomes a small constant plus
`graph.broadcast_to` only when an op needs it whole. `HloOp` hands a converter the op's
operands (already imported), its result types as xDSL types and its attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Array, Builder, Value, shape_of, unsupported_element
from graphfuse.frontend.stablehlo.reading import (
    StablehloImportError,
    element_type,
    ints,
    operands_of,
    results_of,
    tensor_type,
)


def is_known(value: Value) -> bool:
    return not isinstance(value, SSAValue)


def compact(array: Array) -> Array:
    """A known array without its broadcast axes (stride 0), kept as size-1 axes: the
    smallest array that broadcasts back to it."""
    index = tuple(
        slice(0, 1) if stride == 0 and size > 1 else slice(None)
        for stride, size in zip(array.strides, array.shape, strict=True)
    )
    return array[index]


class HloBuilder(Builder):
    """Builds graph ops for one StableHLO op at a time (`node` is its label)."""

    def __init__(self, block: Block) -> None:
        super().__init__(block)
        self._broadcasts: dict[int, tuple[Array, SSAValue]] = {}

    def fail(self, message: str) -> StablehloImportError:
        return StablehloImportError(f"{self.node}: {message}")

    def _check(self, op: Operation) -> None:
        element = unsupported_element(op)
        if element is not None:
            raise self.fail(f"element type {element} is not supported by {op.name}")
        for index, result in enumerate(op.results):
            shape = graph.tensor_type_of(result).get_shape()
            if 0 in shape and not isinstance(op, graph.ConstantOp):
                raise self.fail(
                    f"result #{index} would be empty ({rules.format_shape(shape)}); "
                    "graphfuse does not support empty tensors"
                )
        try:
            op.verify()
        except VerifyException as error:
            raise self.fail(f"{op.name}: {' '.join(str(error).split())}") from None

    def tensor(self, value: Value, element: Attribute | None = None) -> SSAValue:
        """A known broadcast view becomes its compact constant and a graph.broadcast_to."""
        if isinstance(value, SSAValue) or 0 not in value.strides or value.size <= 1:
            return super().tensor(value, element)
        cached = self._broadcasts.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        small = super().tensor(np.array(compact(value), order="C"), element)
        result = self.broadcast_to(small, value.shape)
        assert isinstance(result, SSAValue)
        self._broadcasts[id(value)] = (value, result)
        return result

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        if shape_of(x) == tuple(shape):
            return x
        if not isinstance(x, SSAValue):
            return np.broadcast_to(x, tuple(shape))
        return self.op(graph.BroadcastToOp, [x], shape)

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        if not isinstance(x, SSAValue):
            return np.transpose(x, list(perm))
        return super().transpose(x, perm)

    def elementwise_operand(self, value: Value) -> Value:
        """An operand of an elementwise op: a known one compact (the op broadcasts)."""
        return value if isinstance(value, SSAValue) else compact(value)


@dataclass
class HloOp:
    """One StableHLO op as a converter sees it."""

    op: ir.Operation
    operands: list[Value]
    label: str

    @property
    def name(self) -> str:
        return self.op.name

    def result_type(self, index: int = 0) -> TensorType[Attribute]:
        typ = results_of(self.op)[index].type
        return tensor_type(typ, f"{self.label}: result #{index}")

    def result_shape(self, index: int = 0) -> tuple[int, ...]:
        return self.result_type(index).get_shape()

    def result_element(self, index: int = 0) -> Attribute:
        return self.result_type(index).get_element_type()

    def operand_element(self, index: int) -> Attribute:
        typ = operands_of(self.op)[index].type
        assert isinstance(typ, ir.ShapedType)
        return element_type(typ.element_type, f"{self.label}: operand #{index}")

    def attr(self, name: str) -> ir.Attribute:
        if name not in self.op.attributes:
            raise StablehloImportError(f"{self.label}: attribute '{name}' is missing")
        return self.op.attributes[name]

    def optional(self, name: str) -> ir.Attribute | None:
        return self.op.attributes.get(name)

    def ints(self, name: str, default: Sequence[int] = ()) -> list[int]:
        found = self.optional(name)
        return ints(found) if found is not None else list(default)

    def int(self, name: str, default: int) -> int:
        found = self.ints(name, [default])
        return found[0]
