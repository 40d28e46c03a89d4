"""convert-graph-to-loop copies a strided, unpadded 1x1 convolution's input as the points
it reads, NCHW (operand_layouts' nchw_subsampled), so loop-tile-matmul computes it as a
1x1 convolution at stride 1 (its columns contiguous rows of the copy), not from an NHWC
copy of the whole input. Results match the reference for square and uneven strides, odd
sizes, batches, a residual and weights given per call or constant, on 1 and 2 threads; a
padded 1x1 convolution at stride 2 keeps the NHWC copy."""

from __future__ import annotations

import numpy as np
import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.test_matmul_tiling import _t


def _downsample(
    batch: int,
    channels: int,
    out: int,
    size: tuple[int, int],
    strides: tuple[int, int],
    padding: int = 0,
    constant: bool = False,
) -> tuple[str, tuple[int, ...]]:
    """A 1x1 convolution with a bias, plus a residual of its output's shape, relu; and
    the output's shape."""
    height, width = size
    oh = (height + 2 * padding - 1) // strides[0] + 1
    ow = (width + 2 * padding - 1) // strides[1] + 1
    x, w = _t(batch, channels, height, width), _t(out, channels, 1, 1)
    y, b = _t(batch, out, oh, ow), _t(out, 1, 1)
    weights = np.random.default_rng(7).standard_normal((out, channels, 1, 1))
    hexed = weights.astype(np.float32).tobytes().hex().upper()
    define = f'  %w = graph.constant dense<"0x{hexed}"> : {w}\n' if constant else ""
    arguments = f"%x: {x}, %b: {b}, %r: {y}" + ("" if constant else f", %w: {w}")
    pad = ", ".join([str(padding)] * 4)
    text = f"""
func.func @main({arguments}) -> {y} {{
{define}  %0 = graph.conv2d %x, %w strides = [{strides[0]}, {strides[1]}] padding = [{pad}] dilations = [1, 1] groups = 1 : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  %2 = graph.add %1, %r : ({y}, {y}) -> {y}
  %3 = graph.relu %2 : {y}
  func.return %3 : {y}
}}
"""
    return text, (batch, channels, oh, ow)


CASES = {
    "56x56 at 2": (1, 64, 128, (56, 56), (2, 2), False),
    "odd 15x13 at 2, batch 2": (2, 32, 48, (15, 13), (2, 2), True),
    "uneven strides 2 and 3": (1, 40, 64, (24, 30), (2, 3), False),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_strided_pointwise_convolutions_read_a_subsampled_copy(case: str, threads: int) -> None:
    batch, channels, out, size, strides, constant = CASES[case]
    text, copied = _downsample(batch, channels, out, size, strides, constant=constant)
    options = CompileOptions(threads=threads, lanes=16)
    loops = lower_to(parse_text(text, "conv"), Stage.LOOP, options)
    assert f"memref<{'x'.join(map(str, copied))}xf32>" in loops
    nhwc = f"memref<{batch}x{size[0]}x{size[1]}x{channels}xf32>"
    assert nhwc not in loops
    compile_and_compare(parse_text(text, "conv"), options=options)


def test_a_padded_strided_pointwise_convolution_keeps_the_nhwc_copy() -> None:
    text, _ = _downsample(1, 32, 32, (16, 16), (2, 2), padding=1)
    options = CompileOptions(threads=2, lanes=16)
    loops = lower_to(parse_text(text, "conv"), Stage.LOOP, options)
    assert "memref<1x18x18x32xf32>" in loops
    compile_and_compare(parse_text(text, "conv"), options=options)
