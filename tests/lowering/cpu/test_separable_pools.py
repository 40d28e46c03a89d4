"""Max and average pools split into a pass down the window's rows and one along its
columns (lowering/cpu/separable_pools.py), against the reference interpreter: with padding
(the nearest-column reads of a max pool and the zero-guarded reads of an average pool
become identity columns of the scratch), without it, at strides 1 to 3, asymmetric
windows, padding of 2, average pools counting the padding or not, a fused prologue
(relu(a + b)) evaluated once per input point, NaN inputs (a NaN in a window must still
win), and on 1 and 2 threads. The split is checked to be taken (or not) in the lowered
kernel, so a test fails if the matcher stops matching."""

from __future__ import annotations

import numpy as np
import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.test_pooling import pool_text

Shape = tuple[int, int, int, int]


def _pool(
    shape: Shape,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    padding: tuple[int, int, int, int],
    prologue: bool = False,
    kind: str = "max",
) -> str:
    """test_pooling's pool of %x; with `prologue`, of relu(a + b) instead."""
    include_pad = kind == "avg_include_pad"
    text = pool_text(kind[:3], shape, kernel, strides, padding, include_pad)
    if not prologue:
        return text
    x = f"tensor<{'x'.join(map(str, shape))}xf32>"
    add = f"  %s = graph.add %a, %b : ({x}, {x}) -> {x}\n  %x = graph.relu %s : {x}\n"
    return text.replace(f"@main(%x: {x})", f"@main(%a: {x}, %b: {x})").replace(
        "  %0 = ", add + "  %0 = "
    )


# (input, kernel, strides, padding, split taken)
POOLS = [
    ((2, 16, 16, 16), (3, 3), (2, 2), (1, 1, 1, 1), True),  # ResNet's stem pool
    ((1, 8, 20, 20), (5, 5), (1, 1), (2, 2, 2, 2), True),  # YOLO's SPP pool
    ((1, 4, 17, 19), (3, 3), (2, 2), (0, 0, 0, 0), True),  # overlapping, no padding
    ((1, 4, 7, 8), (2, 3), (2, 1), (0, 1, 1, 1), True),  # asymmetric window and padding
    ((1, 3, 6, 6), (3, 3), (2, 2), (2, 2, 2, 2), True),  # padding of 2
    ((1, 3, 11, 13), (3, 3), (3, 3), (1, 1, 1, 1), True),  # stride 3, right edge unread
    ((1, 8, 16, 16), (2, 2), (2, 2), (0, 0, 0, 0), False),  # no overlap, no padding
]


def _has_scratch(text: str) -> bool:
    """Whether the entry passes a scratch buffer: the column maxima (a pool needs none
    otherwise)."""
    upstream = lower_to(parse_text(text, "p"), Stage.UPSTREAM, CompileOptions(threads=1))
    main = next(line for line in upstream.splitlines() if "func.func @main" in line)
    return "graphfuse.scratch = 1" in main


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("pool", POOLS, ids=[str(p[:4]) for p in POOLS])
def test_split_pool_matches_reference(pool: tuple, threads: int) -> None:  # type: ignore[type-arg]
    *geometry, taken = pool
    text = _pool(*geometry)
    assert _has_scratch(text) == taken
    options = CompileOptions(threads=threads)
    rng = np.random.default_rng(3)
    negative = rng.uniform(-5.0, -1.0, geometry[0]).astype(np.float32)
    compile_and_compare(parse_text(text, "p"), options=options, inputs=[negative])
    compile_and_compare(parse_text(text, "p"), options=options)


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_prologue_is_evaluated_per_input_point(threads: int) -> None:
    """relu(a + b) fused into the pool: computed in the pass down the rows, where the
    loads are; one kernel, its result the reference's."""
    for kind in ("max", "avg"):
        text = _pool((2, 8, 15, 15), (3, 3), (2, 2), (1, 1, 1, 1), True, kind)
        graph_ir = lower_to(parse_text(text, "p"), Stage.GRAPH)
        assert graph_ir.count("graph.fused") == 1
        assert _has_scratch(text)
        compile_and_compare(parse_text(text, "p"), options=CompileOptions(threads=threads))


AVG_POOLS = [
    ((1, 8, 14, 14), (3, 3), (1, 1), (1, 1, 1, 1), True),  # Inception's branch pool
    ((2, 4, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), True),
    ((1, 4, 7, 8), (2, 3), (2, 1), (0, 1, 1, 1), True),  # asymmetric, end-only rows
    ((1, 3, 6, 6), (3, 3), (2, 2), (2, 2, 2, 2), True),  # padding of 2
    ((1, 8, 16, 16), (2, 2), (2, 2), (0, 0, 0, 0), False),  # DenseNet's transition
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["avg", "avg_include_pad"])
@pytest.mark.parametrize("pool", AVG_POOLS, ids=[str(p[:4]) for p in AVG_POOLS])
def test_split_average_pool_matches_reference(pool: tuple, kind: str, threads: int) -> None:  # type: ignore[type-arg]
    """A tap outside the input adds zero (the select's zero, the scratch's identity
    columns); the divisor, computed after the sum, is unchanged."""
    *geometry, taken = pool
    text = _pool(*geometry, kind=kind)
    assert _has_scratch(text) == taken
    options = CompileOptions(threads=threads)
    compile_and_compare(parse_text(text, "p"), options=options)


def test_nan_in_a_window_wins() -> None:
    """The -inf columns for padding never hide a NaN: max pooling propagates it, as the
    reference's maximum does."""
    text = _pool((1, 2, 8, 8), (3, 3), (2, 2), (1, 1, 1, 1))
    x = np.random.default_rng(0).standard_normal((1, 2, 8, 8)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # read by the first window through the padding's clamp
    x[0, 1, 4, 7] = np.nan  # the last column of a row
    compile_and_compare(parse_text(text, "p"), inputs=[x])
