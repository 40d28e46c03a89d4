"""loop-tile-matmul: a last panel whose columns below N fit one vector register is
computed by tiles one vector wide (half the multiply-adds of a full-width tile), and up to
4 columns past its last full vector by dot products along K; the other panels by
full-width tiles. Results match the reference for N = 1, 17, 33, 44, 49, 196 columns, K a
multiple of the vector width or not, matmuls (A in place, batched with B per batch) and
convolutions at 7x7 and 14x14, epilogues vector or point by point, 1 and 2 threads, at
AVX2's and AVX-512's widths."""

from __future__ import annotations

import re
from typing import Any

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu.gemm import operand_packing
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _matmul(m: int, k: int, n: int) -> str:
    a, b, c, bias = _t(m, k), _t(k, n), _t(m, n), _t(n)
    return f"""
func.func @main(%a: {a}, %b: {b}, %bias: {bias}) -> {c} {{
  %0 = graph.matmul %a, %b : ({a}, {b}) -> {c}
  %1 = graph.add %0, %bias : ({c}, {bias}) -> {c}
  %2 = graph.relu %1 : {c}
  func.return %2 : {c}
}}
"""


def _conv(channels: int, out: int, size: int, k: int, residual: bool) -> str:
    """A batch-1 convolution with a per-channel bias, relu and optionally a residual."""
    x, w = _t(1, channels, size, size), _t(out, channels, k, k)
    y, v = _t(1, out, size, size), _t(out, 1, 1)
    p = k // 2
    tail = f"  %3 = graph.add %2, %r : ({y}, {y}) -> {y}\n  func.return %3 : {y}"
    if not residual:
        tail = f"  func.return %2 : {y}"
    r = f", %r: {y}" if residual else ""
    return f"""
func.func @main(%x: {x}, %w: {w}, %b: {v}{r}) -> {y} {{
  %0 = graph.conv2d %x, %w strides = [1, 1] padding = [{p}, {p}, {p}, {p}] dilations = [1, 1] groups = 1 : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {v}) -> {y}
  %2 = graph.relu %1 : {y}
{tail}
}}
"""


def _fma_widths(upstream: str) -> set[str]:
    return set(re.findall(r"vector\.fma .*: (vector<\d+xf32>)", upstream))


def _vector_loops(upstream: str) -> list[int]:
    """The vector accumulators each loop carries (the tiles' and dot products' k loops)."""
    return sorted(
        line.count("vector<")
        for line in upstream.splitlines()
        if "scf.for" in line and "iter_args" in line and "vector<" in line
    )


MATMULS = [
    (20, 64, 1),
    (20, 64, 17),
    (13, 40, 33),
    (25, 48, 49),
    (20, 67, 49),  # K mod 16 = 3: products one by one after the vectors
    (14, 30, 196),
    (19, 32, 44),
]


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", MATMULS, ids=[f"{m}x{k}x{n}" for m, k, n in MATMULS])
def test_matmul_with_narrow_last_panel_matches_reference(
    shape: tuple[int, int, int], threads: int, lanes: int
) -> None:
    text = _matmul(*shape)
    options = CompileOptions(threads=threads, lanes=lanes)
    # N = 1 indexes its unit dimension with a constant and stays a dot product.
    tiled = "vector.fma" in lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    assert tiled == (shape[2] > 1)
    compile_and_compare(parse_text(text, "mm"), options=options)


CONVS = [
    (16, 20, 7, 3, True),  # N = 49: at lanes 8, 3 panels of 16 and one of 1 column
    (16, 13, 7, 1, False),  # 1x1 at 7x7
    (8, 14, 14, 3, True),  # N = 196: 4 columns past the full panels at lanes 16
    (16, 7, 14, 1, False),  # 1x1 at 14x14, one row tail only
]


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("conv", CONVS, ids=[str(c) for c in CONVS])
def test_convolution_with_narrow_last_panel_matches_reference(
    conv: tuple[int, int, int, int, bool], threads: int, lanes: int
) -> None:
    text = _conv(*conv)
    options = CompileOptions(threads=threads, lanes=lanes)
    assert "vector.fma" in lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    compile_and_compare(parse_text(text, "conv"), options=options)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [49, 196])
def test_batched_matmul_with_dot_columns_matches_reference(n: int, threads: int) -> None:
    """B per batch point, packed by the tasks (one row block): each task's own dot panel."""
    a, b, c = _t(3, 8, 40), _t(3, 40, n), _t(3, 8, n)
    text = f"""
func.func @main(%a: {a}, %b: {b}) -> {c} {{
  %0 = graph.matmul %a, %b : ({a}, {b}) -> {c}
  func.return %0 : {c}
}}
"""
    for lanes in (8, 16):
        options = CompileOptions(threads=threads, lanes=lanes)
        assert "vector.reduction" in lower_to(parse_text(text, "bmm"), Stage.UPSTREAM, options)
        compile_and_compare(parse_text(text, "bmm"), options=options)


@pytest.mark.parametrize(
    ("n", "lanes", "loops"),
    [
        (196, 16, [12, 24]),  # 6 x 32 + 4: full tiles, then 4 dot columns x 6 rows
        (196, 8, [12, 24]),  # 12 x 16 + 4
        (49, 8, [6, 12]),  # 3 x 16 + 1: full tiles, then 1 dot column
        # 32 + 16 + 1: the 4 row tiles in pairs, each pair two full tiles, one tile of 12
        # rows one vector wide and 12 rows of dot products.
        (49, 16, [12, 12, 12, 12]),
        (44, 16, [12, 12, 12]),  # 32 + 12: a one-vector tile of 12 rows, no dot columns
        (64, 16, [12]),  # full panels only
    ],
)
def test_last_panel_tiles_are_as_wide_as_its_columns(n: int, lanes: int, loops: list[int]) -> None:
    """Tiles of 2 * 6 accumulators; a last panel with a vector's columns or fewer below N
    takes its row tiles in pairs, each pair one tile of 12 rows (12 accumulators, not 6:
    TilePlan.paired_rows); dot products for up to 4 columns past its last vector."""
    upstream = lower_to(
        parse_text(_matmul(24, 32, n), "mm"), Stage.UPSTREAM, CompileOptions(lanes=lanes)
    )
    assert _fma_widths(upstream) == {f"vector<{lanes}xf32>"}
    assert _vector_loops(upstream) == loops
    assert ("vector.reduction" in upstream) == (n not in (44, 64))


@pytest.mark.parametrize(
    ("m", "loops"),
    [
        # 5 row tiles: 2 pairs (two full tiles each, 12 rows one vector wide, 12 rows of
        # dot products), then the fifth alone (6, 6 and 6).
        (30, [6, 6, 12, 12, 12, 12, 12]),
        # 4 row tiles in 2 pairs and a tail of 2 rows (4 accumulators wide, 2 narrow, 2
        # dot products).
        (26, [2, 2, 4, 12, 12, 12, 12]),
    ],
)
def test_paired_row_tiles_leave_an_odd_tile_and_the_tail_alone(m: int, loops: list[int]) -> None:
    """N = 49 at AVX-512: an odd count of row tiles ends with one tile alone, and the rows
    past the last full tile keep their own narrower tile; both match the reference on 1
    and 2 threads."""
    text = _matmul(m, 32, 49)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(lanes=16))
    assert _vector_loops(upstream) == loops
    for threads in (1, 2):
        compile_and_compare(
            parse_text(text, "mm"), options=CompileOptions(threads=threads, lanes=16)
        )


@pytest.mark.parametrize(("h", "w"), [(7, 7), (6, 8)])
def test_a_row_run_last_panel_is_packed_by_vectors(h: int, w: int, monkeypatch: Any) -> None:
    """A 1x1 convolution's NCHW input is packed along its rows by vector loads; the last
    panel's real columns too (7x7: 32 + 16 + a dot column, 6x8: 32 + 16), not point by
    point: no point-by-point packing is emitted at all. Results match."""
    points: list[object] = []
    packing = operand_packing.OperandPacker._pack_b_points

    def record(self: operand_packing.OperandPacker, *args: Any, **kwargs: Any) -> None:
        points.append(args)
        packing(self, *args, **kwargs)

    monkeypatch.setattr(operand_packing.OperandPacker, "_pack_b_points", record)
    x, weights, y = _t(1, 64, h, w), _t(96, 64, 1, 1), _t(1, 96, h, w)
    text = f"""
func.func @main(%x: {x}, %w: {weights}) -> {y} {{
  %0 = graph.conv2d %x, %w : ({x}, {weights}) -> {y}
  func.return %0 : {y}
}}
"""
    options = CompileOptions(threads=2, lanes=16)
    assert "vector.fma" in lower_to(parse_text(text, "c"), Stage.UPSTREAM, options)
    assert points == []
    compile_and_compare(parse_text(text, "c"), options=options)
