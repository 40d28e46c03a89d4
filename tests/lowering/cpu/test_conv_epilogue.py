"""The tiled convolution's epilogue `lanes` columns at a time over whole output images
(lowering/cpu/gemm/tile_epilogue.py): an NCHW image is one run of H*W floats, so a group
of columns may cross output rows; a last panel past N runs its whole groups as vectors and
the rest point by point. Results match the reference at 8 and 16 lanes."""

from __future__ import annotations

import re

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _conv_bias_residual_relu6(batch: int, channels: int, out: int, size: int, k: int) -> str:
    """conv (k x k, same padding) + bias, + residual, relu6."""
    pad = k // 2
    x, w = _t(batch, channels, size, size), _t(out, channels, k, k)
    y, b = _t(batch, out, size, size), _t(out, 1, 1)
    return f"""
func.func @main(%x: {x}, %w: {w}, %b: {b}, %r: {y}) -> {y} {{
  %0 = graph.conv2d %x, %w padding = [{pad}, {pad}, {pad}, {pad}] : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  %2 = graph.add %1, %r : ({y}, {y}) -> {y}
  %3 = graph.relu %2 : {y}
  %six = graph.constant dense<6.0> : tensor<f32>
  %4 = graph.min %3, %six : ({y}, tensor<f32>) -> {y}
  func.return %4 : {y}
}}
"""


CASES = [
    (1, 16, 24, 14, 1),  # 1x1, N = 196: the last panel holds 4 columns (16 lanes)
    (1, 16, 24, 7, 3),  # 3x3, N = 49: one whole group of 16 and one column
    (1, 8, 13, 12, 3),  # N = 144, 13 rows (a tail tile of 1 row)
    (2, 32, 16, 16, 1),  # 2 images of 256 points: groups never cross images
    (2, 8, 16, 6, 3),  # 2 images of 36 points: point by point
]


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_conv_epilogue_matches_reference(case: tuple[int, int, int, int, int], lanes: int) -> None:
    text = _conv_bias_residual_relu6(*case)
    batch, _, out, size, _ = case
    options = CompileOptions(threads=2, lanes=lanes)
    upstream = lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    assert "vector.fma" in upstream
    image = size * size
    vectorised = image % lanes == 0 or batch == 1
    view = f"memref<{batch}x{out}x{image}xf32>, vector<{lanes}xf32>"
    assert (re.search(rf"vector\.store [^\n]*: {view}", upstream) is not None) == vectorised
    compile_and_compare(parse_text(text, "conv"), options=options)
