"""ONNX elementwise operators as graph-dialect ops: arithmetic, comparison, logic, bit
operations, casts, trigonometric functions and activations."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import AnyFloat, Float64Type, UnitAttr
from xdsl.ir import Attribute, SSAValue

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


def is_float(element: Attribute) -> bool:
    return isinstance(element, AnyFloat)


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
    "Sin": graph.SinOp,
    "Cos": graph.CosOp,
    "Tan": graph.TanOp,
    "Asin": graph.AsinOp,
    "Acos": graph.AcosOp,
    "Atan": graph.AtanOp,
    "Sinh": graph.SinhOp,
    "Cosh": graph.CoshOp,
    "Asinh": graph.AsinhOp,
    "Acosh": graph.AcoshOp,
    "Atanh": graph.AtanhOp,
    "Floor": graph.FloorOp,
    "Ceil": graph.CeilOp,
    "Round": graph.RoundOp,
    "Sign": graph.SignOp,
    "BitwiseNot": graph.BitwiseNotOp,
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
    "BitwiseAnd": graph.BitwiseAndOp,
    "BitwiseOr": graph.BitwiseOrOp,
    "BitwiseXor": graph.BitwiseXorOp,
}


def _binary_converter(op_type: type[graph.BinaryOp]) -> Converter:
    return lambda b, inputs, attrs: [b.binary(op_type, required(inputs, 0), required(inputs, 1))]


for _name, _op in _BINARY.items():
    CONVERTERS[_name] = _binary_converter(_op)


@converter("Pow")
def _pow(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """ONNX lets the exponent's type differ from the base's; the result has the base's.
    graph.pow takes one element type: a float base takes the exponent as its own type,
    an integer base an integer exponent as its own type, and an integer base with a
    float exponent is raised in f64 and truncated back (as ONNX's reference does)."""
    base, exponent = required(inputs, 0), required(inputs, 1)
    base_type = element_of(base, f"node {b.node}")
    exponent_type = element_of(exponent, f"node {b.node}")
    if is_float(base_type) or not is_float(exponent_type):
        return [b.binary(graph.PowOp, base, b.cast(exponent, base_type))]
    wide = Float64Type()
    power = b.binary(graph.PowOp, b.cast(base, wide), b.cast(exponent, wide))
    return [b.cast(power, base_type)]


@converter("Mod")
def _mod(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    a, c = b.same_element(required(inputs, 0), required(inputs, 1))
    fmod = {"fmod": UnitAttr()} if attrs.get("fmod", 0) else {}
    shape = rules.broadcast_shapes(shape_of(a), shape_of(c))
    return [b.op(graph.ModOp, [a, c], shape, **fmod)]


@converter("BitShift")
def _bit_shift(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    direction = attrs.get("direction", b"")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("LEFT", "RIGHT"):
        raise b.fail(f"direction must be LEFT or RIGHT, got '{direction}'")
    op_type = graph.ShiftLeftOp if direction == "LEFT" else graph.ShiftRightOp
    return [b.binary(op_type, required(inputs, 0), required(inputs, 1))]


@converter("Xor")
def _xor(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Of booleans: a != b."""
    return [b.compare("ne", required(inputs, 0), required(inputs, 1))]


@converter("Mean")
def _mean(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """The sum of the inputs, broadcast, divided by their count."""
    total = required(inputs, 0)
    for other in inputs[1:]:
        assert other is not None
        total = b.binary(graph.AddOp, total, other)
    if len(inputs) == 1:
        return [total]
    return [b.binary(graph.DivOp, total, np.asarray(len(inputs), np.float32))]


@converter("IsInf")
def _is_inf(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """x == +inf, x == -inf, or |x| == inf, as detect_positive and detect_negative ask."""
    x = required(inputs)
    positive, negative = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if positive and negative:
        return [b.compare("eq", b.unary(graph.AbsOp, x), np.asarray(np.inf, np.float32))]
    target = np.inf if positive else -np.inf if negative else np.nan  # NaN: never equal
    return [b.compare("eq", x, np.asarray(target, np.float32))]


@converter("BitCast")
def _bit_cast(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    from onnx import helper

    x = required(inputs)
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    element = element_type_of(dtype, f"node {b.node}")
    return [b.op(graph.BitcastOp, [x], shape_of(x), element)]


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


@converter("Identity")
def _identity(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    return [required(inputs)]


@converter("Dropout")
def _dropout(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Inference (or a ratio of 0): the input, and a mask keeping every element. Training
    with a positive ratio draws random numbers, which a compiled inference graph does not."""
    x = required(inputs)
    ratio, training = optional(inputs, 1), optional(inputs, 2)
    if training is not None and isinstance(training, SSAValue):
        raise b.fail(b.must_be_constant(training, "training_mode"))
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        if isinstance(ratio, SSAValue):
            raise b.fail(b.must_be_constant(ratio, "ratio (in training mode)"))
        if ratio is None or float(np.asarray(ratio)) != 0:
            raise b.fail("Dropout in training mode draws random numbers (export in eval)")
    return [x, np.ones(shape_of(x), np.bool_)]


@converter("Gelu")
def _gelu(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    attr = graph.GeluApproximationAttr(graph.GeluApproximation(approximate))
    x = required(inputs)
    return [b.op(graph.GeluOp, [x], shape_of(x), approximate=attr)]
