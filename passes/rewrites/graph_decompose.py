"""The `graph-decompose` pass: open compound ops into primitives (APOLLO).

```mlir
%y = graph.silu %x : tensor<8xf32>
// becomes
%s = graph.sigmoid %x : tensor<8xf32>
%y = graph.mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
```

The rules are data (`decompositions.py`); constant batch-norms after a convolution are
folded into its weights first (`FoldConvBatchNorm`), since that removes them entirely.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)

from graphfuse.passes.rewrites.decompositions import DECOMPOSITIONS
from graphfuse.passes.rewrites.folding import FoldConvBatchNorm
from graphfuse.passes.rewrites.rewrite_spec import DecompositionPattern


@dataclass(frozen=True)
class GraphDecomposePass(ModulePass):
    """Replace softmax, log_softmax, layer_norm, batch_norm, gelu, silu and reduce_mean."""

    name = "graph-decompose"

    fold_conv_bn: bool = True
    """Fold constant batch-norms into the preceding conv2d before opening the rest."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns: list[RewritePattern] = [FoldConvBatchNorm()] if self.fold_conv_bn else []
        patterns.extend(DecompositionPattern(rule) for rule in DECOMPOSITIONS)
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(op)
