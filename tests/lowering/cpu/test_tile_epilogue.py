"""The tiled matmul's vectorized epilogue (lowering/cpu/gemm/tile_epilogue.py) with a
row-uniform select: a residual rolled along a row axis (Swin's torch.roll as Slice, Slice,
Concat) picks its source per row, so the select's i1 condition stays a scalar beside
vector operands; the result matches the reference."""

from __future__ import annotations

import re

import numpy as np
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


_S = "tensor<2x64x48xf32>"
_MASKED_SCORES = f"""
func.func @main(%x: tensor<2x64x32xf32>, %w: tensor<32x48xf32>, %keys: tensor<2x1x48xi64>,
                %rows: tensor<64x1xi1>, %drop: tensor<1x1x48xi1>)
                -> ({_S}, tensor<2x64x48xi1>) {{
  %no = graph.constant dense<false> : tensor<i1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %lowest = graph.constant dense<-3.0e+38> : tensor<f32>
  %y = graph.matmul %x, %w : (tensor<2x64x32xf32>, tensor<32x48xf32>) -> {_S}
  %k = graph.cast %keys : tensor<2x1x48xi64> -> tensor<2x1x48xi1>
  %both = graph.select %rows, %k, %no : (tensor<64x1xi1>, tensor<2x1x48xi1>, tensor<i1>) -> tensor<2x64x48xi1>
  %kept = graph.select %drop, %no, %both : (tensor<1x1x48xi1>, tensor<i1>, tensor<2x64x48xi1>) -> tensor<2x64x48xi1>
  %bias = graph.select %kept, %zero, %lowest : (tensor<2x64x48xi1>, tensor<f32>, tensor<f32>) -> {_S}
  %masked = graph.add %y, %bias : ({_S}, {_S}) -> {_S}
  %positive = graph.compare gt, %masked, %zero : ({_S}, tensor<f32>) -> tensor<2x64x48xi1>
  func.return %masked, %positive : {_S}, tensor<2x64x48xi1>
}}
"""


@pytest.mark.parametrize("lanes", [8, 16])
def test_a_mask_along_the_columns_runs_in_vectors(lanes: int) -> None:
    """An attention mask that varies per key (per column) used to send the whole epilogue
    to the scalar path: its i1 values are vector<lanes x i1> now, loaded from bytes, and
    a boolean result is stored as bytes; the results match the reference."""
    options = CompileOptions(threads=1, lanes=lanes)
    upstream = lower_to(parse_text(_MASKED_SCORES, "mask"), Stage.UPSTREAM, options)
    assert "vector.fma" in upstream, "the matmul was not tiled"
    mask_selects = re.findall(
        rf"arith\.select [^\n]*: vector<{lanes}xi1>, vector<{lanes}xf32>", upstream
    )
    assert mask_selects, "the mask's select did not run in vectors"
    assert re.search(rf"vector\.load [^\n]*memref<[^>]*xi8>, vector<{lanes}xi8>", upstream)
    assert re.search(rf"vector\.store [^\n]*memref<[^>]*xi8>, vector<{lanes}xi8>", upstream)
    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal((2, 64, 32)).astype(np.float32),
        rng.standard_normal((32, 48)).astype(np.float32),
        rng.integers(0, 2, (2, 1, 48)).astype(np.int64),
        rng.integers(0, 2, (64, 1)).astype(np.bool_),
        rng.integers(0, 2, (1, 1, 48)).astype(np.bool_),
    ]
    compile_and_compare(parse_text(_MASKED_SCORES, "mask"), options=options, inputs=inputs)
