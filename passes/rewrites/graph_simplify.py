"""The `graph-simplify` pass: algebraic simplification, constant folding, CSE and DCE.

```mlir
%z = graph.constant dense<0.0> : tensor<f32>
%y = graph.sub %x, %z : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>   // -> %x
%t = graph.transpose %x perm = [1, 0] ...
%u = graph.transpose %t perm = [1, 0] ...                                // -> %x
```

Rules are PDL patterns (`rules/simplify.mlir`, plus a user's file given as `rules=`), and
patterns that compute new constants or permutations (`folding.py`), move scalar scales
behind matmuls (`scale_hoisting.py`), move reshapes of a GEMM's rows into its left operand
(`matmul_row_reshapes.py`), move a reshape of a concat onto its operands
(`reshape_concats.py`) or, with constant folding, merge matmuls sharing
their input and reading constant weights into one (`sibling_matmuls.py`). One greedy walk
applies them all; xDSL's common-subexpression and dead-code elimination follow.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker, RewritePattern
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from graphfuse.passes.rewrites.folding import ComposeTransposes, FoldConstants
from graphfuse.passes.rewrites.matmul_row_reshapes import ReshapeRowsIntoMatmul
from graphfuse.passes.rewrites.pdl_rules import builtin_rules, load_rule_file
from graphfuse.passes.rewrites.reshape_concats import ReshapeIntoConcat
from graphfuse.passes.rewrites.scale_hoisting import FoldScalarScales, HoistScalarScales
from graphfuse.passes.rewrites.sibling_matmuls import MergeSiblingMatmuls


def simplify_patterns(rules: str | None, fold_constants: bool) -> list[RewritePattern]:
    """Every pattern graph-simplify applies: built-in PDL rules, the user's, folders."""
    patterns: list[RewritePattern] = list(builtin_rules("simplify.mlir"))
    if rules:
        patterns.extend(load_rule_file(rules))
    patterns += [ComposeTransposes(), HoistScalarScales(), FoldScalarScales()]
    patterns += [ReshapeRowsIntoMatmul(), ReshapeIntoConcat()]
    if fold_constants:
        patterns += [FoldConstants(), MergeSiblingMatmuls()]
    return patterns


@dataclass(frozen=True)
class GraphSimplifyPass(ModulePass):
    """Simplify graph ops with declarative rules, fold constants, then CSE and DCE."""

    name = "graph-simplify"

    rules: str | None = None
    """A PDL file of extra rules (an MLIR module of pdl.pattern ops)."""

    fold_constants: bool = True
    """Replace graph ops on constants by their value."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = simplify_patterns(self.rules, self.fold_constants)
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(op)
        CommonSubexpressionElimination().apply(ctx, op)
        DeadCodeElimination().apply(ctx, op)
