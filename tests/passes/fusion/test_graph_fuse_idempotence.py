"""graph-fuse is idempotent: run on its own printed output, it prints the same text.

A second run must find nothing left to simplify, decompose or fuse, and must outline and
order the kernels it keeps exactly as the first run left them. Random graphs
(graphfuse.testing.random_graphs) and a Gemm with beta = 0 imported from ONNX are run through the
pass twice, printed both times, and compared as text.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.context import Context

from graphfuse.parsing import parse_text
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.testing.random_graphs import random_graph

EXAMPLES = int(os.environ.get("GRAPHFUSE_PROPERTY_EXAMPLES", "100"))


def _fused_text(text: str, fuse: GraphFusePass) -> str:
    module = parse_text(text, "idempotence.mlir")
    fuse.apply(Context(), module)
    return str(module)


def _assert_idempotent(text: str, fuse: GraphFusePass) -> None:
    once = _fused_text(text, fuse)
    twice = _fused_text(once, fuse)
    assert twice == once


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=EXAMPLES <= 500,
)
@given(
    ops=st.integers(min_value=1, max_value=30),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    max_depth=st.sampled_from([2, 5, 256]),
    refine=st.booleans(),
)
def test_graph_fuse_idempotent_on_random_graphs(
    ops: int, seed: int, max_depth: int, refine: bool
) -> None:
    _assert_idempotent(random_graph(ops, seed), GraphFusePass(max_depth=max_depth, refine=refine))


@pytest.mark.parametrize("c_shape", [[4, 6], [6], [1, 6], []])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_graph_fuse_idempotent_on_gemm_beta(c_shape: list[int], beta: float) -> None:
    """ONNX Gemm imports as matmul + add of C * beta; beta = 0 leaves a multiply by a zero
    constant for the first run's simplification."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from graphfuse.frontend.onnx_import import from_onnx

    # Negative entries too: C * 0 then folds to zeros of both signs.
    size = int(np.prod(c_shape))
    value = (np.arange(size, dtype=np.float32) - size / 2).reshape(c_shape)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["a", "b", "c"], ["g"], beta=beta),
            helper.make_node("Relu", ["g"], ["y"]),
        ],
        "gemm",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 6]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
        initializer=[numpy_helper.from_array(value, "c")],
    )
    model = helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    _assert_idempotent(str(from_onnx(model)), GraphFusePass())


def test_graph_fuse_idempotent_on_zeros_of_both_signs() -> None:
    """Folding [-1, 2] * 0 gives [-0, 0]: xDSL prints such an array as a splat of its first
    element (its splat test compares values, and -0.0 == 0.0), so the text would say
    something other than the module held and a second run simplified further."""
    text = """
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %c = graph.constant dense<[[-1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %z = graph.constant dense<0.0> : tensor<f32>
  %m = graph.mul %c, %z : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %p = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %a = graph.add %p, %m : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %a : tensor<2x2xf32>
}
"""
    _assert_idempotent(text, GraphFusePass())
