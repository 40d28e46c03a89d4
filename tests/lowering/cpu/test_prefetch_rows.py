"""scf-prefetch-rows: which row kernels prefetch; their results stay the reference's.

Where the prefetch goes (after the first pass over a row) is checked on the pass's own
output in lit_tests/lowering/cpu/row-kernels-cpu-pipeline.mlir."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _softmax(rows: int, width: int) -> str:
    t = f"tensor<{rows}x{width}xf32>"
    return f"""func.func @main(%x: {t}) -> {t} {{
  %y = graph.softmax %x axis = -1 : {t}
  func.return %y : {t}
}}
"""


def _layer_norm(rows: int, width: int) -> str:
    t, v = f"tensor<{rows}x{width}xf32>", f"tensor<{width}xf32>"
    return f"""func.func @main(%x: {t}, %g: {v}, %b: {v}) -> {t} {{
  %y = graph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : ({t}, {v}, {v}) -> {t}
  func.return %y : {t}
}}
"""


def _upstream(text: str, threads: int = 1) -> str:
    return lower_to(parse_text(text, "rows"), Stage.UPSTREAM, CompileOptions(threads=threads))


@pytest.mark.parametrize(
    "text",
    [_softmax(64, 1024), _softmax(8192, 128), _layer_norm(32, 2048)],
    ids=["buffer in cache", "rows of 512 bytes", "small layer-norm"],
)
def test_small_rows_and_buffers_are_left_to_the_hardware(text: str) -> None:
    assert "memref.prefetch" not in _upstream(text)


def test_a_single_pass_over_rows_prefetches_nothing() -> None:
    t = "tensor<1024x1024xf32>"
    text = f"func.func @main(%x: {t}) -> {t} {{\n  %y = graph.tanh %x : {t}\n  func.return %y : {t}\n}}\n"
    assert "memref.prefetch" not in _upstream(text)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("make", [_softmax, _layer_norm], ids=["softmax", "layer_norm"])
def test_prefetching_kernels_match_the_reference(make, threads: int) -> None:
    text = make(513, 1024)
    assert "memref.prefetch" in _upstream(text, threads)
    compile_and_compare(parse_text(text, "rows"), options=CompileOptions(threads=threads))
