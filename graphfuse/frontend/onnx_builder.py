"""Emitting graph-dialect ops for ONNX nodes, with static shapes worked out on the way.

The importer hands each converter a `Builder`. Values are either SSA tensors or NumPy
arrays known at import time (initializers, `Constant` nodes, folded shape arithmetic);
`tensor()` turns a known array into a `graph.constant` only where a real op needs it, so
shape computations never reach the graph. Every op the builder makes is recorded with the
ONNX node it came from, so a verifier failure can name the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.irdl import IRDLOperation, VerificationContext
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import numpy_dtype, numpy_to_dense
from graphfuse.parsing import NAME_HINT, GraphfuseError
from graphfuse.weights import TEXT_LIMIT

Array = np.ndarray[Any, Any]
Value = SSAValue | Array


def _bfloat16() -> dict[np.dtype[Any], Attribute]:
    """ONNX holds bfloat16 data as ml_dtypes' bfloat16 (installed with onnx)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - onnx depends on it
        return {}
    return {np.dtype(ml_dtypes.bfloat16): BFloat16Type()}


@cache
def _element_types() -> dict[np.dtype[Any], Attribute]:
    """The element type of each dtype an ONNX tensor may hold. Made on first use:
    importing ml_dtypes (registering its dtypes' casts with NumPy) is the slowest import
    graphfuse makes, and only an ONNX model needs it, when `onnx` has imported it already;
    the command line imports this module for any input file."""
    return {
        np.dtype(np.float32): Float32Type(),
        np.dtype(np.float16): Float16Type(),
        np.dtype(np.float64): Float64Type(),
        **_bfloat16(),
        np.dtype(np.int64): IntegerType(64),
        np.dtype(np.int32): IntegerType(32),
        np.dtype(np.int16): IntegerType(16),
        np.dtype(np.int8): IntegerType(8),
        **{
            np.dtype(f"uint{width}"): IntegerType(width, Signedness.UNSIGNED)
            for width in (8, 16, 32, 64)
        },
        np.dtype(np.bool_): IntegerType(1),
    }


def known_as_element(array: Array, element: Attribute) -> Array:
    """A value known at import converted to `element`, held as the interpreter holds it:
    bf16 as float32 holding values rounded to bf16 (through ml_dtypes' bfloat16)."""
    if isinstance(element, BFloat16Type):
        found = [d for d, e in _element_types().items() if isinstance(e, BFloat16Type)]
        if found:
            return array.astype(found[0]).astype(np.float32)
    return array.astype(numpy_dtype(element))


class ImportFailure(GraphfuseError):
    """An ONNX model graphfuse cannot import; the message names the node or input."""


def element_type_of(dtype: np.dtype[Any], where: str, shown: str | None = None) -> Attribute:
    """The graph element type of a NumPy dtype (`shown`: its name in messages)."""
    types = _element_types()
    if dtype not in types:
        supported = ", ".join(str(d) for d in types)
        raise ImportFailure(
            f"{where}: element type {shown or dtype} is not supported (only {supported})"
        )
    return types[dtype]


def i64_array(values: Sequence[int]) -> DenseArrayBase[IntegerType]:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def i64_attr(value: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(int(value), 64)


def f64_attr(value: float) -> FloatAttr:
    return FloatAttr(float(value), Float64Type())


def shape_of(value: Value) -> tuple[int, ...]:
    if isinstance(value, SSAValue):
        return tuple(graph.tensor_type_of(value).get_shape())
    return tuple(value.shape)


def element_of(value: Value, where: str) -> Attribute:
    if isinstance(value, SSAValue):
        return graph.tensor_type_of(value).get_element_type()
    return element_type_of(value.dtype, where)


def unsupported_element(op: Operation) -> Attribute | None:
    """The element type of the first operand or result that fails the op's own IRDL
    constraint when checked alone. Alone, a constraint sees only the value's type, never
    another operand's, so a failure is the element type itself (shapes are verify_'s)."""
    if not isinstance(op, IRDLOperation):
        return None
    op_def = type(op).get_irdl_definition()
    for name, definition in [*op_def.operands, *op_def.results]:
        values: SSAValue | Sequence[SSAValue] | None = getattr(op, name)
        for value in (values,) if isinstance(values, SSAValue) else (values or ()):
            try:
                definition.constr.verify((value.type,), VerificationContext())
            except VerifyException:
                return graph.tensor_type_of(value).get_element_type()
    return None


class Builder:
    """Appends graph ops for one ONNX node at a time to a function body."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.node = ""
        """Name of the node being converted (for messages and `origin`)."""
        self.op_type = ""
        self.outputs: list[str] = []
        """The node's output names ("" for an output it does not produce)."""
        self.origin: dict[Operation, str] = {}
        self._constants: dict[int, tuple[Array, SSAValue]] = {}
        self.names: dict[int, tuple[Array, str]] = {}
        """Initializers by id: a constant made of one is printed under its name."""
        self.inputs: dict[SSAValue, str] = {}
        """Graph inputs by their block argument, to name one that must be a constant."""

    def fail(self, message: str) -> ImportFailure:
        return ImportFailure(f"node {self.node}: {message}")

    # ---- values -----------------------------------------------------------------------

    def tensor(self, value: Value, element: Attribute | None = None) -> SSAValue:
        """`value` as an SSA tensor: a known array becomes a graph.constant (once), of
        its own element type or `element` (bf16, which no NumPy dtype names)."""
        if isinstance(value, SSAValue):
            return value
        cached = self._constants.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        # A double is an f64 constant (a double scalar beside an f32 tensor was already
        # made f32 by `same_element`).
        array = value
        element = element or element_type_of(array.dtype, f"node {self.node}")
        typ = TensorType(element, array.shape)
        op = graph.ConstantOp.create(
            result_types=[typ], properties={"value": numpy_to_dense(array, typ)}
        )
        named = self.names.get(id(value))
        if named is not None and named[0] is value and array.nbytes > TEXT_LIMIT:
            # Only weights printed outside the text carry names: a name on a small
            # constant would keep CSE from merging it with an equal one.
            op.attributes[NAME_HINT] = StringAttr(named[1])
        result = self._append(op)
        self._constants[id(value)] = (value, result)
        return result

    def ints(self, value: Value | None, what: str) -> list[int]:
        """A known integer array (shape, axes, ...) as a list; SSA values are refused."""
        if value is None:
            raise self.fail(f"{what} is missing")
        if isinstance(value, SSAValue):
            raise self.fail(self.must_be_constant(value, what))
        return [int(v) for v in np.asarray(value).reshape(-1)]

    def must_be_constant(self, value: SSAValue, what: str) -> str:
        """Why `value` must be known at import, and how to make it so."""
        names = self._inputs_behind(value)
        if not names:
            return f"{what} must be known when importing (a constant), not computed"
        listed = ", ".join(f"'{n}'" for n in names)
        source = "comes from" if self.inputs.get(value) else "is computed from"
        plural = "s" if len(names) > 1 else ""
        return (
            f"{what} {source} graph input{plural} {listed}, which must be constant: bind "
            f"{'their values' if plural else 'its value'} with --constant {names[0]}=V0,V1,... "
            f"(Python: constants={{'{names[0]}': array}})"
        )

    def _inputs_behind(self, value: SSAValue) -> list[str]:
        """The graph inputs `value` is computed from, in order; none when anything else
        (an op of unknown inputs) stands between, as binding inputs would not help then."""
        found: dict[str, None] = {}
        stack, seen = [value], set[SSAValue]()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in self.inputs:
                found[self.inputs[current]] = None
                continue
            owner = current.owner
            if not isinstance(owner, Operation):
                return []
            stack.extend(owner.operands)
        return sorted(found)

    # ---- ops --------------------------------------------------------------------------

    def _append(self, op: Operation) -> SSAValue:
        self._check(op)
        self.block.add_op(op)
        self.origin[op] = self.node
        return op.results[0]

    def _check(self, op: Operation) -> None:
        """Verify each op as it is made, so a failure names the node that made it. A
        converter emits ops for every element type ONNX allows the node; one the graph
        dialect does not define for that type is a gap to name, not a verifier failure."""
        where = f"node {self.node} ({self.op_type})" if self.op_type else f"node {self.node}"
        element = unsupported_element(op)
        if element is not None:
            raise ImportFailure(f"{where}: element type {element} is not supported by {op.name}")
        for index, result in enumerate(op.results):
            shape = graph.tensor_type_of(result).get_shape()
            if 0 in shape and not isinstance(op, graph.ConstantOp):  # a constant: no work
                raise ImportFailure(
                    f"{where}: result #{index} would be empty ({rules.format_shape(shape)}); "
                    "graphfuse does not support empty tensors"
                )
        op.verify()

    def op(
        self,
        op_type: type[Operation],
        operands: Sequence[Value],
        shape: Sequence[int],
        element: Attribute | None = None,
        **properties: Attribute,
    ) -> SSAValue:
        """Append `op_type(operands)` with result tensor<shape x element> (element: the
        first operand's when not given)."""
        values = [self.tensor(v) for v in operands]
        if element is None:
            element = graph.tensor_type_of(values[0]).get_element_type()
        if 0 in shape:  # an empty result holds no data: it is known, whatever computes it
            return self.tensor(np.zeros(shape, numpy_dtype(element)), element)
        op = op_type.create(
            operands=values,
            result_types=[TensorType(element, list(shape))],
            properties=dict(properties),
        )
        return self._append(op)

    def unary(self, op_type: type[Operation], x: Value) -> SSAValue:
        return self.op(op_type, [x], shape_of(x))

    def binary(self, op_type: type[Operation], a: Value, b: Value) -> SSAValue:
        a, b = self.same_element(a, b)
        return self.op(op_type, [a, b], rules.broadcast_shapes(shape_of(a), shape_of(b)))

    def same_element(self, a: Value, b: Value) -> tuple[Value, Value]:
        """Known scalars follow the other operand's element type (as ONNX requires both)."""
        if isinstance(a, SSAValue) and not isinstance(b, SSAValue):
            b = self.known_as(b, a)
        elif isinstance(b, SSAValue) and not isinstance(a, SSAValue):
            a = self.known_as(a, b)
        return a, b

    def known_as(self, array: Array, like: SSAValue) -> Value:
        """A known operand in the element type of `like`."""
        element = graph.tensor_type_of(like).get_element_type()
        converted = known_as_element(array, element)
        if isinstance(element, BFloat16Type):  # no NumPy dtype says bf16: a constant here
            return self.tensor(converted, element)
        return converted

    def compare(self, predicate: str, a: Value, b: Value) -> SSAValue:
        a, b = self.same_element(a, b)
        shape = rules.broadcast_shapes(shape_of(a), shape_of(b))
        attr = graph.ComparePredicateAttr(graph.ComparePredicate(predicate))
        return self.op(graph.CompareOp, [a, b], shape, IntegerType(1), predicate=attr)

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        if tuple(shape) == shape_of(x):
            return x
        if not isinstance(x, SSAValue):
            return x.reshape(shape)
        return self.op(graph.ReshapeOp, [x], shape)

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        if list(perm) == list(range(len(perm))):
            return x
        shape = rules.transpose_shape(shape_of(x), perm)
        return self.op(graph.TransposeOp, [x], shape, perm=i64_array(perm))

    def cast(self, x: Value, element: Attribute) -> Value:
        """`x` with `element` elements; a known array is converted here, not in the graph."""
        if element_of(x, f"node {self.node}") == element:
            return x
        if not isinstance(x, SSAValue):
            return known_as_element(x, element)
        return self.op(graph.CastOp, [x], shape_of(x), element)

    def reduce(
        self, op_type: type[Operation], x: Value, axes: Sequence[int], keepdims: bool
    ) -> SSAValue:
        rank = len(shape_of(x))
        axes = sorted(rules.normalize_axis(a, rank) for a in axes)
        shape = rules.reduce_shape(shape_of(x), axes, keepdims)
        properties: dict[str, Attribute] = {"axes": i64_array(axes)}
        if keepdims:
            properties["keepdims"] = UnitAttr()
        return self.op(op_type, [x], shape, **properties)
