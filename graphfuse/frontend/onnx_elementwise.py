"""ONNX elementwise operators as graph-dialect ops: arithmetic, comparison, logic, casts
and activations."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    element_type_of,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    CONVERTERS,
    Attrs,
    Converter,
    Inputs,
    converter,
    optional,
    required,
)

# ---- elementwise ------------------------------------------------------------------------

_UNARY: dict[str, type[graph.UnaryOp]] = {
    "Relu": graph.ReluOp,
    "Sigmoid": graph.SigmoidOp,
    "Tanh": graph.TanhOp,
    "Erf": graph.ErfOp,
    "Exp": graph.ExpOp,
    "Log": graph.LogOp,
    "Sqrt": graph.SqrtOp,
    "Neg": graph.NegOp,
    "Abs": graph.AbsOp,
}


def _unary_converter(op_type: type[graph.UnaryOp]) -> Converter:
    return lambda b, inputs, attrs: [b.unary(op_type, required(inputs))]


for _name, _op in _UNARY.items():
    CONVERTERS[_name] = _unary_converter(_op)

_BINARY: dict[str, type[graph.BinaryOp]] = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
}


def _binary_converter(op_type: type[graph.BinaryOp]) -> Converter:
    return lambda b, inputs, attrs: [b.binary(op_type, required(inputs, 0), required(inputs, 1))]


for _name, _op in _BINARY.items():
    CONVERTERS[_name] = _binary_converter(_op)


@converter("Pow")
def _pow(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """ONNX lets the exponent's type differ from the base's (x ** int64 n); graph.pow takes
    one element type, so the exponent follows the base (an integer base stays refused)."""
    base, exponent = required(inputs, 0), required(inputs, 1)
    exponent = b.cast(exponent, element_of(base, f"node {b.node}"))
    return [b.binary(graph.PowOp, base, exponent)]


def _variadic(op_type: type[graph.BinaryOp]) -> Converter:
    def convert(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
        result = required(inputs, 0)
        for other in inputs[1:]:
            assert other is not None
            result = b.binary(op_type, result, other)
        return [result]

    return convert


CONVERTERS["Max"] = _variadic(graph.MaxOp)
CONVERTERS["Min"] = _variadic(graph.MinOp)
CONVERTERS["Sum"] = _variadic(graph.AddOp)

_COMPARE = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}


def _compare_converter(predicate: str) -> Converter:
    return lambda b, inputs, attrs: [b.compare(predicate, required(inputs, 0), required(inputs, 1))]


for _name, _predicate in _COMPARE.items():
    CONVERTERS[_name] = _compare_converter(_predicate)


@converter("Not")
def _not(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [b.compare("eq", required(inputs), np.zeros((), np.bool_))]


@converter("And", "Or")
def _logical(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """a and b = select(a, b, false); a or b = select(a, true, b)."""
    a, c = required(inputs, 0), required(inputs, 1)
    if b.op_type == "And":
        chosen, other = c, np.zeros((), np.bool_)
    else:
        chosen, other = np.ones((), np.bool_), c
    shape = rules.broadcast_shapes(shape_of(a), shape_of(c))
    return [b.op(graph.SelectOp, [a, chosen, other], shape, element_of(c, b.node))]


@converter("IsNaN")
def _is_nan(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """x != x, written as (x == x) == false: graph.compare's float predicates are ordered."""
    x = required(inputs)
    return [b.compare("eq", b.compare("eq", x, x), np.zeros((), np.bool_))]


@converter("Reciprocal")
def _reciprocal(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [b.binary(graph.DivOp, np.ones((), np.float32), required(inputs))]


@converter("Where")
def _where(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    condition, a, c = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    a, c = b.same_element(a, c)
    if not isinstance(a, SSAValue) and not isinstance(c, SSAValue):
        a = b.tensor(a)
    shape = rules.broadcast_shapes(shape_of(condition), shape_of(a), shape_of(c))
    return [b.op(graph.SelectOp, [condition, a, c], shape, element_of(a, b.node))]


@converter("Clip")
def _clip(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    result = required(inputs)
    low, high = optional(inputs, 1), optional(inputs, 2)
    if low is not None:
        result = b.binary(graph.MaxOp, result, low)
    if high is not None:
        result = b.binary(graph.MinOp, result, high)
    return [result]


@converter("Cast")
def _cast(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    from onnx import helper

    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    return [b.cast(required(inputs), element_type_of(dtype, f"node {b.node}"))]


@converter("Identity", "Dropout")
def _identity(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [required(inputs)]


@converter("Gelu")
def _gelu(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    attr = graph.GeluApproximationAttr(graph.GeluApproximation(approximate))
    x = required(inputs)
    return [b.op(graph.GeluOp, [x], shape_of(x), approximate=attr)]
