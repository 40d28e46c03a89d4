"""loop-tile-matmul: matmuls computed by the register-tiled micro-kernel give the
reference's results, at sizes that are not multiples of the 6x16 tile, with epilogues,
batches (B shared or per batch) and one or two threads; the tiled path is really taken."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from tests.lowering.compare import compile_and_compare


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _matmul_bias_relu(batch: tuple[int, ...], m: int, k: int, n: int, shared_b: bool) -> str:
    a, b = _t(*batch, m, k), _t(k, n) if shared_b else _t(*batch, k, n)
    c, bias = _t(*batch, m, n), _t(n)
    return f"""
func.func @main(%a: {a}, %b: {b}, %bias: {bias}, %r: {c}) -> {c} {{
  %0 = graph.matmul %a, %b : ({a}, {b}) -> {c}
  %1 = graph.add %0, %bias : ({c}, {bias}) -> {c}
  %2 = graph.relu %1 : {c}
  %3 = graph.add %2, %r : ({c}, {c}) -> {c}
  func.return %3 : {c}
}}
"""


SHAPES = [
    ((), 17, 1000, 20, True),  # rows: 2 full tiles + 5; columns: one panel + 4
    ((), 1000, 5, 17, True),  # short K
    ((), 3, 1000, 40, True),  # only a tail of 3 rows
    ((), 96, 64, 64, True),  # exact tiles
    ((1,), 128, 64, 48, True),  # batch 1
    ((3,), 20, 40, 33, True),  # batch 3, B shared
    ((2, 3), 13, 48, 19, False),  # batch 2x3, B per batch (packed per batch)
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[0]}x{s[1]}x{s[2]}x{s[3]}" for s in SHAPES])
def test_tiled_matmul_matches_reference(
    shape: tuple[tuple[int, ...], int, int, int, bool], threads: int
) -> None:
    text = _matmul_bias_relu(*shape)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=threads))
    assert "vector.fma" in upstream, "the matmul was not tiled"
    # Every shape here has two panels or more, packed in parallel.
    assert ("scf.parallel" in upstream) == (threads > 1)
    compile_and_compare(parse_text(text, "mm"), options=CompileOptions(threads=threads))


@pytest.mark.parametrize("shape", [((), 1000, 100, 1, True), ((), 1, 1000, 100, True)])
def test_vector_matrix_products_keep_the_dot_product_form(
    shape: tuple[tuple[int, ...], int, int, int, bool],
) -> None:
    """1xN and Nx1 results index their unit dimension with a constant: not a tile's shape
    (a GEMV is memory-bound anyway), so they stay dot products, and stay right."""
    text = _matmul_bias_relu(*shape)
    assert "vector.fma" not in lower_to(parse_text(text, "mv"), Stage.UPSTREAM)
    compile_and_compare(parse_text(text, "mv"), options=CompileOptions(threads=2))


def test_tiny_and_non_f32_matmuls_keep_the_dot_product_form() -> None:
    tiny = _matmul_bias_relu((), 4, 8, 8, True)
    assert "vector.fma" not in lower_to(parse_text(tiny, "tiny"), Stage.UPSTREAM)
    compile_and_compare(parse_text(tiny, "tiny"))
    text = """
func.func @main(%a: tensor<64x64xi32>, %b: tensor<64x64xi32>) -> tensor<64x64xi32> {
  %0 = graph.matmul %a, %b : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi32>
  func.return %0 : tensor<64x64xi32>
}
"""
    assert "vector.fma" not in lower_to(parse_text(text, "int"), Stage.UPSTREAM)
    compile_and_compare(parse_text(text, "int"))
