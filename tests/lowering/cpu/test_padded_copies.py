"""Zero-padded operand copies (a depthwise convolution's row-padded NCHW copy, a tiled
convolution's NHWC one) become a fill and an interior copy without the clamped indices
(min/max) and selects of padding; results match the reference."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _conv(batch: int, channels: int, size: int, stride: int, pad: int, groups: int) -> str:
    """pad < 0: -pad at the bottom and right only (TF's 'same' padding at stride 2)."""
    pads = [pad] * 4 if pad >= 0 else [0, 0, -pad, -pad]
    out = (size + sum(pads[::2]) - 3) // stride + 1
    x, w = _t(batch, channels, size, size), _t(channels, channels // groups, 3, 3)
    y = _t(batch, channels, out, out)
    return f"""
func.func @main(%x: {x}, %w: {w}) -> {y} {{
  %0 = graph.conv2d %x, %w strides = [{stride}, {stride}] padding = {pads} groups = {groups} : ({x}, {w}) -> {y}
  %1 = graph.relu %0 : {y}
  func.return %1 : {y}
}}
"""


CASES = [
    (1, 16, 20, 1, 1, 16),  # depthwise, row-padded NCHW copy
    (2, 8, 15, 2, 2, 8),  # depthwise, stride 2, padding 2, odd size
    (1, 8, 16, 2, -1, 8),  # depthwise, stride 2, padding at the end only
    (1, 16, 12, 1, 1, 1),  # tiled convolution, NHWC copy
    (2, 8, 9, 2, 1, 1),  # tiled convolution, stride 2
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_padded_copies_lose_their_selects(
    case: tuple[int, int, int, int, int, int], threads: int
) -> None:
    text = _conv(*case)
    options = CompileOptions(threads=threads)
    upstream = lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    assert "arith.minsi" not in upstream and "arith.maxsi" not in upstream
    compile_and_compare(parse_text(text, "conv"), options=options)
