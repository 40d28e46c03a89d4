"""Kernels whose stack buffers sit in a `memref.alloca_scope` build on one thread too.

A split epilogue keeps its row in a stack buffer inside an alloca scope. Where the loops
around the scope run once, canonicalisation removes them and the scope stays in the
function; mlir-opt's `scf-to-cf` then gave it several blocks, which its verifier refuses.
Found by the ONNX fuzzer (a mean over a size-1 axis beside a select of the same input).
"""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare

SCOPE_AT_FUNCTION_LEVEL = """
func.func @main(%x: tensor<1x1x127xf32>, %m: tensor<3x127xi1>, %y: tensor<3x127xf32>)
    -> (tensor<1x1x127xf32>, tensor<127x3xf32>) {
  %c = graph.constant dense<-0.5> : tensor<f32>
  %a = graph.max %x, %c : (tensor<1x1x127xf32>, tensor<f32>) -> tensor<1x1x127xf32>
  %r = graph.reduce_mean %a axes = [1] keepdims : tensor<1x1x127xf32> -> tensor<1x1x127xf32>
  %b = graph.abs %r : tensor<1x1x127xf32>
  %f = graph.reshape %a : tensor<1x1x127xf32> -> tensor<127xf32>
  %g = graph.broadcast_to %f : tensor<127xf32> -> tensor<3x127xf32>
  %s = graph.select %m, %g, %y : (tensor<3x127xi1>, tensor<3x127xf32>, tensor<3x127xf32>) -> tensor<3x127xf32>
  %t = graph.reshape %s : tensor<3x127xf32> -> tensor<127x3xf32>
  func.return %b, %t : tensor<1x1x127xf32>, tensor<127x3xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_alloca_scope_left_at_function_level_builds(threads: int) -> None:
    compile_and_compare(
        parse_text(SCOPE_AT_FUNCTION_LEVEL), options=CompileOptions(threads=threads)
    )
