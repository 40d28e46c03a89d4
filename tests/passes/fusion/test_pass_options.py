"""Out-of-range pass options are refused with a PassFailedException naming the option,
before the pass changes any IR; the Python API's options likewise (GraphfuseError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.parsing import GraphfuseError, parse_text
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass

_TEXT = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.relu %x : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
"""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_depth": -1}, r"option max-depth must be >= 1, got -1"),
        ({"max_depth": 0}, r"option max-depth must be >= 1, got 0"),
        ({"max_inputs": 0}, r"option max-inputs must be >= 1, got 0"),
        ({"max_results": 0}, r"option max-results must be >= 1, got 0"),
        ({"horizontal_max_bytes": -1}, r"option horizontal-max-bytes must be >= 0, got -1"),
        ({"target": "tpu"}, r"unknown target 'tpu'; valid targets: cpu, h100 \(option target"),
        ({"refine": False, "target": "tpu"}, r"unknown target 'tpu'"),
    ],
)
def test_graph_fuse_options_refused(options: dict[str, Any], message: str) -> None:
    module = parse_text(_TEXT)
    before = str(module)
    with pytest.raises(PassFailedException, match=message):
        GraphFusePass(**options).apply(Context(), module)
    assert str(module) == before


@pytest.mark.parametrize("fuse", [GraphFusePass, GraphSimplifyPass])
def test_rules_option_missing_file_refused(
    fuse: type[GraphFusePass] | type[GraphSimplifyPass], tmp_path: Path
) -> None:
    missing = str(tmp_path / "missing.mlir")
    with pytest.raises(
        PassFailedException, match=r"missing\.mlir: cannot read PDL rules \(option rules\)"
    ):
        fuse(rules=missing).apply(Context(), parse_text(_TEXT))


def test_compile_options_max_depth_refused() -> None:
    with pytest.raises(GraphfuseError, match="max_depth must be at least 1, got 0"):
        graphfuse.compile(parse_text(_TEXT), options=CompileOptions(max_depth=0))
