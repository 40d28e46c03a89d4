"""loop-tile-matmul on a kernel whose nest holds two contractions (a ResNet downsampling
block fused: relu(conv3x3(x) + conv1x1/2(y))): each contraction big enough to tile gets a
nest of its own and is tiled; the results match the reference."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _downsampling_block(batch: int, cin: int, cout: int, size: int) -> str:
    """relu(conv3x3(a) + b1 + conv1x1 stride 2(x) + b2), a at half x's size."""
    half = size // 2
    x, a = _t(batch, cin, size, size), _t(batch, cout, half, half)
    w3, w1 = _t(cout, cout, 3, 3), _t(cout, cin, 1, 1)
    y, v = _t(batch, cout, half, half), _t(cout, 1, 1)
    return f"""
func.func @main(%a: {a}, %w3: {w3}, %b1: {v}, %x: {x}, %w1: {w1}, %b2: {v}) -> {y} {{
  %0 = graph.conv2d %a, %w3 padding = [1, 1, 1, 1] : ({a}, {w3}) -> {y}
  %1 = graph.add %0, %b1 : ({y}, {v}) -> {y}
  %2 = graph.conv2d %x, %w1 strides = [2, 2] : ({x}, {w1}) -> {y}
  %3 = graph.add %2, %b2 : ({y}, {v}) -> {y}
  %4 = graph.add %1, %3 : ({y}, {y}) -> {y}
  %5 = graph.relu %4 : {y}
  func.return %5 : {y}
}}
"""


def _tiled_contractions(upstream: str, lanes: int) -> int:
    """Full 6-row tiles: 12 multiply-adds each, one tile loop per contraction."""
    return upstream.count(f"-> ({', '.join([f'vector<{lanes}xf32>'] * 12)})")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("shape", "tiled"),
    [
        ((2, 8, 32, 16), 1),  # the 1x1 convolution (K = 8) stays a dot product
        ((1, 64, 24, 28), 2),  # both tiled
    ],
)
def test_two_contractions_in_one_nest_are_tiled_apart(
    shape: tuple[int, int, int, int], tiled: int, threads: int
) -> None:
    text = _downsampling_block(*shape)
    options = CompileOptions(threads=threads, lanes=16)
    fused = lower_to(parse_text(text, "block"), Stage.GRAPH, options)
    assert fused.count("graph.fused") == 1, "the block is no longer one kernel"
    upstream = lower_to(parse_text(text, "block"), Stage.UPSTREAM, options)
    assert _tiled_contractions(upstream, 16) == tiled
    compile_and_compare(parse_text(text, "block"), options=options)
