"""A kernel whose result is a concat stores it with one loop per operand, at the operand's
offset (kernel_builder.py), and a reshape that keeps the concat's axis moves onto the
operands first (reshape_concats.py); results stay the reference's."""

from __future__ import annotations

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare


def _merge(axis: int, flatten: bool) -> str:
    """Swin's patch merging: the four stride-2 phases of an image side by side along
    `axis` (the channels: 3; the rows: 1), the image flattened after it or not."""
    x = "tensor<2x8x8x16xf32>"
    phase = "tensor<2x4x4x16xf32>"
    joined = [2, 4, 4, 16]
    joined[axis] *= 4
    cat = f"tensor<{'x'.join(map(str, joined))}xf32>"
    lines = [f"func.func @main(%x: {x}) -> RESULT {{"]
    for k, (r, c) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        lines.append(
            f"  %p{k} = graph.slice %x starts = [0, {r}, {c}, 0] strides = [1, 2, 2, 1] "
            f": {x} -> {phase}"
        )
    types = ", ".join([phase] * 4)
    lines.append(f"  %cat = graph.concat %p0, %p1, %p2, %p3 axis = {axis} : ({types}) -> {cat}")
    result, returned = cat, "%cat"
    if flatten:
        result = f"tensor<{joined[0]}x{joined[1] * joined[2]}x{joined[3]}xf32>"
        lines.append(f"  %flat = graph.reshape %cat : {cat} -> {result}")
        returned = "%flat"
    lines.append(f"  func.return {returned} : {result}\n}}")
    return "\n".join(lines).replace("RESULT", result)


@pytest.mark.parametrize(("axis", "flatten"), [(3, False), (3, True), (1, False), (0, False)])
def test_concat_result_is_stored_piece_by_piece(axis: int, flatten: bool) -> None:
    text = _merge(axis, flatten)
    looped = lower_to(parse_text(text, "merge"), Stage.LOOP, CompileOptions(threads=1))
    # One nest per operand, and no select between operands at each point.
    assert looped.count("loop.parallel") == 4, looped
    assert "arith.select" not in looped
    compile_and_compare(parse_text(text, "merge"), options=CompileOptions(threads=2))


def test_a_reshape_that_splits_the_concat_axis_stays_behind_it() -> None:
    """Flattening the channels into the columns mixes the operands' blocks: the concat is
    then computed point by point as before, and still correct."""
    text = (
        _merge(3, False)
        .replace(
            "func.return %cat : tensor<2x4x4x64xf32>",
            "%flat = graph.reshape %cat : tensor<2x4x4x64xf32> -> tensor<2x4x256xf32>\n"
            "  func.return %flat : tensor<2x4x256xf32>",
        )
        .replace("-> tensor<2x4x4x64xf32> {", "-> tensor<2x4x256xf32> {")
    )
    looped = lower_to(parse_text(text, "merge"), Stage.LOOP, CompileOptions(threads=1))
    assert looped.count("loop.parallel") == 1
    compile_and_compare(parse_text(text, "merge"), options=CompileOptions(threads=2))
