"""Kernel counts on small graphs where XLA and Inductor make few kernels: the
Q/K/V projections as one GEMM, ReLU before MaxPool as one kernel, attention written by
hand (MatMul, Reshape, Transpose, Mul, Softmax, MatMul) in 5. Each graph is an ONNX model
with its weights as initializers, as exporters write them; the compiled results are checked
against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects.graph import functions
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.passes.analysis.kernel_stats import kernel_stats
from graphfuse.testing.onnx_models import check_against_onnxruntime, model

SEQ, WIDTH, HEADS = 64, 128, 4
HEAD = WIDTH // HEADS


def _kernels(built: onnx.ModelProto) -> list[str]:
    module = from_onnx(built)
    lower_to(module, Stage.GRAPH, CompileOptions())
    return [k.name for k in kernel_stats(next(functions(module)))]


def _weights(rng: np.random.Generator, *names: str) -> dict[str, np.ndarray]:
    return {n: (rng.standard_normal((WIDTH, WIDTH)) * 0.05).astype(np.float32) for n in names}


def _attention(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "wq"], ["q"]),
        node("MatMul", ["x", "wk"], ["k"]),
        node("MatMul", ["x", "wv"], ["v"]),
        *(node("Reshape", [t, "heads"], [f"{t}4"]) for t in "qkv"),
        node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        node("Transpose", ["k4"], ["kh"], perm=[0, 2, 3, 1]),
        node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        node("MatMul", ["qh", "kh"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s"]),
        node("Softmax", ["s"], ["p"], axis=-1),
        node("MatMul", ["p", "vh"], ["c"]),
        node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
        node("Reshape", ["ct", "merged"], ["c3"]),
        node("MatMul", ["c3", "wo"], ["y"]),
    ]
    initializers = {
        **_weights(rng, "wq", "wk", "wv", "wo"),
        "heads": np.array([1, SEQ, HEADS, HEAD], np.int64),
        "merged": np.array([1, SEQ, WIDTH], np.int64),
        "scale": np.array(HEAD**-0.5, np.float32),
    }
    x = rng.standard_normal((1, SEQ, WIDTH)).astype(np.float32)
    outputs = {"y": (TensorProto.FLOAT, [1, SEQ, WIDTH])}
    return model(nodes, {"x": x}, outputs, initializers), {"x": x}


def test_attention_written_by_hand_is_five_kernels(rng):
    """Q/K/V one GEMM; the heads' reshapes and transposes read in place by the two
    attention matmuls and the output projection; the scale in the scores' epilogue;
    softmax one kernel. It was 9 (three projections, a layout kernel of Q/K/V, the scores,
    softmax, context, a layout kernel of the context, the output projection)."""
    built, inputs = _attention(rng)
    kernels = _kernels(built)
    assert len(kernels) == 5, kernels
    assert sum("matmul" in k for k in kernels) == 4
    check_against_onnxruntime(built, inputs, compile_it=True)


def test_projections_of_one_input_are_one_gemm(rng):
    node = helper.make_node
    nodes = [node("MatMul", ["x", f"w{t}"], [t]) for t in "qkv"]
    nodes += [node("Add", [t, f"b{t}"], [f"{t}b"]) for t in "qkv"]
    initializers = {
        **_weights(rng, "wq", "wk", "wv"),
        **{f"b{t}": rng.standard_normal(WIDTH).astype(np.float32) for t in "qkv"},
    }
    x = rng.standard_normal((1, SEQ, WIDTH)).astype(np.float32)
    outputs = {f"{t}b": (TensorProto.FLOAT, [1, SEQ, WIDTH]) for t in "qkv"}
    built = model(nodes, {"x": x}, outputs, initializers)
    kernels = _kernels(built)
    assert sum("matmul" in k for k in kernels) == 1, kernels
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


@pytest.mark.parametrize("producer", ["Relu", "Neg"])
def test_elementwise_before_max_pool_is_one_kernel(producer, rng):
    node = helper.make_node
    nodes = [
        node(producer, ["x"], ["r"]),
        node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    ]
    # Neg of positive inputs is negative everywhere: a pooling that let its padding into
    # the producer (-(-inf) = +inf at the borders) or read the producer's input would
    # differ from onnxruntime there.
    x = (rng.standard_normal((1, 8, 32, 32)) + 3.0).astype(np.float32)
    built = model(nodes, {"x": x}, {"y": (TensorProto.FLOAT, [1, 8, 16, 16])})
    assert _kernels(built) == [f"fused_{producer.lower()}_max_pool2d"]
    check_against_onnxruntime(built, {"x": x}, compile_it=True)
