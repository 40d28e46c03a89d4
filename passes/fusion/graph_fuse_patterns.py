"""The `graph-fuse-patterns` pass: outline the classic fused kernels before partitioning.

```mlir
%c = graph.conv2d %x, %w ...   %a = graph.add %c, %b ...   %r = graph.relu %a ...
// becomes
%r = graph.fused "fused_conv2d_add_relu"(%x, %w, %b) kind = out_elemwise_fusable
       pattern = "conv2d_bias_relu" : ... { ... }
```

Patterns are data (`fusion_patterns.py`), tried in order at every op in IR order; an op
already claimed by a match is not matched again. The `pattern` mark tells `graph-fuse`
that the kernel is pre-formed: it stays whole and may still grow.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from graphfuse.dialects.graph import functions
from graphfuse.passes.fusion.fusion_patterns import PATTERNS, ChainPattern
from graphfuse.passes.fusion.outline import outline, sort_block


def fuse_patterns(module: ModuleOp) -> int:
    """Outline every match of PATTERNS; returns the number of kernels formed."""
    formed = 0
    for function in functions(module):
        block = function.body.block
        matches: list[tuple[ChainPattern, list[Operation]]] = []
        claimed: set[Operation] = set()
        for op in list(block.ops):
            if op in claimed:
                continue
            for pattern in PATTERNS:
                members = pattern.match(op)
                if members is not None and not claimed.intersection(members):
                    matches.append((pattern, members))
                    claimed.update(members)
                    break
        for pattern, members in matches:
            kernel = outline(sorted(members, key=block.get_operation_index), pattern.kind)
            kernel.pattern = StringAttr(pattern.name)
            formed += 1
        sort_block(block)
    return formed


@dataclass(frozen=True)
class GraphFusePatternsPass(ModulePass):
    """Outline conv2d+bias+relu, conv2d+batch-norm+relu and matmul+bias+activation."""

    name = "graph-fuse-patterns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_patterns(op)
