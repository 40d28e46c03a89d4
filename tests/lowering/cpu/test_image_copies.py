"""A depthwise convolution on wide rows reads its padded copy plane by
plane (lowering/cpu/image_copies.py): the fill, the interior copy and the reader become one
nest over the (image, channel) planes; results match the reference interpreter."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions
from graphfuse.dialects import loop
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.test_depthwise import _conv, _tiled

pytestmark = pytest.mark.usefixtures("padded_copy_path")


WIDE = [
    (1, 16, 20, 3, 1, 1, "relu6"),  # batch 1: the batch index is a constant 0
    (2, 16, 18, 3, 1, 1, "residual"),  # batch 2, the input read again by the epilogue
    (2, 16, 20, 5, 1, 2, "silu"),  # 5x5 on wide rows
    (1, 16, 30, 3, 1, -1, "relu6"),  # padding at the end only
]


def _planes(kernel: loop.KernelOp) -> list[loop.ParallelOp]:
    return [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", WIDE, ids=[str(c) for c in WIDE])
def test_wide_depthwise_runs_plane_by_plane(
    case: tuple[int, int, int, int, int, int, str], threads: int
) -> None:
    """One top-level nest over [N, C, 1] holding the border fills, the interior copy and
    the convolution (nests over a plane, in that order); same results."""
    text = _conv(*case)
    kernel = _tiled(text)
    nests = _planes(kernel)
    assert len(nests) == 1 and nests[0].shape == (case[0], case[1], 1)
    inner = [op for op in nests[0].body.block.ops if isinstance(op, loop.ParallelOp)]
    padded_sides = 4 if case[5] > 0 else 2  # (top, bottom, left, right) or (bottom, right)
    assert len(inner) == padded_sides + 2
    assert [any(isinstance(op, loop.ReduceOp) for op in n.walk()) for n in inner] == [False] * (
        padded_sides + 1
    ) + [True]
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=threads))


def test_narrow_rows_keep_the_channels_last_path() -> None:
    """4-wide rows at 16 lanes are vectorised across channels (depthwise.py) instead."""
    nests = _planes(_tiled(_conv(2, 24, 4, 3, 1, 1, "relu6")))
    assert nests[-1].shape == (2, 4, 4, 24)


def test_one_dimensional_nests_reading_scratch_are_left_alone() -> None:
    """A softmax over a vector: 1-D nests write and read the kernel's scratch (the row's
    maximum and sum); no plane to fuse over, and the pass takes nothing (it once indexed
    a second dimension such nests do not have)."""
    v, s = "tensor<1000xf32>", "tensor<f32>"
    text = f"""
func.func @main(%x: {v}) -> {v} {{
  %m = graph.reduce_max %x axes = [0] : {v} -> {s}
  %d = graph.sub %x, %m : ({v}, {s}) -> {v}
  %e = graph.exp %d : {v}
  %t = graph.reduce_sum %e axes = [0] : {v} -> {s}
  %y = graph.div %e, %t : ({v}, {s}) -> {v}
  func.return %y : {v}
}}
"""
    compile_and_compare(parse_text(text, "softmax"))
