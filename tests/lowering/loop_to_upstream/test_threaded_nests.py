"""Which dims of a threaded loop nest convert-loop-to-upstream runs as scf.parallel."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.canonicalization_patterns.utils import const_evaluate_operand

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.lowering.cpu.tuning.loop_annotations import trip_count
from graphfuse.lowering.loop_to_upstream.convert_loop_to_upstream import ConvertLoopToUpstreamPass
from graphfuse.parsing import make_context, parse_text

POOL = """
loop.kernel @pool {
^bb0(%x: memref<1x{c}x7x7xf32>, %y: memref<1x{c}xf32>):
  %zero = arith.constant 0 : index
  %f0 = arith.constant 0.000000e+00 : f32
  loop.parallel [1, {c}] {
  ^bb0(%n: index, %ch: index):
    %s = loop.reduce add [7, 7] init(%f0 : f32) {
    ^bb0(%i: index, %j: index):
      %v = loop.load %x[%zero, %ch, %i, %j] : memref<1x{c}x7x7xf32> -> f32
      loop.yield %v : f32
    }
    loop.store %s, %y[%zero, %ch] : f32, memref<1x{c}xf32>
    loop.yield
  }
  loop.yield
}
"""

SCALE = """
loop.kernel @scale {
^bb0(%x: memref<1x65536xf32>, %y: memref<1x65536xf32>):
  %zero = arith.constant 0 : index
  %two = arith.constant 2.000000e+00 : f32
  loop.parallel [1, 65536] {
  ^bb0(%n: index, %i: index):
    %v = loop.load %x[%zero, %i] : memref<1x65536xf32> -> f32
    %w = arith.mulf %v, %two : f32
    loop.store %w, %y[%zero, %i] : f32, memref<1x65536xf32>
    loop.yield
  }
  loop.yield
}
"""


def _upstream(text: str) -> ModuleOp:
    module = parse_text(f"builtin.module {{{text}}}", "test.mlir")
    ConvertLoopToUpstreamPass(parallel=True).apply(make_context(), module)
    return module


def _parallel_bounds(module: ModuleOp) -> list[int | None]:
    (parallel,) = [op for op in module.walk() if isinstance(op, scf.ParallelOp)]
    return [const_evaluate_operand(bound) for bound in parallel.upperBound]


def test_pool_over_unit_batch_is_split_over_channels() -> None:
    """[1, C] around a reduction: both dims parallel, so the C points become tasks (one
    task on one thread otherwise)."""
    assert _parallel_bounds(_upstream(POOL.replace("{c}", "1280"))) == [1, 1280]


def test_elementwise_row_keeps_its_vector_loop() -> None:
    """[1, N] with a scalar body: the innermost dim stays the plain loop LLVM vectorises."""
    module = _upstream(SCALE)
    assert _parallel_bounds(module) == [1]
    (inner,) = [op for op in module.walk() if isinstance(op, scf.ForOp)]
    assert trip_count(inner) == 65536


def test_small_pool_stays_serial() -> None:
    """Below PARALLEL_MIN_WORK the nest is not threaded at all."""
    module = _upstream(POOL.replace("{c}", "16"))
    assert not [op for op in module.walk() if isinstance(op, scf.ParallelOp)]


@pytest.mark.parametrize("channels", [1280, 2048])
def test_threaded_global_pool_matches_numpy(channels: int) -> None:
    """The global average pool compiled on 2 threads against NumPy's mean."""
    text = f"""
func.func @main(%x: tensor<1x{channels}x7x7xf32>) -> tensor<1x{channels}x1x1xf32> {{
  %0 = graph.reduce_mean %x axes = [2, 3] keepdims : tensor<1x{channels}x7x7xf32> -> tensor<1x{channels}x1x1xf32>
  func.return %0 : tensor<1x{channels}x1x1xf32>
}}
"""
    x = np.random.default_rng(0).standard_normal((1, channels, 7, 7)).astype(np.float32)
    compiled = graphfuse.compile(parse_text(text, "pool.mlir"), options=CompileOptions(threads=2))
    np.testing.assert_allclose(
        compiled(x), x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6
    )
