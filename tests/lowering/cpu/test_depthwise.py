"""Depthwise convolutions on narrow rows are vectorised across channels (lowering/cpu/
depthwise.py): channels-last copies of the input and weights, the taps unrolled, the fused
epilogue kept; results match the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import graphfuse
from graphfuse import pipelines
from graphfuse.compiler import CompileOptions, Stage, lower
from graphfuse.dialects import loop
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.dialects.loop import abi
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare

pytestmark = pytest.mark.usefixtures("padded_copy_path")


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _conv(
    batch: int, channels: int, size: int, kernel: int, stride: int, pad: int, epilogue: str
) -> str:
    """A square image; pad < 0: -pad at the bottom and right only (TF's 'same' padding at
    stride 2)."""
    pads = (pad,) * 4 if pad >= 0 else (0, 0, -pad, -pad)
    return depthwise_conv(batch, channels, (size, size), kernel, stride, pads, epilogue)


def depthwise_conv(
    batch: int,
    channels: int,
    size: tuple[int, int],
    kernel: int,
    stride: int,
    pads: tuple[int, int, int, int],
    epilogue: str,
) -> str:
    """A depthwise convolution (pads: top, left, bottom, right) with a per-channel bias
    and an epilogue: 'relu6' (min(max(x, 0), 6)), 'silu' (x * sigmoid(x)) or 'residual'
    (+ the input, GELU; needs the output's shape to be the input's)."""
    height, width = size
    oh = (height + pads[0] + pads[2] - kernel) // stride + 1
    ow = (width + pads[1] + pads[3] - kernel) // stride + 1
    x, w = _t(batch, channels, height, width), _t(channels, 1, kernel, kernel)
    b, y = _t(1, channels, 1, 1), _t(batch, channels, oh, ow)
    lines = [
        f"  %0 = graph.conv2d %x, %w strides = [{stride}, {stride}] padding = {list(pads)} "
        f"groups = {channels} : ({x}, {w}) -> {y}",
        f"  %1 = graph.add %0, %b : ({y}, {b}) -> {y}",
    ]
    if epilogue == "relu6":
        lines += [
            "  %z = graph.constant dense<0.0> : tensor<f32>",
            "  %s = graph.constant dense<6.0> : tensor<f32>",
            f"  %2 = graph.max %1, %z : ({y}, tensor<f32>) -> {y}",
            f"  %r = graph.min %2, %s : ({y}, tensor<f32>) -> {y}",
        ]
    elif epilogue == "silu":
        lines += [
            f"  %2 = graph.sigmoid %1 : {y}",
            f"  %r = graph.mul %1, %2 : ({y}, {y}) -> {y}",
        ]
    else:
        lines += [
            f"  %2 = graph.add %1, %x : ({y}, {x}) -> {y}",
            f"  %r = graph.gelu %2 : {y}",
        ]
    body = "\n".join(lines)
    return f"""
func.func @main(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
{body}
  func.return %r : {y}
}}
"""


CASES = [
    (2, 24, 7, 7, 1, 3, "residual"),  # ConvNeXt's late stage: 7x7, padding 3
    (2, 16, 8, 7, 1, 3, "silu"),  # ConvNeXt tiny
    (2, 40, 4, 3, 1, 1, "relu6"),  # 4-wide rows: a quarter of a vector
    (2, 24, 8, 3, 2, 1, "relu6"),  # stride 2, symmetric padding: 4-wide output
    (2, 40, 8, 3, 2, -1, "relu6"),  # stride 2, padding at the end only
    (2, 24, 6, 3, 1, 0, "silu"),  # no padding: the input itself is copied
    (2, 24, 10, 7, 2, 3, "silu"),  # 7x7 at stride 2
    (2, 24, 8, 5, 2, 2, "relu6"),  # 5x5 at stride 2 on 4-wide output rows
    (1, 16, 20, 7, 1, 3, "residual"),  # 7x7 on rows wider than a vector, batch 1
]
"""Convolutions the channels-last nest takes (with 16 lanes)."""

ROW_CASES = [
    (2, 40, 7, 3, 1, 1, "relu6"),  # MobileNetV2's 7x7 stage
    (2, 24, 14, 3, 2, 1, "relu6"),  # stride 2 to 7-wide rows
    (2, 24, 28, 5, 2, 2, "relu6"),  # 5x5 at stride 2 on 14-wide output rows
    (1, 16, 5, 3, 1, 1, "silu"),  # 5-wide rows, just past a quarter of a vector
]
"""Narrow rows that keep the row path: masked vectors along the rows."""


def _tiled(text: str, lanes: int = 16) -> loop.KernelOp:
    """The convolution's kernel after loop-tile-matmul (which runs this module's rewrite)."""
    module = parse_text(text, "dw")
    lower(module, Stage.LOOP, CompileOptions())
    pipelines.run(pipelines.spec("loop-tile-matmul", lanes=lanes), module)
    kernels = [
        k for k in module.walk() if isinstance(k, loop.KernelOp) and "conv" in k.sym_name.data
    ]
    assert len(kernels) == 1
    return kernels[0]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES + ROW_CASES, ids=[str(c) for c in CASES + ROW_CASES])
def test_depthwise_matches_reference(
    case: tuple[int, int, int, int, int, int, str], threads: int
) -> None:
    text = _conv(*case)
    kernel = _tiled(text)
    assert any(isinstance(op, loop.ReduceOp) for op in kernel.walk()) == (case in ROW_CASES)
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=threads))


def test_channels_innermost() -> None:
    """The depthwise nest runs over [N, Ho, Wo, C] with the 9 taps unrolled (two loads
    each) and reads the channels-last copies; the padded NCHW copy is not written."""
    kernel = _tiled(_conv(2, 24, 4, 3, 1, 1, "relu6"))
    nests = [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]
    assert nests[-1].shape == (2, 4, 4, 24)
    loads = [op for op in nests[-1].walk() if isinstance(op, loop.LoadOp)]
    image = [op for op in loads if op.buffer.type.get_shape() == (2, 6, 6, 24)]
    weight = [op for op in loads if op.buffer.type.get_shape() == (1, 3, 3, 24)]
    assert len(image) == 9 and len(weight) == 9
    # the padded copy's border fills (top and bottom rows, left and right columns) and its
    # interior copy (8x8 transposes along each 4x4 plane) write the channels-last copy
    stores = [op.buffer.type.get_shape() for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    assert (2, 24, 6, 6) not in stores and stores.count((2, 6, 6, 24)) == 4
    assert any(op.name == "vector.store" and "2x6x6x24" in str(op) for op in kernel.walk())


@pytest.mark.parametrize("lanes", [8, 16])
def test_rows_past_a_quarter_of_a_vector_untouched(lanes: int) -> None:
    """3x3 and 5x5 rows wider than a quarter of a vector stay vectorised along the row
    (the reduction is kept), at any stride; 7x7 convolutions are taken at any width."""
    quarter = _tiled(_conv(1, 16, 4, 3, 1, 1, "relu6"), lanes)
    assert any(isinstance(op, loop.ReduceOp) for op in quarter.walk()) == (lanes == 8)
    narrow = _tiled(_conv(1, 16, 7, 3, 1, 1, "relu6"), lanes)
    assert any(isinstance(op, loop.ReduceOp) for op in narrow.walk())
    five = _tiled(_conv(1, 16, 20, 5, 1, 2, "relu6"), lanes)
    assert any(isinstance(op, loop.ReduceOp) for op in five.walk())
    wide = _tiled(_conv(1, 16, 20, 7, 1, 3, "relu6"), lanes)
    assert not any(isinstance(op, loop.ReduceOp) for op in wide.walk())
    strided = _tiled(_conv(1, 16, 28, 3, 2, 1, "relu6"), lanes)  # 14-wide rows, stride 2
    assert any(isinstance(op, loop.ReduceOp) for op in strided.walk())
    # 28-wide rows at stride 2 keep the row path, on a plane stored in column phases
    phased = _tiled(_conv(1, 16, 56, 3, 2, 1, "relu6"), lanes)
    assert any(isinstance(op, loop.ReduceOp) for op in phased.walk())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "case",
    [(2, 24, 4, 3, 1, 1, "relu6"), (1, 16, 20, 7, 1, 3, "silu"), (2, 40, 8, 3, 2, 1, "relu6")],
    ids=["4x4 points, batch 2", "20x20 7x7 taps", "stride 2 to 4x4"],
)
def test_channels_last_results_reach_nchw_through_transposes(
    case: tuple[int, int, int, int, int, int, str], threads: int
) -> None:
    """The channel-vectorised nest stores channels-last into scratch; one loop moves 8x8
    blocks to the NCHW output (24 shuffles, vector stores into the output viewed as
    [N, C, Ho x Wo]; the last block of 49 points overlaps the one before; 24 more for the
    input's copy, transposed_copies.py); same results."""
    text = _conv(*case)
    kernel = _tiled(text)
    batch, channels = case[0], case[1]
    out = (case[2] + 2 * case[5] - case[3]) // case[4] + 1
    stores = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    assert (batch, channels, out, out) not in [op.buffer.type.get_shape() for op in stores]
    assert (batch, out, out, channels) in [op.buffer.type.get_shape() for op in stores]
    shuffles = [op for op in kernel.walk() if op.name == "vector.shuffle"]
    # the stores' transposes, and the input copy's where its planes hold 8 points or more
    copied = channels % 8 == 0 and case[2] * case[2] >= 8
    assert len(shuffles) == 24 * (1 + copied)
    view = f"memref<{batch}x{channels}x{out * out}xf32>"
    assert any(op.name == "vector.store" and view in str(op) for op in kernel.walk())
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=threads))


def test_constant_weights_are_reordered_on_the_first_call_only() -> None:
    """Weights that are a constant of the model are copied channels-last once, into a
    buffer the kernel keeps (graphfuse.persistent); later calls, whose other scratch
    shares bytes (loop-plan-scratch), still match the reference."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((24, 1, 3, 3)).round(3)
    text = _conv(1, 24, 4, 3, 1, 1, "relu6")
    text = text.replace(", %w: tensor<24x1x3x3xf32>", "")
    text = text.replace(
        "{\n  %0 = graph.conv2d",
        "{\n  %w = graph.constant dense<"
        + str(weights.tolist())
        + "> : tensor<24x1x3x3xf32>\n  %0 = graph.conv2d",
    )
    module = parse_text(text, "dw")
    kernel = _tiled(text)
    assert abi.PERSISTENT in kernel.attributes
    assert any(op.name == "scf.if" for op in kernel.walk())
    compiled = graphfuse.compile(module, options=CompileOptions(threads=2))
    function = reference.find_function(module, "main")
    for seed in range(3):
        arrays = reference.random_inputs(function, seed)
        expected = reference.run(module, "main", *arrays)[0]
        np.testing.assert_allclose(compiled(*arrays), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_many_channels_are_computed_a_block_at_a_time(threads: int) -> None:
    """512 channels of 3x3 taps on 4-wide rows: a block of channels whose input rows and
    weights fit most of L1 (128 here) is finished over the image before the next; same
    results."""
    text = _conv(1, 512, 4, 3, 1, 1, "relu6")
    nests = [n for n in _tiled(text).body.block.ops if isinstance(n, loop.ParallelOp)]
    assert any(n.shape == (1, 4, 4, 4, 128) for n in nests)
    few = [n for n in _tiled(_conv(1, 64, 4, 3, 1, 1, "relu6")).body.block.ops]
    assert any(isinstance(n, loop.ParallelOp) and n.shape == (1, 4, 4, 64) for n in few)
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=threads))
