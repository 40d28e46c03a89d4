"""ONNX quantization operators: QuantizeLinear/DequantizeLinear (per tensor, per axis,
blocked), the integer and QLinear matmul/conv ops and DynamicQuantizeLinear, checked
against onnxruntime where it runs the op as ONNX's reference does and against ONNX's
reference evaluator where they differ (QLinear rounding), exactly (integer outputs)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphfuse
from graphfuse.dialects.graph import interpreter
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.testing.onnx_models import onnxruntime_outputs

node = helper.make_node


def build(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, tuple[np.dtype[Any], Sequence[int]]],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 21,
) -> onnx.ModelProto:
    def info(name: str, dtype: np.dtype[Any], shape: Sequence[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)
        )

    graph = helper.make_graph(
        list(nodes),
        "q",
        [info(n, a.dtype, a.shape) for n, a in inputs.items()],
        [info(n, d, s) for n, (d, s) in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    built.ir_version = 10
    onnx.checker.check_model(built, full_check=True)
    return built


def graphfuse_outputs(
    built: onnx.ModelProto, inputs: dict[str, np.ndarray], compile_it: bool
) -> list[list[np.ndarray]]:
    module = graphfuse.from_onnx(built)
    arrays = list(inputs.values())
    runs = [list(interpreter.run(module, "main", *arrays))]
    if compile_it:
        got = graphfuse.compile(module)(*arrays)
        runs.append(list(got) if isinstance(got, tuple) else [got])
    return runs


def reference_outputs(built: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(ReferenceEvaluator(built).run(None, inputs))


def check(
    built: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    against: str = "onnxruntime",
    compile_it: bool = False,
) -> None:
    if against == "onnxruntime":
        expected = onnxruntime_outputs(built, inputs)
    else:
        expected = reference_outputs(built, inputs)
    for run in graphfuse_outputs(built, inputs, compile_it):
        assert len(run) == len(expected)
        for index, (got, want) in enumerate(zip(run, expected, strict=True)):
            want = np.asarray(want)
            assert got.dtype == want.dtype, f"output #{index}: {got.dtype} vs {want.dtype}"
            assert got.shape == want.shape, f"output #{index}: {got.shape} vs {want.shape}"
            if want.dtype.kind in "iub":
                np.testing.assert_array_equal(got, want, err_msg=f"output #{index}")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# Values whose x / scale falls on .5 ties, both signs, and far past every range.
TIES = np.array([0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 1e9, -1e9, 127.5, 128.5], np.float32)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_rounds_half_to_even_and_saturates(dtype: type) -> None:
    x = np.concatenate([TIES, TIES * 3.0]).reshape(4, 6)
    zero_point = np.array(3 if dtype in (np.uint8, np.uint16) else -3, dtype)
    nodes = [node("QuantizeLinear", ["x", "scale", "zp"], ["y"])]
    inits = {"scale": np.array(1.0, np.float32), "zp": zero_point}
    built = build(nodes, {"x": x}, {"y": (np.dtype(dtype), [4, 6])}, inits)
    check(built, {"x": x}, compile_it=dtype is np.int8)


def test_quantize_per_axis_with_computed_scale_compiled() -> None:
    """Per-channel scale and zero point coming from graph inputs (not constants)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4)) * 40).astype(np.float32)
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    zp = np.array([0, 10, 250], np.uint8)
    nodes = [node("QuantizeLinear", ["x", "scale", "zp"], ["y"], axis=1)]
    inputs = {"x": x, "scale": scale, "zp": zp}
    built = build(nodes, inputs, {"y": (np.dtype(np.uint8), [2, 3, 4])})
    check(built, inputs, compile_it=True)


def test_quantize_blocked_with_a_remainder_block() -> None:
    """block_size 2 over an axis of 5: the last block holds one element."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 5)) * 20).astype(np.float32)
    scale = np.array([[0.5, 1.0, 2.0]] * 3, np.float32)
    zp = np.array([[1, -2, 3]] * 3, np.int8)
    nodes = [node("QuantizeLinear", ["x", "scale", "zp"], ["y"], axis=1, block_size=2)]
    built = build(nodes, {"x": x}, {"y": (np.dtype(np.int8), [3, 5])}, {"scale": scale, "zp": zp})
    check(built, {"x": x}, against="reference")


def test_quantize_float16_input_divides_in_float16() -> None:
    x = np.array([1.0, 2.5, -3.7, 100.0, 0.3], np.float16)
    nodes = [node("QuantizeLinear", ["x", "scale", "zp"], ["y"])]
    inits = {"scale": np.array(0.3, np.float16), "zp": np.array(0, np.int8)}
    built = build(nodes, {"x": x}, {"y": (np.dtype(np.int8), [5])}, inits)
    check(built, {"x": x}, against="reference")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32])
def test_dequantize_per_axis(dtype: type) -> None:
    info = np.iinfo(dtype)
    x = np.array([[info.min, 0, 7, info.max]] * 2, dtype)
    scale = np.array([0.5, 0.125, 3.0, 1e-3], np.float32)
    zp = np.array([0, 1, 2, 3], dtype)
    nodes = [node("DequantizeLinear", ["x", "scale", "zp"], ["y"], axis=-1)]
    inits = {"scale": scale, "zp": zp}
    built = build(nodes, {"x": x}, {"y": (np.dtype(np.float32), [2, 4])}, inits)
    check(built, {"x": x}, against="reference", compile_it=dtype is np.int32)


def test_dequantize_blocked_compiled() -> None:
    x = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    scale = np.array([[[0.5, 1, 2]] * 2] * 2, np.float32)
    zp = np.array([[[1, 2, 3]] * 2] * 2, np.uint8)
    nodes = [node("DequantizeLinear", ["x", "scale", "zp"], ["y"], axis=1, block_size=2)]
    inits = {"scale": scale, "zp": zp}
    built = build(nodes, {"x": x}, {"y": (np.dtype(np.float32), [2, 4, 3])}, inits)
    check(built, {"x": x}, against="reference", compile_it=True)


def test_matmul_integer_and_conv_integer_compiled() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (3, 5), dtype=np.uint8)
    c = rng.integers(-128, 128, (5, 4), dtype=np.int8)
    x = rng.integers(0, 256, (1, 2, 5, 5), dtype=np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3), dtype=np.uint8)
    nodes = [
        node("MatMulInteger", ["a", "c", "azp", "czp"], ["m"]),
        node("ConvInteger", ["x", "w", "xzp", "wzp"], ["v"], pads=[1, 1, 1, 1], strides=[2, 2]),
    ]
    inits = {
        "azp": np.array(128, np.uint8),
        "czp": np.array(-3, np.int8),
        "xzp": np.array(100, np.uint8),
        "wzp": np.array(7, np.uint8),
    }
    inputs = {"a": a, "c": c, "x": x, "w": w}
    outputs = {"m": (np.dtype(np.int32), [3, 4]), "v": (np.dtype(np.int32), [1, 3, 3, 3])}
    check(build(nodes, inputs, outputs, inits), inputs, compile_it=True)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul_matches_the_reference(dtype: type) -> None:
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (2, 3, 6), dtype=dtype)
    c = rng.integers(info.min, info.max + 1, (6, 4), dtype=dtype)
    nodes = [
        node("QLinearMatMul", ["a", "as", "azp", "c", "cs", "czp", "ys", "yzp"], ["y"]),
    ]
    inits = {
        "as": np.array([0.02], np.float32),
        "azp": np.array([3], dtype),
        "cs": np.array([0.05], np.float32),
        "czp": np.array([-1 if dtype is np.int8 else 120], dtype),
        "ys": np.array([0.3], np.float32),
        "yzp": np.array([5], dtype),
    }
    inputs = {"a": a, "c": c}
    built = build(nodes, inputs, {"y": (np.dtype(dtype), [2, 3, 4])}, inits)
    check(built, inputs, against="reference", compile_it=dtype is np.uint8)


def test_qlinear_conv_per_channel_with_bias() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 2, 6, 6), dtype=np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3), dtype=np.uint8)
    names = ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"]
    nodes = [node("QLinearConv", names, ["y"], pads=[1, 1, 1, 1])]
    inits = {
        "xs": np.array(0.01, np.float32),
        "xzp": np.array(128, np.uint8),
        "ws": np.array([0.02, 0.005, 0.03], np.float32),
        "wzp": np.array([100, 128, 90], np.uint8),
        "ys": np.array(0.5, np.float32),
        "yzp": np.array(110, np.uint8),
        "bias": np.array([-500, 0, 900], np.int32),
    }
    built = build(nodes, {"x": x, "w": w}, {"y": (np.dtype(np.uint8), [1, 3, 6, 6])}, inits)
    check(built, {"x": x, "w": w}, against="reference", compile_it=True)


def test_dynamic_quantize_linear_compiled() -> None:
    x = np.array([[-3.5, 0.1, 2.0], [7.25, -0.4, 1.5]], np.float32)
    nodes = [node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])]
    outputs = {
        "y": (np.dtype(np.uint8), [2, 3]),
        "scale": (np.dtype(np.float32), []),
        "zp": (np.dtype(np.uint8), []),
    }
    check(build(nodes, {"x": x}, outputs), {"x": x}, compile_it=True)


def test_float8_quantization_is_refused_in_one_line() -> None:
    nodes = [node("QuantizeLinear", ["x", "scale"], ["y"], output_dtype=TensorProto.FLOAT8E4M3FN)]
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [2, 2])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "scale")],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(ImportFailure, match="FLOAT8E4M3FN is not supported") as error:
        graphfuse.from_onnx(built)
    assert "\n" not in str(error.value)


SCALAR_DATA_CASES = (
    r"test_(quantizelinear|dequantizelinear)(_uint16|_int16)?|test_qlinearconv"
    r"|test_convinteger_.*|test_dynamicquantizelinear.*"
)


def test_suite_cases_with_scalar_data_pass() -> None:
    """The node cases whose data holds NumPy scalars (the conformance runner takes only
    arrays) imported and interpreted here, their scalars made 0-d arrays."""
    from onnx.backend.test.case.node import collect_testcases

    from graphfuse.testing.onnx_conformance import Case, run_case

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = [c for c in collect_testcases(None) if re.fullmatch(SCALAR_DATA_CASES, c.name)]
    assert len(raw) >= 10
    for found in raw:
        inputs, outputs = found.data_sets[0]
        case = Case(
            found.name,
            found.model.graph.node[-1].op_type,
            found.model,
            tuple(np.asarray(v) for v in inputs),
            tuple(np.asarray(v) for v in outputs),
            float(found.rtol),
            float(found.atol),
        )
        outcome = run_case(case, "interpret")
        assert outcome.status == "pass", f"{found.name}: {outcome.status} {outcome.detail}"
