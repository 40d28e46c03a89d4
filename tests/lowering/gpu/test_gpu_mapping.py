"""convert-loop-to-gpu keeps the reference interpreter's results: GPU builds run on the CPU
(gpu_on_cpu: every block and thread of every launch, segment by segment between
all-reduces and barriers) for every lit fusion case and bundled example, for random graphs,
and with block sizes that leave rows and points partly covered."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import assert_matches
from graphfuse.testing.gpu_on_cpu import compile_gpu_on_cpu
from graphfuse.testing.random_graphs import random_graph
from tests.conftest import parse
from tests.lowering.test_compile_cases import CASES

EXAMPLES = int(os.environ.get("GRAPHFUSE_GPU_EXAMPLES", "60"))


def _check(text_or_module, name: str = "main", seed: int = 0, block_size: int = 256) -> None:  # noqa: ANN001
    module = parse_text(text_or_module, name) if isinstance(text_or_module, str) else text_or_module
    function = reference.find_function(module, name)
    arrays = reference.random_inputs(function, seed)
    expected = reference.run(module, name, *arrays)
    exact = reference.run(module, name, *arrays, f32_as_f64=True)
    compiled = compile_gpu_on_cpu(module, name, CompileOptions(block_size=block_size))
    got = compiled(*arrays)
    assert_matches(got if isinstance(got, tuple) else (got,), expected, exact=exact)


@pytest.mark.parametrize(("where", "text", "name"), CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_gpu_build_of_case_matches_reference(where: str, text: str, name: str) -> None:
    _check(text, name, seed=1)


ROWS = """
func.func @main(%x: tensor<3x70xf32>, %y: tensor<70x5xf32>) -> (tensor<3x70xf32>, tensor<3xf32>, tensor<5xf32>) {
  %s = graph.softmax %x axis = -1 : tensor<3x70xf32>
  %m = graph.reduce_max %x axes = [1] : tensor<3x70xf32> -> tensor<3xf32>
  %c = graph.reduce_sum %y axes = [0] : tensor<70x5xf32> -> tensor<5xf32>
  func.return %s, %m, %c : tensor<3x70xf32>, tensor<3xf32>, tensor<5xf32>
}
"""


@pytest.mark.parametrize("block_size", [32, 64, 1024])
def test_rows_and_points_with_partial_blocks(block_size: int) -> None:
    """Rows of 70 on 32 or 64 threads (strided, last pass partial), on 96 threads of a
    1024 request (rounded to warps); a column sum as points with a bounds check."""
    _check(ROWS, block_size=block_size)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    ops=st.integers(1, 24), seed=st.integers(0, 2**31 - 1), block=st.sampled_from([32, 128, 256])
)
def test_gpu_build_of_random_graph_matches_reference(ops: int, seed: int, block: int) -> None:
    _check(parse(random_graph(ops, (seed + 104729) % 2**31)), seed=seed % 1000, block_size=block)


ROW_STAGES = """
func.func @main(%x: tensor<5x70xf32>, %g: tensor<70xf32>, %h: tensor<70xf32>) -> (tensor<5x70xf32>, tensor<5x40xf32>) {
  %l = graph.layer_norm %x, %g, %h axis = 1 : (tensor<5x70xf32>, tensor<70xf32>, tensor<70xf32>) -> tensor<5x70xf32>
  %m = graph.reduce_max %x axes = [1] keepdims : tensor<5x70xf32> -> tensor<5x1xf32>
  %b = graph.broadcast_to %m : tensor<5x1xf32> -> tensor<5x40xf32>
  %t = graph.tanh %b : tensor<5x40xf32>
  func.return %l, %t : tensor<5x70xf32>, tensor<5x40xf32>
}
"""


@pytest.mark.parametrize("block_size", [32, 256])
def test_row_kernel_with_two_result_loops_has_a_barrier(block_size: int) -> None:
    """A stitched row kernel writing results of two row lengths (70 and 40) runs one
    shared loop per length; a gpu.barrier separates them (the only input that makes
    convert-loop-to-gpu emit one), and the emulation runs the segments it cuts."""
    gpu_text = lower_to(parse(ROW_STAGES), Stage.GPU, CompileOptions(block_size=block_size))
    assert gpu_text.count("gpu.barrier") == 1
    assert gpu_text.count("gpu.func") == 1  # one kernel: the barrier is inside it
    _check(ROW_STAGES, seed=3, block_size=block_size)
