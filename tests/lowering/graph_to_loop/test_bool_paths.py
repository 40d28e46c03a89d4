"""i1 values through fused kernels, compiled and compared with the reference.

Masks (Swin's shifted-window attention, causal masks) reach kernels as i1 buffers, as
compares inside them and as selects on either. The matmul epilogue runs vectorised along
the columns (tile_epilogue), where a lane-varying i1 once printed as a scalar condition
that mlir-opt rejected; every case here is large enough for the matmul to be tiled.
"""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare

_MATMUL = """
  %s = graph.matmul %q, %k : (tensor<2x64x32xf32>, tensor<2x32x64xf32>) -> tensor<2x64x64xf32>
  %neg = graph.constant dense<-1.0e+02> : tensor<f32>
  %z = graph.constant dense<0.0> : tensor<f32>
"""

CASES = {
    "mask_input_select_in_matmul_epilogue": """
func.func @main(%q: tensor<2x64x32xf32>, %k: tensor<2x32x64xf32>, %m: tensor<64x64xi1>)
    -> tensor<2x64x64xf32> {"""
    + _MATMUL
    + """
  %b = graph.select %m, %neg, %z : (tensor<64x64xi1>, tensor<f32>, tensor<f32>) -> tensor<64x64xf32>
  %a = graph.add %s, %b : (tensor<2x64x64xf32>, tensor<64x64xf32>) -> tensor<2x64x64xf32>
  func.return %a : tensor<2x64x64xf32>
}""",
    "compare_select_in_matmul_epilogue": """
func.func @main(%q: tensor<2x64x32xf32>, %k: tensor<2x32x64xf32>, %t: tensor<64xf32>)
    -> tensor<2x64x64xf32> {"""
    + _MATMUL
    + """
  %c = graph.compare gt, %s, %t : (tensor<2x64x64xf32>, tensor<64xf32>) -> tensor<2x64x64xi1>
  %a = graph.select %c, %s, %neg : (tensor<2x64x64xi1>, tensor<2x64x64xf32>, tensor<f32>) -> tensor<2x64x64xf32>
  func.return %a : tensor<2x64x64xf32>
}""",
    "compare_result_of_matmul": """
func.func @main(%q: tensor<2x64x32xf32>, %k: tensor<2x32x64xf32>, %t: tensor<64xf32>)
    -> tensor<2x64x64xi1> {"""
    + _MATMUL
    + """
  %c = graph.compare lt, %s, %t : (tensor<2x64x64xf32>, tensor<64xf32>) -> tensor<2x64x64xi1>
  func.return %c : tensor<2x64x64xi1>
}""",
    "mask_cast_in_matmul_epilogue": """
func.func @main(%q: tensor<2x64x32xf32>, %k: tensor<2x32x64xf32>, %m: tensor<2x64x64xi1>)
    -> tensor<2x64x64xf32> {"""
    + _MATMUL
    + """
  %f = graph.cast %m : tensor<2x64x64xi1> -> tensor<2x64x64xf32>
  %a = graph.mul %s, %f : (tensor<2x64x64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  func.return %a : tensor<2x64x64xf32>
}""",
    "window_mask_into_stitched_softmax": """
func.func @main(%q: tensor<2x64x32xf32>, %k: tensor<2x32x64xf32>, %ids: tensor<2x64xf32>)
    -> tensor<2x64x64xf32> {"""
    + _MATMUL
    + """
  %r1 = graph.reshape %ids : tensor<2x64xf32> -> tensor<2x64x1xf32>
  %r2 = graph.reshape %ids : tensor<2x64xf32> -> tensor<2x1x64xf32>
  %d = graph.compare ne, %r1, %r2 : (tensor<2x64x1xf32>, tensor<2x1x64xf32>) -> tensor<2x64x64xi1>
  %b = graph.select %d, %neg, %z : (tensor<2x64x64xi1>, tensor<f32>, tensor<f32>) -> tensor<2x64x64xf32>
  %a = graph.add %s, %b : (tensor<2x64x64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %p = graph.softmax %a axis = -1 : tensor<2x64x64xf32>
  func.return %p : tensor<2x64x64xf32>
}""",
    "bool_through_injective_ops": """
func.func @main(%m: tensor<8x16xi1>, %n: tensor<16x8xi1>, %x: tensor<2x16x16xf32>)
    -> (tensor<2x16x16xf32>, tensor<16x16xi1>) {
  %t = graph.transpose %m perm = [1, 0] : tensor<8x16xi1> -> tensor<16x8xi1>
  %c = graph.concat %t, %n axis = 1 : (tensor<16x8xi1>, tensor<16x8xi1>) -> tensor<16x16xi1>
  %r = graph.reshape %c : tensor<16x16xi1> -> tensor<256xi1>
  %u = graph.reshape %r : tensor<256xi1> -> tensor<16x16xi1>
  %b = graph.broadcast_to %u : tensor<16x16xi1> -> tensor<2x16x16xi1>
  %e = graph.exp %x : tensor<2x16x16xf32>
  %s = graph.select %b, %e, %x : (tensor<2x16x16xi1>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  func.return %s, %u : tensor<2x16x16xf32>, tensor<16x16xi1>
}""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bool_paths_compiled_match_reference(case: str) -> None:
    compile_and_compare(parse_text(CASES[case], case))


def test_bool_paths_mask_epilogue_one_thread() -> None:
    """The single-threaded build lowers the same epilogue without OpenMP."""
    module = parse_text(CASES["mask_input_select_in_matmul_epilogue"], "one-thread")
    compile_and_compare(module, options=CompileOptions(threads=1))
