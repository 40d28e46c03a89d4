"""The builder TOSA converters emit graph ops with, and the view of one TOSA op they read.

The ONNX importer's `Builder` is reused: values are SSA tensors or NumPy arrays known at
import (`tosa.const`, `tosa.const_shape`), a known array becomes a `graph.constant` only
where a graph op needs it, and each op is verified as it is made. Only its diagnostics
change: they name the TOSA op and where it is (`f.tosa.mlir:5:8: 'tosa.conv2d' op ...`).

TOSA ops are read by name and attributes, whether xDSL parsed them as its own `tosa` ops or
as unregistered ones (docs/tosa.md says why), so `TosaOp` looks attributes up in the op's
properties first, then in its attribute dictionary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnregisteredOp,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Array,
    Builder,
    ImportFailure,
    Value,
    unsupported_element,
)


class TosaImportError(ImportFailure):
    """TOSA graphfuse cannot import; the message names the op, where it is, and why."""


def tosa_name(op: Operation) -> str:
    """The op's own name, also for an op xDSL holds as unregistered."""
    if isinstance(op, UnregisteredOp):
        return op.op_name.data
    return op.name


def where(op: Operation, index: int) -> str:
    """`file:line:col: 'tosa.x' op` for an op with a source location (mlir-opt keeps the
    user's), else `@function op #index: 'tosa.x' op`."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: '{tosa_name(op)}' op"
    parent = op.parent_op()
    holder = f"@{parent.sym_name.data} " if isinstance(parent, func.FuncOp) else ""
    return f"{holder}op #{index}: '{tosa_name(op)}' op"


class TosaBuilder(Builder):
    """The ONNX importer's builder with TOSA diagnostics: `node` holds `where(op)`."""

    def __init__(self, block: Block) -> None:
        super().__init__(block)

    def fail(self, message: str) -> TosaImportError:
        return TosaImportError(f"{self.node} {message}")

    def _check(self, op: Operation) -> None:
        element = unsupported_element(op)
        if element is not None:
            raise self.fail(f"element type {element} is not supported by {op.name}")
        try:
            op.verify()
        except VerifyException as error:
            raise self.fail(f"becomes an invalid {op.name}: {error}") from None

    def known_transpose(self, x: Value, perm: Sequence[int]) -> Value:
        """`transpose`, done in NumPy on a known array (weights) and composed with a
        transpose that made x (NHWC -> NCHW -> NHWC between convolutions is none)."""
        if isinstance(x, np.ndarray):
            return x.transpose(perm)
        owner = x.owner
        if isinstance(owner, graph.TransposeOp):
            inner = owner.perm.get_values()
            return self.transpose(owner.input, [inner[p] for p in perm])
        return self.transpose(x, perm)

    def through_transpose(self, x: Value, make: Callable[[Value], Value]) -> Value:
        """`make(x)` for an elementwise `make`, moved before a transpose that made x:
        make(transpose(y)) = transpose(make(y)), so the transposes around NHWC convolutions
        and pools meet and compose away (graph-simplify) across activations."""
        owner = x.owner if isinstance(x, SSAValue) else None
        if isinstance(owner, graph.TransposeOp):
            return self.transpose(make(owner.input), owner.perm.get_values())
        return make(x)

    def constant_like(self, value: float, x: Value) -> Array:
        """`value` in x's element type, shaped to broadcast against x (TOSA's operands
        share their rank)."""
        dtype = x.dtype if isinstance(x, np.ndarray) else numpy_dtype(_element(x))
        return np.full((1,) * len(_shape(x)), value, dtype=dtype)


def _shape(x: Value) -> tuple[int, ...]:
    if isinstance(x, np.ndarray):
        return tuple(x.shape)
    return graph.shape_of(x)


def _element(x: SSAValue) -> Attribute:
    return graph.tensor_type_of(x).get_element_type()


@dataclass
class TosaOp:
    """One TOSA op being converted: its converted operands and its attributes."""

    op: Operation
    name: str
    operands: list[Value]
    builder: TosaBuilder

    def fail(self, message: str) -> TosaImportError:
        return self.builder.fail(message)

    def attr(self, key: str) -> Attribute:
        found = self.op.properties.get(key)
        if found is None:
            found = self.op.attributes.get(key)
        if found is None:
            raise self.fail(f"has no attribute '{key}'")
        return found

    def ints(self, key: str) -> list[int]:
        """An integer array attribute (`array<i64: ...>`, `[1, 2]`) or an integer."""
        found = self.attr(key)
        if isinstance(found, DenseArrayBase):
            return [int(v) for v in found.get_values()]
        if isa(found, ArrayAttr[Attribute]):
            return [_int_of(v, key, self) for v in found.data]
        return [_int_of(found, key, self)]

    def int(self, key: str) -> int:
        return self.ints(key)[0]

    def number(self, key: str) -> float:
        found = self.attr(key)
        if isinstance(found, FloatAttr):
            return float(found.value.data)
        return float(_int_of(found, key, self))

    def result_type(self, index: int = 0) -> TensorType[Attribute]:
        return graph.tensor_type_of(self.op.results[index])

    def result_shape(self, index: int = 0) -> tuple[int, ...]:
        return self.result_type(index).get_shape()

    def result_element(self, index: int = 0) -> Attribute:
        return self.result_type(index).get_element_type()

    def known(self, index: int, what: str) -> Array:
        """Operand #index, which must be known at import (a tosa.const or const_shape)."""
        value = self.operands[index]
        if not isinstance(value, np.ndarray):
            raise self.fail(f"operand #{index} ({what}) must be a constant (tosa.const)")
        return value

    def known_ints(self, index: int, what: str) -> list[int]:
        return [int(v) for v in self.known(index, what).reshape(-1)]

    def require_zero(self, index: int, what: str) -> None:
        """A zero point: graphfuse imports float TOSA, whose zero points are all 0."""
        value = self.operands[index]
        if not isinstance(value, np.ndarray) or value.any():
            raise self.fail(
                f"operand #{index} ({what}) must be a constant 0: quantised TOSA (non-zero "
                "zero points) is not supported"
            )


def _int_of(attr: Attribute, key: str, op: TosaOp) -> int:
    if isinstance(attr, IntegerAttr):
        return cast(IntegerAttr[IntegerType], attr).value.data
    if isinstance(attr, IntAttr):
        return cast(IntAttr[int], attr).data
    raise op.fail(f"attribute '{key}' is {attr}, expected integers")
