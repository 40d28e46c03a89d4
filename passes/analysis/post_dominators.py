"""Post-dominator tree of a function's op DAG (TVM FuseOps' DominatorTree::PostDom).

A node's immediate post-dominator is the nearest node every path from it to the function's
exit passes through. The exit is a virtual sink: results returned by the function and
results with no users flow into it, and a node whose only post-dominator is the sink has
`parent is None`. Each tree node also records the combined kind (the most restrictive) of
the edges on the paths to its post-dominator, which the fusion rules read.

Nodes are processed from the last to the first (reverse topological order), so every
consumer's tree node exists when its producers ask for the least common ancestor.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.analysis.dataflow import DataflowGraph


def combine(a: FusionKind, b: FusionKind) -> FusionKind:
    """The more restrictive of two kinds (TVM's CombinePattern)."""
    return a if a.rank >= b.rank else b


@dataclass
class PostDominatorTree:
    """`parent[i]` is node i's immediate post-dominator (None: the virtual sink)."""

    parent: list[int | None]
    depth: list[int]
    """Distance from the virtual sink; a child of the sink has depth 1."""
    kind: list[FusionKind]
    """Combined edge kind on the paths from node i to its post-dominator."""

    @staticmethod
    def build(dag: DataflowGraph) -> PostDominatorTree:
        size = len(dag)
        tree = PostDominatorTree([None] * size, [1] * size, [FusionKind.OPAQUE] * size)
        for index in range(size - 1, -1, -1):
            tree._place(dag, index)
        return tree

    def _place(self, dag: DataflowGraph, index: int) -> None:
        node = dag.nodes[index]
        if node.extern_ref or not node.outputs:
            # Flows into the virtual sink: nothing but the sink post-dominates it.
            return
        kind = FusionKind.ELEMWISE
        first = node.outputs[0]
        ancestor: int | None = first.consumer
        kind = combine(kind, first.kind)
        for edge in node.outputs[1:]:
            ancestor, kind = self._lca(ancestor, edge.consumer, kind)
            kind = combine(kind, edge.kind)
        self.parent[index] = ancestor
        self.depth[index] = 1 if ancestor is None else self.depth[ancestor] + 1
        self.kind[index] = kind

    def _lca(
        self, lhs: int | None, rhs: int | None, kind: FusionKind
    ) -> tuple[int | None, FusionKind]:
        """Walk both nodes up to their meeting point, combining the kinds passed on the way."""
        while lhs != rhs:
            if lhs is None or rhs is None:
                return None, kind
            if self.depth[lhs] < self.depth[rhs]:
                kind = combine(kind, self.kind[rhs])
                rhs = self.parent[rhs]
            elif self.depth[rhs] < self.depth[lhs]:
                kind = combine(kind, self.kind[lhs])
                lhs = self.parent[lhs]
            else:
                kind = combine(combine(kind, self.kind[lhs]), self.kind[rhs])
                lhs, rhs = self.parent[lhs], self.parent[rhs]
        return lhs, kind

    def immediate(self, index: int) -> int | None:
        """Node `index`'s immediate post-dominator, None for the virtual sink."""
        return self.parent[index]

    def lca(self, lhs: int, rhs: int) -> int | None:
        """The nearest common post-dominator of two nodes (None: only the virtual sink)."""
        return self._lca(lhs, rhs, FusionKind.ELEMWISE)[0]

    def dominates(self, dominator: int, index: int) -> bool:
        """Whether `dominator` post-dominates `index` (every node post-dominates itself)."""
        current: int | None = index
        while current is not None and self.depth[current] >= self.depth[dominator]:
            if current == dominator:
                return True
            current = self.parent[current]
        return False


def nodes_between(dag: DataflowGraph, source: int, sink: int) -> list[int]:
    """Every node on a path from `source` to its post-dominator `sink`, sink included.

    Since `sink` post-dominates `source`, the nodes reachable from `source` without passing
    `sink` are exactly those on such paths. Returned in IR (topological) order.
    """
    seen = {source, sink}
    stack = [edge.consumer for edge in dag.nodes[source].outputs]
    found = [sink]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        found.append(current)
        stack.extend(edge.consumer for edge in dag.nodes[current].outputs)
    return sorted(found)
