"""f16 and bf16 values round to their type after every op inside a fused kernel.

The reference computes each f16/bf16 op in float32 and rounds its result; kernels compute
in f32 too, and once rounded only on store, so a fused chain kept f32 precision between
its ops: a product that underflows to zero in f16 stayed positive, and a comparison of it
flipped (found by the ONNX fuzzer: Cast to f16, Mul, Cast back, Greater). Each case is
one kernel, compared with the reference exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text

UNDERFLOW = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xi1> {
  %h = graph.cast %x : tensor<64xf32> -> tensor<64x{t}>
  %c = graph.constant dense<1.0e-04> : tensor<{t}>
  %p = graph.mul %h, %c : (tensor<64x{t}>, tensor<{t}>) -> tensor<64x{t}>
  %p2 = graph.mul %p, %c : (tensor<64x{t}>, tensor<{t}>) -> tensor<64x{t}>
  %q = graph.cast %p2 : tensor<64x{t}> -> tensor<64xf32>
  %z = graph.constant dense<0.0> : tensor<f32>
  %y = graph.compare gt, %q, %z : (tensor<64xf32>, tensor<f32>) -> tensor<64xi1>
  func.return %y : tensor<64xi1>
}
"""

CHAIN = """
func.func @main(%x: tensor<8x96x{t}>, %y: tensor<8x96x{t}>) -> tensor<8x96x{t}> {
  %a = graph.add %x, %y : (tensor<8x96x{t}>, tensor<8x96x{t}>) -> tensor<8x96x{t}>
  %m = graph.mul %a, %x : (tensor<8x96x{t}>, tensor<8x96x{t}>) -> tensor<8x96x{t}>
  %e = graph.exp %m : tensor<8x96x{t}>
  %s = graph.sub %e, %a : (tensor<8x96x{t}>, tensor<8x96x{t}>) -> tensor<8x96x{t}>
  %d = graph.div %s, %y : (tensor<8x96x{t}>, tensor<8x96x{t}>) -> tensor<8x96x{t}>
  func.return %d : tensor<8x96x{t}>
}
"""

ROW_SUM = """
func.func @main(%x: tensor<8x96x{t}>) -> tensor<8x96x{t}> {
  %e = graph.exp %x : tensor<8x96x{t}>
  %s = graph.reduce_sum %e axes = [1] keepdims : tensor<8x96x{t}> -> tensor<8x1x{t}>
  %r = graph.sqrt %s : tensor<8x1x{t}>
  %d = graph.div %e, %r : (tensor<8x96x{t}>, tensor<8x1x{t}>) -> tensor<8x96x{t}>
  func.return %d : tensor<8x96x{t}>
}
"""


INT_CAST = """
func.func @main(%x: tensor<64xi32>, %y: tensor<64x{t}>) -> tensor<64x{t}> {
  %h = graph.cast %x : tensor<64xi32> -> tensor<64x{t}>
  %d = graph.sub %h, %y : (tensor<64x{t}>, tensor<64x{t}>) -> tensor<64x{t}>
  func.return %d : tensor<64x{t}>
}
"""

PAD_FILL = """
func.func @main(%x: tensor<4x6x{t}>) -> tensor<4x8x{t}> {
  %p = graph.pad %x low = [0, 1] high = [0, 1] value = 0.1 : tensor<4x6x{t}> -> tensor<4x8x{t}>
  %c = graph.constant dense<0.1> : tensor<{t}>
  %d = graph.sub %p, %c : (tensor<4x8x{t}>, tensor<{t}>) -> tensor<4x8x{t}>
  func.return %d : tensor<4x8x{t}>
}
"""


def _inputs(case: str, element: str, generated: list[np.ndarray]) -> list[np.ndarray]:
    if case == "UNDERFLOW":  # products near f16's smallest subnormal: some round to zero
        return [np.linspace(-0.02, 0.02, 64, dtype=np.float32)]
    if case == "INT_CAST":  # integers f16/bf16 cannot hold: x - round(x) is 0 rounded
        x = np.arange(2049, 2049 + 64 * 37, 37, dtype=np.int32)
        held = x.astype(np.float32)
        return [x, held.astype(np.float16) if element == "f16" else reference.round_to_bf16(held)]
    return generated


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize("case", ["UNDERFLOW", "CHAIN", "ROW_SUM", "INT_CAST", "PAD_FILL"])
@pytest.mark.parametrize("threads", [1, 2])
def test_narrow_floats_round_after_every_op(case: str, element: str, threads: int) -> None:
    module = parse_text(globals()[case].replace("{t}", element))
    function = reference.find_function(module, "main")
    inputs = _inputs(case, element, reference.random_inputs(function, seed=3))
    expected = reference.run(module, "main", *inputs)
    compiled = graphfuse.compile(module, options=CompileOptions(threads=threads))
    assert compiled.kernel_count == 1
    got = compiled(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)
