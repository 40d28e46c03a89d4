"""Elementwise ONNX ops and the element types beyond f32/f16/i32/i64/bool, end to end: each
model is imported, run in the reference interpreter and compiled for the CPU, and both must
equal onnxruntime (or NumPy, where onnxruntime has no kernel for the type) exactly for
integers and within a tolerance for floats."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.parsing import parse_text
from graphfuse.testing.onnx_models import onnxruntime_outputs

Array = np.ndarray[Any, Any]


def _model(
    op_type: str,
    inputs: dict[str, Array],
    outputs: int = 1,
    initializers: dict[str, Array] | None = None,
    opset: int = 22,
    **attrs: Any,
) -> onnx.ModelProto:
    names = [*inputs, *(initializers or {})]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, [f"y{i}" for i in range(outputs)], **attrs)],
        op_type,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in inputs.items()
        ],
        [helper.make_value_info(f"y{i}", onnx.TypeProto()) for i in range(outputs)],
        [numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    built.ir_version = 10
    inferred = onnx.shape_inference.infer_shapes(built, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred


def _run_both(built: onnx.ModelProto, inputs: dict[str, Array]) -> list[list[Array]]:
    """The interpreter's results and the compiled library's, each a list of arrays."""
    module = from_onnx(built)
    arrays = list(inputs.values())
    interpreted = list(reference.run(module, "main", *arrays))
    compiled = graphfuse.compile(module)(*arrays)
    return [interpreted, list(compiled) if isinstance(compiled, tuple) else [compiled]]


def _check(got: Array, want: Array, tolerance: float = 1e-5) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def _check_model(
    built: onnx.ModelProto, inputs: dict[str, Array], expected: list[Array] | None = None
) -> None:
    """Interpreter and compiled results equal `expected` (default: onnxruntime's)."""
    want = expected if expected is not None else onnxruntime_outputs(built, inputs)
    for results in _run_both(built, inputs):
        assert len(results) == len(want)
        for got, wanted in zip(results, want, strict=True):
            _check(got, np.asarray(wanted))


_LATEST = onnx.defs.onnx_opset_version()
"""BitShift takes signed integers, and BitCast exists, from the latest opsets on."""

_MIXED = {
    "x": np.array([-7, 7, -7, 7, 0, 5, -128, 100], np.int8),
    "y": np.array([2, 2, -2, -2, 3, -3, -1, 0], np.int8),
}


def test_div_of_signed_integers_truncates_toward_zero() -> None:
    x, y = _MIXED["x"][:6], _MIXED["y"][:6]
    _check_model(
        _model("Div", {"x": x, "y": y}), {"x": x, "y": y}, [np.trunc(x / y).astype(x.dtype)]
    )


def test_div_of_unsigned_integers_reads_them_unsigned() -> None:
    x = np.array([200, 255, 17, 128], np.uint8)
    y = np.array([3, 2, 4, 1], np.uint8)
    _check_model(_model("Div", {"x": x, "y": y}), {"x": x, "y": y})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_signed_integers_takes_the_sign_onnx_says(fmod: int) -> None:
    x, y = _MIXED["x"][:6], _MIXED["y"][:6]
    want = np.fmod(x, y) if fmod else np.mod(x, y)
    _check_model(_model("Mod", {"x": x, "y": y}, fmod=fmod), {"x": x, "y": y}, [want])


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_floats_takes_the_sign_onnx_says(fmod: int) -> None:
    x = np.array([-4.3, 7.2, 5.0, 4.3, -7.2, 8.0, -3.0, 1.0], np.float32)
    y = np.array([2.1, -3.4, 8.0, -2.1, 3.4, 5.0, np.inf, 0.0], np.float32)
    with np.errstate(all="ignore"):
        want = np.fmod(x, y) if fmod else np.mod(x, y)
    for results in _run_both(_model("Mod", {"x": x, "y": y}, fmod=fmod), {"x": x, "y": y}):
        np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_mod_of_unsigned_integers() -> None:
    x = np.array([250, 7, 200, 9], np.uint8)
    y = np.array([7, 250, 3, 9], np.uint8)
    _check_model(_model("Mod", {"x": x, "y": y}), {"x": x, "y": y}, [np.mod(x, y)])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint64])
def test_bit_shifts_of_unsigned_integers(dtype: Any) -> None:
    x = np.array([16, 4, 1, 255], dtype)
    y = np.array([1, 2, 3, 4], dtype)
    for direction in ("LEFT", "RIGHT"):
        _check_model(_model("BitShift", {"x": x, "y": y}, direction=direction), {"x": x, "y": y})


def test_right_shift_of_signed_integers_is_arithmetic_and_saturates() -> None:
    x = np.array([-8, -1, -128, 4, -8, 64], np.int8)
    y = np.array([1, 1, 1, 9, 127, 1], np.int8)
    want = np.array([-4, -1, -64, 0, -1, 32], np.int8)
    built = _model("BitShift", {"x": x, "y": y}, opset=_LATEST, direction="RIGHT")
    _check_model(built, {"x": x, "y": y}, [want])


def test_left_shift_of_signed_integers_wraps_and_saturates() -> None:
    x = np.array([64, 1, -64, -8, 4], np.int8)
    y = np.array([1, 7, 1, 8, 9], np.int8)
    want = np.array([-128, -128, -128, 0, 0], np.int8)
    built = _model("BitShift", {"x": x, "y": y}, opset=_LATEST, direction="LEFT")
    _check_model(built, {"x": x, "y": y}, [want])


@pytest.mark.parametrize("op_type", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_ops_broadcast(op_type: str) -> None:
    x = np.array([[0xF0F0, 0x1234, 0xFFFF]], np.uint16)
    y = np.array([[0x0FF0], [0x8001]], np.uint16)
    _check_model(_model(op_type, {"x": x, "y": y}), {"x": x, "y": y})


def test_bitwise_not_of_signed_integers() -> None:
    x = np.array([0, -1, 5, -128, 127], np.int8)
    _check_model(_model("BitwiseNot", {"x": x}), {"x": x})


_TRIG = {
    "Sin": (np.sin, (-3, 3)),
    "Cos": (np.cos, (-3, 3)),
    "Tan": (np.tan, (-1.4, 1.4)),
    "Asin": (np.arcsin, (-0.99, 0.99)),
    "Acos": (np.arccos, (-0.99, 0.99)),
    "Atan": (np.arctan, (-5, 5)),
    "Sinh": (np.sinh, (-3, 3)),
    "Cosh": (np.cosh, (-3, 3)),
    "Asinh": (np.arcsinh, (-5, 5)),
    "Acosh": (np.arccosh, (1.01, 5)),
    "Atanh": (np.arctanh, (-0.99, 0.99)),
}


def test_trigonometric_and_hyperbolic_functions_in_one_kernel() -> None:
    """All eleven chained off one input: they fuse into one kernel and each is exact to
    float32 rounding."""
    x = np.random.default_rng(0).uniform(0, 1, (4, 8)).astype(np.float32)
    nodes: list[onnx.NodeProto] = []
    outputs: list[onnx.ValueInfoProto] = []
    initializers: list[onnx.TensorProto] = []
    want: list[Array] = []
    for index, (op_type, (fn, (low, high))) in enumerate(_TRIG.items()):
        nodes += [
            helper.make_node("Mul", ["x", f"s{index}"], [f"m{index}"]),
            helper.make_node("Add", [f"m{index}", f"o{index}"], [f"a{index}"]),
            helper.make_node(op_type, [f"a{index}"], [f"y{index}"]),
        ]
        initializers += [
            numpy_helper.from_array(np.array(high - low, np.float32), f"s{index}"),
            numpy_helper.from_array(np.array(low, np.float32), f"o{index}"),
        ]
        outputs.append(helper.make_tensor_value_info(f"y{index}", onnx.TensorProto.FLOAT, x.shape))
        scaled = x * np.float32(high - low) + np.float32(low)
        want.append(fn(scaled.astype(np.float64)).astype(np.float32))
    graph = helper.make_graph(
        nodes,
        "trig",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        outputs,
        initializers,
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    for results in _run_both(built, {"x": x}):
        for got, wanted in zip(results, want, strict=True):
            np.testing.assert_allclose(got, wanted, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("op_type", "fn"),
    [("Floor", np.floor), ("Ceil", np.ceil), ("Round", np.round), ("Sign", np.sign)],
)
def test_rounding_and_sign(op_type: str, fn: Any) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 2.7, -2.7, np.nan], np.float32)
    for results in _run_both(_model(op_type, {"x": x}), {"x": x}):
        np.testing.assert_array_equal(results[0], fn(x))


def test_sign_of_integers() -> None:
    x = np.array([-5, 0, 7, -128], np.int8)
    _check_model(_model("Sign", {"x": x}), {"x": x}, [np.sign(x)])
    u = np.array([0, 1, 255], np.uint8)
    _check_model(_model("Sign", {"x": u}), {"x": u}, [np.sign(u)])


@pytest.mark.parametrize(("positive", "negative"), [(1, 1), (1, 0), (0, 1)])
def test_isinf_detects_the_signs_asked_for(positive: int, negative: int) -> None:
    x = np.array([-1.2, np.nan, np.inf, 2.8, -np.inf, np.inf], np.float32)
    built = _model("IsInf", {"x": x}, detect_positive=positive, detect_negative=negative)
    _check_model(built, {"x": x})


def test_min_and_max_propagate_nan() -> None:
    x = np.array([1.0, np.nan, -2.0, np.nan], np.float32)
    y = np.array([np.nan, 2.0, -3.0, np.nan], np.float32)
    for op_type, fn in (("Min", np.minimum), ("Max", np.maximum)):
        for results in _run_both(_model(op_type, {"x": x, "y": y}), {"x": x, "y": y}):
            np.testing.assert_array_equal(results[0], fn(x, y))


def test_min_and_max_of_unsigned_integers_above_the_signed_range() -> None:
    x = np.array([2**64 - 1, 1, 2**63], np.uint64)
    y = np.array([5, 2**63 + 1, 3], np.uint64)
    for op_type in ("Min", "Max"):
        _check_model(_model(op_type, {"x": x, "y": y}), {"x": x, "y": y})


def test_reduce_max_of_unsigned_bytes_above_127() -> None:
    x = np.array([[3, 200, 17], [255, 0, 128]], np.uint8)
    axes = np.array([1], np.int64)
    for op_type, fn in (("ReduceMax", np.max), ("ReduceMin", np.min)):
        built = _model(op_type, {"x": x}, initializers={"axes": axes}, keepdims=0)
        _check_model(built, {"x": x}, [fn(x, axis=1)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_reduce_prod(dtype: Any) -> None:
    x = (np.arange(24).reshape(2, 3, 4) % 5 + 1).astype(dtype)
    axes = np.array([1], np.int64)
    built = _model("ReduceProd", {"x": x}, initializers={"axes": axes}, keepdims=1)
    _check_model(built, {"x": x}, [np.prod(x, axis=1, keepdims=True).astype(dtype)])


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (np.uint8, np.float32),
        (np.float32, np.uint8),
        (np.int8, np.int64),
        (np.uint8, np.int32),
        (np.uint32, np.float64),
        (np.float64, np.int16),
        (np.int64, np.uint16),
    ],
)
def test_cast_between_new_element_types(source: Any, target: Any) -> None:
    values = np.array([0, 1, 7, 100, 127, 200, 250], np.float64)
    x = values.astype(source)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(target))
    _check_model(_model("Cast", {"x": x}, to=to), {"x": x}, [x.astype(target)])


def test_pow_of_integers_with_negative_exponents() -> None:
    x = np.array([2, -2, 1, -1, -1, 3, 0], np.int64)
    y = np.array([10, 3, -4, -3, -2, -1, 0], np.int64)
    want = np.array([1024, -8, 1, -1, 1, 0, 1], np.int64)
    _check_model(_model("Pow", {"x": x, "y": y}), {"x": x, "y": y}, [want])


def test_pow_of_an_integer_base_by_a_float_exponent() -> None:
    x = np.array([1, 2, 3], np.int32)
    y = np.array([4, 5, 6], np.float32)
    _check_model(_model("Pow", {"x": x, "y": y}), {"x": x, "y": y})


@pytest.mark.parametrize(
    ("x", "target"),
    [
        (np.array([1.0, -2.5, 3.75], np.float32), np.int32),
        (np.array([True, False, True], np.bool_), np.uint8),
        (np.array([1.0, -2.0, 65504.0], np.float16), np.int16),
        (np.array([-1, -128, 127], np.int8), np.uint8),
    ],
)
def test_bitcast_keeps_the_bits(x: Array, target: Any) -> None:
    to = helper.np_dtype_to_tensor_dtype(np.dtype(target))
    want = x.astype(np.uint8) if x.dtype == np.bool_ else x.view(target)
    _check_model(_model("BitCast", {"x": x}, opset=_LATEST, to=to), {"x": x}, [want])


def test_xor_and_mean() -> None:
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    _check_model(_model("Xor", {"a": a, "b": b}), {"a": a, "b": b})
    x = np.array([3.0, 0.0, 2.0], np.float32)
    y = np.array([1.0, 3.0, 4.0], np.float32)
    z = np.array([2.0, 6.0, 6.0], np.float32)
    _check_model(_model("Mean", {"x": x, "y": y, "z": z}), {"x": x, "y": y, "z": z})


def test_unsigned_constant_prints_and_parses_back() -> None:
    """A ui8 constant above 127 survives the module's text, and the compiled function
    takes and returns uint8 arrays."""
    x = np.array([100, 200, 50], np.uint8)
    built = _model("Add", {"x": x}, initializers={"k": np.array([100, 55, 250], np.uint8)})
    text = str(from_onnx(built))
    assert "ui8" in text
    module = parse_text(text)
    want = x + np.array([100, 55, 250], np.uint8)
    np.testing.assert_array_equal(reference.run(module, "main", x)[0], want)
    got = graphfuse.compile(module)(x)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_double_initializer_stays_double() -> None:
    """An f64 weight is an f64 constant: 1e-300 * 1e-10 keeps its f64 value, where a
    float32 constant would give 0."""
    x = np.array([2.0, 4.0, 1e-10])
    k = np.array([1.5, 2.25, 1e-300])
    built = _model("Mul", {"x": x}, initializers={"k": k})
    for results in _run_both(built, {"x": x}):
        assert results[0].dtype == np.float64
        np.testing.assert_allclose(results[0], x * k, rtol=1e-12, atol=0)
