"""graph-split-grouped-conv: grouped convolutions that tile become one convolution per
group and a concat (CPU only); results stay the reference's."""

from __future__ import annotations

import re

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu.graph_split_grouped_conv import GraphSplitGroupedConvPass
from graphfuse.parsing import make_context, parse_text
from graphfuse.testing.compare import compile_and_compare


def _grouped(
    batch: int,
    channels: int,
    filters: int,
    size: tuple[int, int],
    groups: int,
    kernel: tuple[int, int] = (3, 3),
    strides: tuple[int, int] = (1, 1),
    padding: tuple[int, int, int, int] = (1, 1, 1, 1),
    dilations: tuple[int, int] = (1, 1),
    dtype: str = "f32",
) -> str:
    """A grouped convolution with a per-channel scale and relu after it."""
    h, w = size
    kh, kw = kernel
    oh = (h + padding[0] + padding[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + padding[1] + padding[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    x = f"tensor<{batch}x{channels}x{h}x{w}x{dtype}>"
    wt = f"tensor<{filters}x{channels // groups}x{kh}x{kw}x{dtype}>"
    y = f"tensor<{batch}x{filters}x{oh}x{ow}x{dtype}>"
    s = f"tensor<{filters}x1x1x{dtype}>"
    attributes = (
        f"strides = {list(strides)} padding = {list(padding)} "
        f"dilations = {list(dilations)} groups = {groups}"
    )
    return f"""func.func @main(%x: {x}, %w: {wt}, %s: {s}) -> {y} {{
  %0 = graph.conv2d %x, %w {attributes} : ({x}, {wt}) -> {y}
  %1 = graph.mul %0, %s : ({y}, {s}) -> {y}
  %2 = graph.relu %1 : {y}
  func.return %2 : {y}
}}
"""


def _split(text: str) -> str:
    module = parse_text(text, "grouped")
    GraphSplitGroupedConvPass().apply(make_context(), module)
    return str(module)


def test_two_groups_become_two_convolutions_and_a_concat() -> None:
    split = _split(_grouped(2, 32, 48, (20, 20), 2))
    convs = re.findall(r"graph\.conv2d .*", split)
    assert len(convs) == 2 and all("groups" not in c for c in convs)
    # Input channels 0-15 and 16-31, filters 0-23 and 24-47.
    assert "starts = [0, 16, 0, 0]" in split
    assert "starts = [24, 0, 0, 0]" in split
    assert split.count("graph.slice") == 4
    assert re.search(r"graph\.concat .* axis = 1", split)


@pytest.mark.parametrize(
    "text",
    [
        _grouped(1, 64, 64, (20, 20), 64),  # depthwise: one input channel per group
        _grouped(1, 64, 64, (20, 20), 16),  # 4 filters per group: too short for tiles
        _grouped(1, 32, 32, (1, 1), 2),  # too little work to tile
        _grouped(2, 32, 48, (20, 20), 2, dtype="f16"),  # loop-tile-matmul is f32 only
        _grouped(1, 256, 256, (10, 10), 128),  # more groups than MAX_GROUPS (and 2 per group)
    ],
    ids=["depthwise", "short-groups", "small", "f16", "many-groups"],
)
def test_convolutions_that_would_not_tile_stay_whole(text: str) -> None:
    split = _split(text)
    assert "graph.concat" not in split and split.count("graph.conv2d") == 1


CASES = {
    "2 groups": _grouped(2, 32, 48, (20, 20), 2),
    "4 groups, stride 2, odd sizes": _grouped(1, 40, 64, (23, 17), 4, strides=(2, 2)),
    "dilated, asymmetric padding": _grouped(
        1, 24, 32, (19, 21), 2, kernel=(3, 2), padding=(0, 2, 1, 1), dilations=(2, 1)
    ),
    "1x1, 8 groups": _grouped(2, 128, 256, (14, 14), 8, kernel=(1, 1), padding=(0, 0, 0, 0)),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_split_convolutions_tile_and_match_the_reference(name: str, threads: int) -> None:
    text = CASES[name]
    assert "graph.concat" in _split(text)
    upstream = lower_to(parse_text(text, name), Stage.UPSTREAM, CompileOptions(threads=threads))
    assert "vector.fma" in upstream, "the groups' convolutions were not tiled"
    for seed in range(2):
        compile_and_compare(
            parse_text(text, name), seed=seed, options=CompileOptions(threads=threads)
        )


def test_the_gpu_build_keeps_grouped_convolutions_whole() -> None:
    text = _grouped(2, 32, 48, (20, 20), 2)
    graph_for_gpu = lower_to(parse_text(text, "gpu"), Stage.GPU, CompileOptions())
    assert "graph.concat" not in graph_for_gpu
    cpu_graph = lower_to(parse_text(text, "cpu"), Stage.GRAPH, CompileOptions())
    assert "graph.concat" in cpu_graph


def test_fusing_a_fused_module_again_splits_nothing_inside_kernels() -> None:
    """The GPU's fused graph (grouped convolutions whole, inside kernels) lowered through the
    CPU path's fuse keeps its kernels as they are: fuse stays idempotent."""
    from graphfuse.compiler import fuse

    module = parse_text(_grouped(2, 32, 48, (20, 20), 2), "fused")
    fuse(module, CompileOptions(), cpu=False)
    before = str(module)
    fuse(module, CompileOptions())
    assert str(module) == before and "groups = 2" in before
