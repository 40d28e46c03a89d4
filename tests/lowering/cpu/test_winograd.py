"""loop-tile-matmul computes 3x3 convolutions at stride 1 with constant weights by
Winograd's F(2x2, 3x3) (winograd.py): the results match the reference with epilogues
(bias, relu, a residual), batches, non-square and odd-sized images and channel counts off
the vector width, on 1 and 2 threads at both vector widths; the convolutions it does not
take (stride 2, dilation 2, weights given per call, 5x5, few channels, small layers)
keep the direct GEMM and match too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu import winograd
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.recorded import record_returns
from tests.lowering.cpu.test_matmul_tiling import _plans, _t


def _conv(
    batch: int,
    channels: int,
    out: int,
    size: tuple[int, int],
    kernel: int = 3,
    stride: int = 1,
    dilation: int = 1,
    constant: bool = True,
    residual: bool = False,
) -> str:
    """A convolution (padding keeping the size at stride 1) with a per-channel bias and
    relu, its weights a constant or an argument, optionally a residual added."""
    height, width = size
    pad = dilation * (kernel // 2)
    reach = 2 * pad - dilation * (kernel - 1) - 1
    oh, ow = (height + reach) // stride + 1, (width + reach) // stride + 1
    x, w = _t(batch, channels, height, width), _t(out, channels, kernel, kernel)
    y, b = _t(batch, out, oh, ow), _t(out, 1, 1)
    weights = np.random.default_rng(3).standard_normal((out, channels, kernel, kernel))
    hexed = weights.astype(np.float32).tobytes().hex().upper()
    define = f'  %w = graph.constant dense<"0x{hexed}"> : {w}\n' if constant else ""
    arguments = f"%x: {x}, %b: {b}" + ("" if constant else f", %w: {w}")
    arguments += f", %r: {y}" if residual else ""
    last = "%2"
    tail = ""
    if residual:
        tail, last = f"  %3 = graph.add %2, %r : ({y}, {y}) -> {y}\n", "%3"
    return f"""
func.func @main({arguments}) -> {y} {{
{define}  %0 = graph.conv2d %x, %w strides = [{stride}, {stride}] padding = [{pad}, {pad}, {pad}, {pad}] dilations = [{dilation}, {dilation}] groups = 1 : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  %2 = graph.relu %1 : {y}
{tail}  func.return {last} : {y}
}}
"""


def _taken(monkeypatch: Any) -> list[int]:
    """How many convolutions each kernel loop-tile-matmul lowers from here on took, with
    no threshold of multiply-adds."""
    monkeypatch.setattr(winograd, "MIN_MACS", 0)
    return record_returns(monkeypatch, "winograd_convolutions", winograd.winograd_convolutions)


TAKEN = {
    "1x32x16x8x8": (1, 32, 16, (8, 8), False),
    "2x32x24x6x10 residual": (2, 32, 24, (6, 10), True),
    "1x40x16x14x14": (1, 40, 16, (14, 14), False),
    # Odd sizes: the last tiles' fourth row and column are read clamped.
    "1x32x16x7x7": (1, 32, 16, (7, 7), False),
    "2x32x16x5x9 residual": (2, 32, 16, (5, 9), True),
}


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(TAKEN))
def test_winograd_convolutions_match_the_reference(
    case: str, threads: int, lanes: int, monkeypatch: Any
) -> None:
    counts = _taken(monkeypatch)
    batch, channels, out, size, residual = TAKEN[case]
    text = _conv(batch, channels, out, size, residual=residual)
    options = CompileOptions(threads=threads, lanes=lanes)
    compile_and_compare(parse_text(text, "conv"), options=options)
    assert sum(counts) == 1


LEFT = {
    "stride 2": {"size": (8, 8), "stride": 2},
    "dilation 2": {"size": (8, 8), "dilation": 2},
    "weights per call": {"size": (8, 8), "constant": False},
    "5x5": {"size": (8, 8), "kernel": 5},
}


@pytest.mark.parametrize("case", list(LEFT))
def test_other_convolutions_keep_the_direct_gemm(case: str, monkeypatch: Any) -> None:
    counts = _taken(monkeypatch)
    text = _conv(1, 32, 16, **LEFT[case])  # type: ignore[arg-type]
    compile_and_compare(parse_text(text, "conv"), options=CompileOptions(threads=2, lanes=16))
    assert counts and sum(counts) == 0


def test_few_channels_and_small_layers_keep_the_direct_gemm(monkeypatch: Any) -> None:
    """Input channels below MIN_CHANNELS, output channels below 16 or channels off a
    multiple of 8 are left; so is a layer under MIN_MACS multiply-adds at the real
    threshold."""
    counts = _taken(monkeypatch)
    for channels, out in ((24, 32), (32, 8), (36, 16), (32, 20)):
        text = _conv(1, channels, out, (8, 8))
        lower_to(parse_text(text, "conv"), Stage.UPSTREAM, CompileOptions(threads=2, lanes=16))
    assert counts and sum(counts) == 0
    monkeypatch.setattr(winograd, "MIN_MACS", 1 << 21)
    small = _conv(1, 32, 32, (8, 8))  # 0.6 M multiply-adds
    large = _conv(1, 64, 64, (8, 8))  # 2.4 M
    for text in (small, large):
        lower_to(parse_text(text, "conv"), Stage.UPSTREAM, CompileOptions(threads=2, lanes=16))
    assert counts[-2:] == [0, 1]


def test_the_gemm_packs_the_transformed_weights_once(monkeypatch: Any) -> None:
    """The 16 GEMMs read V in place as A and pack U (computed from the constant weights)
    as a constant B, on the first call only: the plan loop-tile-matmul makes for them
    says so, over 16 batch points of 16 tiles, K = 32 input channels, N = 32 output
    channels, and the upstream IR holds V and M."""
    _taken(monkeypatch)
    plans = _plans(monkeypatch)
    text = _conv(1, 32, 32, (8, 8))
    upstream = lower_to(parse_text(text, "conv"), Stage.UPSTREAM, CompileOptions(threads=1))
    assert "memref<16x16x32xf32>" in upstream  # V and M: 16 x (4 x 4 tiles) x 32
    (plan,) = plans
    assert (plan.points, plan.found.m, plan.found.k, plan.found.n) == (16, 16, 32, 32)
    assert plan.a_in_place is not None and plan.b_constant and plan.b_batched


def test_a_kernel_returning_the_convolution_and_its_relu_matches(monkeypatch: Any) -> None:
    """A convolution whose kernel stores two results (the biased convolution and its
    relu, both returned) keeps both stores in the output nest: they are not moved through
    the transposes (one store only), and both match the reference."""
    counts = _taken(monkeypatch)
    x, w, y, b = _t(1, 32, 8, 8), _t(16, 32, 3, 3), _t(1, 16, 8, 8), _t(16, 1, 1)
    weights = np.random.default_rng(4).standard_normal((16, 32, 3, 3)).astype(np.float32)
    text = f"""
func.func @main(%x: {x}, %b: {b}) -> ({y}, {y}) {{
  %w = graph.constant dense<"0x{weights.tobytes().hex().upper()}"> : {w}
  %0 = graph.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  %2 = graph.relu %1 : {y}
  func.return %1, %2 : {y}, {y}
}}
"""
    compile_and_compare(parse_text(text, "conv"), options=CompileOptions(threads=2, lanes=16))
    assert sum(counts) == 1
