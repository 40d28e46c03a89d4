"""Pooling kernels against the reference interpreter: max pooling with padding on negative
inputs (a padded position must never win), strides 1 and 2, asymmetric and end-only
padding, padding of 2; average pooling with count_include_pad both ways;
1 and 2 threads. A max pool whose every window overlaps the input reads the nearest
input row or column for a padded tap (no compare or select): the graph dialect's rule
that padding is smaller than the kernel makes every window overlap."""

from __future__ import annotations

import numpy as np
import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def pool_text(
    kind: str,
    shape: tuple[int, int, int, int],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    padding: tuple[int, int, int, int],
    include_pad: bool = False,
) -> str:
    """A @main taking %x and returning `kind`_pool2d of it (shared with
    test_separable_pools.py)."""
    n, c, h, w = shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - kernel[0]) // strides[0] + 1
    ow = (w + left + right - kernel[1]) // strides[1] + 1
    x, y = f"tensor<{n}x{c}x{h}x{w}xf32>", f"tensor<{n}x{c}x{oh}x{ow}xf32>"
    flag = " count_include_pad" if include_pad else ""
    return f"""
func.func @main(%x: {x}) -> {y} {{
  %0 = graph.{kind}_pool2d %x kernel = [{kernel[0]}, {kernel[1]}] strides = [{strides[0]}, {strides[1]}] padding = [{top}, {left}, {bottom}, {right}]{flag} : {x} -> {y}
  func.return %0 : {y}
}}
"""


MAX_POOLS = [
    ((1, 8, 16, 16), (3, 3), (2, 2), (1, 1, 1, 1)),  # ResNet's stem pool
    ((2, 3, 9, 9), (3, 3), (1, 1), (1, 1, 1, 1)),  # stride 1
    ((1, 4, 7, 8), (2, 3), (2, 1), (0, 1, 1, 1)),  # asymmetric, end-only rows
    ((1, 2, 5, 5), (2, 2), (1, 1), (0, 0, 1, 1)),  # end-only padding
    ((1, 3, 6, 6), (3, 3), (2, 2), (2, 2, 2, 2)),  # padding of 2
]


def _negative(text: str) -> list[np.ndarray]:
    from graphfuse.dialects.graph import functions

    function = next(functions(parse_text(text, "p")))
    rng = np.random.default_rng(1)
    shapes = [a.type.get_shape() for a in function.body.block.args]
    return [rng.uniform(-5.0, -1.0, s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("pool", MAX_POOLS, ids=[str(p) for p in MAX_POOLS])
def test_max_pool_of_negative_inputs_matches_reference(
    pool: tuple[tuple[int, int, int, int], tuple[int, int], tuple[int, int], tuple[int, ...]],
    threads: int,
) -> None:
    text = pool_text("max", *pool)  # type: ignore[arg-type]
    options = CompileOptions(threads=threads)
    compile_and_compare(parse_text(text, "p"), options=options, inputs=_negative(text))
    compile_and_compare(parse_text(text, "p"), options=options)


@pytest.mark.parametrize("pool", MAX_POOLS, ids=[str(p) for p in MAX_POOLS])
def test_max_pool_reads_nearest_positions_without_selects(
    pool: tuple[tuple[int, int, int, int], tuple[int, int], tuple[int, int], tuple[int, ...]],
) -> None:
    loop_ir = lower_to(parse_text(pool_text("max", *pool), "p"), Stage.LOOP)  # type: ignore[arg-type]
    assert "arith.select" not in loop_ir and "arith.minsi" in loop_ir


AVG_POOLS = [
    ((1, 8, 16, 16), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((2, 3, 9, 9), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((1, 4, 7, 8), (2, 3), (2, 1), (0, 1, 1, 1)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("include_pad", [False, True])
@pytest.mark.parametrize("pool", AVG_POOLS, ids=[str(p) for p in AVG_POOLS])
def test_avg_pool_matches_reference(
    pool: tuple[tuple[int, int, int, int], tuple[int, int], tuple[int, int], tuple[int, ...]],
    include_pad: bool,
    threads: int,
) -> None:
    text = pool_text("avg", *pool, include_pad=include_pad)  # type: ignore[arg-type]
    options = CompileOptions(threads=threads)
    compile_and_compare(parse_text(text, "p"), options=options, inputs=_negative(text))
