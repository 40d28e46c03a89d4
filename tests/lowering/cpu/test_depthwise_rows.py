"""Depthwise 3x3 and 5x5 convolutions at stride 1 and 2 computed from the input rows in
registers (lowering/cpu/depthwise_rows.py): the results match the reference with
epilogues (bias and relu6, SiLU, a residual and GELU), batches, odd and non-square images,
padding before the image of 0 to K // 2 and after it of any size, on 1 and 2 threads at
both vector widths; the padded copy is no longer written; the convolutions it leaves
(one-vector rows at stride 1, rows of a quarter of a vector, 7x7 taps, rows past
MAX_VECTORS) keep their paths and match too."""

from __future__ import annotations

from typing import Any

import pytest

from graphfuse import pipelines
from graphfuse.compiler import CompileOptions, Stage, lower
from graphfuse.dialects import loop
from graphfuse.lowering.cpu import depthwise_rows
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.recorded import record_returns
from tests.lowering.cpu.test_depthwise import depthwise_conv

TAKEN = {
    "3x3/2 batch 2, two vectors": (2, 24, (40, 40), 3, 2, (1, 1, 1, 1), "relu6"),
    "3x3/2 odd, not square": (1, 16, (41, 37), 3, 2, (1, 1, 1, 1), "relu6"),
    "3x3/2 'same' (0, 0, 1, 1)": (1, 16, (64, 64), 3, 2, (0, 0, 1, 1), "relu6"),
    "3x3/2 no padding": (1, 8, (35, 35), 3, 2, (0, 0, 0, 0), "silu"),
    "5x5/2": (1, 16, (36, 38), 5, 2, (2, 2, 2, 2), "silu"),
    "3x3/1 residual": (1, 16, (30, 30), 3, 1, (1, 1, 1, 1), "residual"),
    "5x5/1 batch 2, not square": (2, 8, (20, 34), 5, 1, (2, 2, 2, 2), "relu6"),
    "3x3/1 padding after only": (1, 8, (33, 33), 3, 1, (0, 0, 2, 2), "relu6"),
}


def _taken(monkeypatch: Any) -> list[int]:
    return record_returns(monkeypatch, "depthwise_rows", depthwise_rows.depthwise_rows)


@pytest.mark.parametrize(("threads", "lanes"), [(2, 16), (1, 8)])
@pytest.mark.parametrize("case", list(TAKEN))
def test_depthwise_rows_match_the_reference(
    case: str, threads: int, lanes: int, monkeypatch: Any
) -> None:
    counts = _taken(monkeypatch)
    text = depthwise_conv(*TAKEN[case])  # type: ignore[arg-type]
    compile_and_compare(
        parse_text(text, "dw"), options=CompileOptions(threads=threads, lanes=lanes)
    )
    assert sum(counts) == 1


def _tiled(text: str, lanes: int) -> loop.KernelOp:
    module = parse_text(text, "dw")
    lower(module, Stage.LOOP, CompileOptions())
    pipelines.run(pipelines.spec("loop-tile-matmul", lanes=lanes), module)
    (kernel,) = [k for k in module.walk() if isinstance(k, loop.KernelOp)]
    return kernel


def test_the_padded_copy_is_not_written() -> None:
    """The kernel keeps its padded buffer as an argument but stores nothing there; it
    splits each pair of input vectors by two shuffles into even and odd columns (stride
    2), and the reduction is gone."""
    kernel = _tiled(depthwise_conv(1, 16, (40, 40), 3, 2, (1, 1, 1, 1), "relu6"), 16)
    padded = [a for a in kernel.body.block.args if a.type.get_shape() == (1, 16, 42, 42)]
    assert len(padded) == 1 and not padded[0].uses
    assert not any(isinstance(op, loop.ReduceOp) for op in kernel.walk())
    assert sum(op.name == "vector.shuffle" for op in kernel.walk()) > 0


LEFT = {
    "3x3/1 one-vector rows": ((1, 16, (14, 14), 3, 1, (1, 1, 1, 1), "relu6"), 16),
    "3x3/2 rows of a quarter vector": ((1, 16, (8, 8), 3, 2, (1, 1, 1, 1), "relu6"), 16),
    "7x7 taps": ((1, 16, (20, 20), 7, 1, (3, 3, 3, 3), "silu"), 16),
    "rows past MAX_VECTORS": ((1, 8, (136, 136), 3, 1, (1, 1, 1, 1), "relu6"), 16),
    "3x3/2 padding 2 before": ((1, 16, (40, 40), 3, 2, (2, 2, 0, 0), "relu6"), 16),
}


@pytest.mark.parametrize("case", list(LEFT))
def test_other_depthwise_convolutions_keep_their_paths(case: str, monkeypatch: Any) -> None:
    counts = _taken(monkeypatch)
    conv, lanes = LEFT[case]
    text = depthwise_conv(*conv)  # type: ignore[arg-type]
    compile_and_compare(parse_text(text, "dw"), options=CompileOptions(threads=2, lanes=lanes))
    assert counts and sum(counts) == 0


@pytest.mark.parametrize(("size", "lanes", "taken"), [(14, 8, 1), (7, 16, 1), (7, 8, 0)])
def test_rows_of_one_vector_at_stride_one(
    size: int, lanes: int, taken: int, monkeypatch: Any
) -> None:
    """At stride 1, rows of more than half a vector and at most one are left: 14 columns
    are one vector of 16 lanes (left, LEFT) but two of 8 (taken); 7 columns are half a
    vector of 16 (taken) but most of one of 8 (left)."""
    counts = _taken(monkeypatch)
    text = depthwise_conv(1, 16, (size, size), 3, 1, (1, 1, 1, 1), "relu6")
    options = CompileOptions(threads=2, lanes=lanes)
    compile_and_compare(parse_text(text, "dw"), options=options)
    assert sum(counts) == taken
