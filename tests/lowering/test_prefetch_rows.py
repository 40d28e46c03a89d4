"""scf-prefetch-rows: row kernels that read each row several times fetch the next
row after the first pass; results stay the reference's."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_prefetches_the_next_row_after_its_max_pass(threads: int) -> None:
    upstream = _upstream(_softmax(513, 1024), threads)
    first_pass = upstream.index("arith.maximumf")
    prefetch = upstream.index('"memref.prefetch"')
    exp_pass = upstream.index("0x4B40007E")  # exp's rounding constant
    assert first_pass < prefetch < exp_pass
    assert upstream.count('"memref.prefetch"') == 1
    # Row + 1, kept inside the buffer (the last row fetches itself); one per 64 bytes.
    assert re.search(r"arith\.constant 512 : index", upstream)
    assert "arith.minui" in upstream
    assert re.search(
        r"scf\.for %\d+ = %\d+ to %\d+ step %\d+ \{\n\s*\"memref\.prefetch\"", upstream
    )
    assert "arith.constant 16 : index" in upstream


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
