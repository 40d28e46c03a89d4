"""A depthwise convolution at stride s on wide rows reads its padded plane stored in
column phases (lowering/cpu/strided_phases.py): results match the reference interpreter
at strides 2 and 3, odd widths (a remainder nest), dilation, asymmetric padding and a fused
prologue; the phases are taken where they should be and nowhere else."""

from __future__ import annotations

from typing import Any

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu import strided_phases
from graphfuse.parsing import parse_text
from graphfuse.runtime.cpu_tools import runnable_lanes
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.recorded import record_returns

pytestmark = pytest.mark.usefixtures("padded_copy_path")


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _depthwise(
    channels: int,
    height: int,
    width: int,
    kernel: int,
    stride: int,
    pads: tuple[int, int, int, int],
    dilation: int = 1,
    prologue: bool = False,
) -> str:
    """relu6(depthwise(x) + b), pads (top, left, bottom, right); with `prologue` the input
    is relu(x + x2), fused into the kernel's copy."""
    span = dilation * (kernel - 1) + 1
    out_h = (height + pads[0] + pads[2] - span) // stride + 1
    out_w = (width + pads[1] + pads[3] - span) // stride + 1
    x, w = _t(1, channels, height, width), _t(channels, 1, kernel, kernel)
    b, y = _t(1, channels, 1, 1), _t(1, channels, out_h, out_w)
    lines, source = [], "%x"
    if prologue:
        lines += [
            f"  %s = graph.add %x, %x2 : ({x}, {x}) -> {x}",
            f"  %p = graph.relu %s : {x}",
        ]
        source = "%p"
    lines += [
        f"  %0 = graph.conv2d {source}, %w strides = [{stride}, {stride}] "
        f"padding = {list(pads)} dilations = [{dilation}, {dilation}] "
        f"groups = {channels} : ({x}, {w}) -> {y}",
        f"  %1 = graph.add %0, %b : ({y}, {b}) -> {y}",
        "  %z = graph.constant dense<0.0> : tensor<f32>",
        "  %six = graph.constant dense<6.0> : tensor<f32>",
        f"  %2 = graph.max %1, %z : ({y}, tensor<f32>) -> {y}",
        f"  %r = graph.min %2, %six : ({y}, tensor<f32>) -> {y}",
    ]
    extra = f", %x2: {x}" if prologue else ""
    body = "\n".join(lines)
    return f"""
func.func @main(%x: {x}{extra}, %w: {w}, %b: {b}) -> {y} {{
{body}
  func.return %r : {y}
}}
"""


TAKEN = {
    "3x3/2 p1 60x60": (8, 60, 60, 3, 2, (1, 1, 1, 1)),
    "3x3/2 p1 odd 61x59": (8, 61, 59, 3, 2, (1, 1, 1, 1)),
    "3x3/2 'same' p(0,0,1,1) 64x64": (8, 64, 64, 3, 2, (0, 0, 1, 1)),
    "5x5/3 p2 92x92": (8, 92, 92, 5, 3, (2, 2, 2, 2)),
    "3x3/2 dilation 2 p2 62x62": (8, 62, 62, 3, 2, (2, 2, 2, 2), 2),
    "3x3/2 p1 relu(a+b) prologue": (8, 60, 60, 3, 2, (1, 1, 1, 1), 1, True),
}


def _splits(monkeypatch: Any) -> list[int]:
    """The plane buffers stored in phases, per kernel loop-tile-matmul rewrites."""
    return record_returns(monkeypatch, "split_strided_phases", strided_phases.split_strided_phases)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(TAKEN))
def test_strided_depthwise_reads_its_plane_in_phases(
    case: str, threads: int, monkeypatch: Any
) -> None:
    counts = _splits(monkeypatch)
    text = _depthwise(*TAKEN[case])
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=threads))
    assert sum(counts) == 1, counts


def test_the_phases_permute_each_row(monkeypatch: Any) -> None:
    """Stride 3 on a padded width of 97 would need 99 positions (33 per phase): not taken,
    the convolution still right."""
    counts = _splits(monkeypatch)
    text = _depthwise(8, 93, 93, 5, 3, (2, 2, 2, 2))
    lower_to(parse_text(text, "dw"), Stage.UPSTREAM, CompileOptions(threads=1))
    assert counts and sum(counts) == 0
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=1))


@pytest.mark.parametrize(
    "case",
    [
        (8, 60, 60, 3, 1, (1, 1, 1, 1)),  # stride 1: contiguous already
        (8, 8, 8, 3, 2, (1, 1, 1, 1)),  # 4-wide rows: vectorised across channels
    ],
)
def test_unit_strides_and_narrow_rows_are_left_alone(
    case: tuple[Any, ...], monkeypatch: Any
) -> None:
    counts = _splits(monkeypatch)
    text = _depthwise(*case)
    # At 16 lanes, where 4-point rows are narrow enough for the channels-last nest
    # (depthwise.py); at 8 they take the row path, whose plane is read in phases.
    lower_to(parse_text(text, "dw"), Stage.UPSTREAM, CompileOptions(threads=1, lanes=16))
    assert counts and sum(counts) == 0


def test_separable_pools_keep_their_columns(monkeypatch: Any) -> None:
    """A 3x3/2 max pool's scratch columns (separable_pools.py) are written by a pass that
    reduces down the rows; stored in phases it measured slower, so it is left alone."""
    counts = _splits(monkeypatch)
    x, y = _t(1, 8, 60, 60), _t(1, 8, 30, 30)
    text = f"""
func.func @main(%x: {x}) -> {y} {{
  %r = graph.relu %x : {x}
  %p = graph.max_pool2d %r kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : {x} -> {y}
  func.return %p : {y}
}}
"""
    compile_and_compare(parse_text(text, "pool"), options=CompileOptions(threads=2))
    assert counts and sum(counts) == 0


def _heads_product(batch: int, rows: int, heads: int, depth: int, columns: int) -> str:
    """Attention's first product with the query split into heads: q [B, S, H x D] reshaped
    to [B, S, H, D] and transposed to [B, H, S, D] times k^T [B, H, D, N]. In one kernel
    the query is read at column D h + k, a stride of D, beside a copy of k^T."""
    q, heads_q = _t(batch, rows, heads * depth), _t(batch, rows, heads, depth)
    split, kt = _t(batch, heads, rows, depth), _t(batch, heads, depth, columns)
    y = _t(batch, heads, rows, columns)
    return f"""
func.func @main(%q: {q}, %kt: {kt}) -> {y} {{
  %0 = graph.reshape %q : {q} -> {heads_q}
  %1 = graph.transpose %0 perm = [0, 2, 1, 3] : {heads_q} -> {split}
  %2 = graph.matmul %1, %kt : ({split}, {kt}) -> {y}
  func.return %2 : {y}
}}
"""


@pytest.mark.parametrize("lanes", runnable_lanes())
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(2, 4, 9, 8, 6), (1, 4, 3, 8, 6), (2, 16, 4, 32, 16)])
def test_inputs_read_at_a_stride_keep_their_layout(
    shape: tuple[int, int, int, int, int], threads: int, lanes: int, monkeypatch: Any
) -> None:
    """A kernel input read at a stride inside a plane nest (the query of grouped-query
    attention split into heads) is never stored in phases: the caller wrote it, so its
    columns must be read where they are. Results match the reference at every width."""
    counts = _splits(monkeypatch)
    options = CompileOptions(threads=threads, lanes=lanes)
    compile_and_compare(parse_text(_heads_product(*shape), "heads"), options=options)
    assert counts and sum(counts) == 0
