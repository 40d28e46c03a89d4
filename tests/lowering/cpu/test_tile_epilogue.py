"""The tiled matmul's vectorized epilogue (lowering/cpu/gemm/tile_epilogue.py) with a
row-uniform select: a residual rolled along a row axis (Swin's torch.roll as Slice, Slice,
Concat) picks its source per row, so the select's i1 condition stays a scalar beside
vector operands; the result matches the reference."""

from __future__ import annotations

import re

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare

_X = "tensor<4x16x32xf32>"
_ROLLED_RESIDUAL = f"""
func.func @main(%x: {_X}, %w: tensor<32x32xf32>, %r: {_X}) -> {_X} {{
  %y = graph.matmul %x, %w : ({_X}, tensor<32x32xf32>) -> {_X}
  %a = graph.slice %r starts = [0, 13, 0] strides = [1, 1, 1] : {_X} -> tensor<4x3x32xf32>
  %b = graph.slice %r starts = [0, 0, 0] strides = [1, 1, 1] : {_X} -> tensor<4x13x32xf32>
  %rolled = graph.concat %a, %b axis = 1 : (tensor<4x3x32xf32>, tensor<4x13x32xf32>) -> {_X}
  %z = graph.add %y, %rolled : ({_X}, {_X}) -> {_X}
  func.return %z : {_X}
}}
"""


@pytest.mark.parametrize("lanes", [8, 16])
def test_row_uniform_select_keeps_a_scalar_condition(lanes: int) -> None:
    options = CompileOptions(threads=1, lanes=lanes)
    upstream = lower_to(parse_text(_ROLLED_RESIDUAL, "roll"), Stage.UPSTREAM, options)
    assert "vector.fma" in upstream, "the matmul was not tiled"
    vector_selects = re.findall(rf"arith\.select [^\n]*: vector<{lanes}xf32>", upstream)
    assert vector_selects, "the epilogue was not vectorized"
    assert f"vector<{lanes}xi1>" not in upstream
    compile_and_compare(parse_text(_ROLLED_RESIDUAL, "roll"), options=options)
