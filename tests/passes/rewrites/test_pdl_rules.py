"""PDL rule files as rewrite patterns: a rule is tried on the ops its root names."""

from __future__ import annotations

from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

from graphfuse.passes.rewrites.pdl_rules import load_rules
from tests.conftest import parse

_RULE = """
pdl.pattern @drop_neg_zero_rhs : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %z = pdl.operand
  %op = pdl.operation ROOT(%x, %z : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_neg_zero"(%z : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}
"""

_GRAPH = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %z = graph.constant dense<-0.0> : tensor<4xf32>
  %a = graph.add %x, %z : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = graph.mul %x, %z : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %a, %m : tensor<4xf32>, tensor<4xf32>
}
"""


def _rewritten(root: str) -> list[str]:
    """The ops left in @main after the rule rooted at `root` ran to a fixed point."""
    module = parse(_GRAPH)
    patterns = load_rules(_RULE.replace("ROOT", root), "rule.mlir")
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(module)
    return [op.name for op in module.walk() if op.name.startswith("graph.")]


def test_pdl_rule_with_a_root_name_rewrites_only_ops_of_that_name() -> None:
    assert _rewritten('"graph.add"') == ["graph.constant", "graph.mul"]


def test_pdl_rule_without_a_root_name_is_tried_on_every_op() -> None:
    assert _rewritten("") == []  # the add and the mul gone, then their unused constant
