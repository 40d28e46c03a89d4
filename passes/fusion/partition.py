"""The graph partitioner: TVM FuseOps' union-find groups driven by the post-dominator tree.

Steps, as in TVM's GraphPartitioner: every node starts in a group of its own; in each phase
(see `fusion_rules`) every node, in IR order, may fuse into its immediate post-dominator:
`check_path` tests the rule on every node between them, `commit_fuse` merges their groups
into the post-dominator's. Two safeguards TVM lacks: a merge that would put a cycle between
kernels is skipped, and the ops-per-kernel limit counts the merged kernel exactly. Every
accept and reject is kept as a `Decision`, so `explain` can say why two ops did not fuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.analysis.dataflow import DataflowGraph
from graphfuse.passes.analysis.post_dominators import PostDominatorTree, combine, nodes_between
from graphfuse.passes.fusion.fusion_rules import FusionRule, Phase, rule_for


@dataclass(frozen=True)
class Decision:
    """One candidate fusion and its outcome, for `graph-fuse{explain=true}`."""

    phase: Phase
    source: int
    sink: int | None
    accepted: bool
    reason: str

    def render(self, dag: DataflowGraph) -> str:
        target = "exit" if self.sink is None else dag.label(self.sink)
        verdict = "fused" if self.accepted else "not fused"
        phase = int(self.phase)
        return f"[phase {phase}] {dag.label(self.source)} -> {target}: {verdict}, {self.reason}"


class GroupSet:
    """Union-find over DAG nodes; roots carry the group's kind, size and members.

    A group's size counts ops, not nodes: a pre-formed kernel is one node of several ops.
    """

    def __init__(self, dag: DataflowGraph):
        self.parent = list(range(len(dag)))
        # TVM's Group::pattern: a node's own kind, raised when an anchor joins its group.
        self.kind = [node.kind for node in dag.nodes]
        self.anchored = [node.kind is FusionKind.OUT_ELEMWISE_FUSABLE for node in dag.nodes]
        self.members: list[list[int]] = [[i] for i in range(len(dag))]
        self.size = [node.size for node in dag.nodes]
        self.last = list(range(len(dag)))
        """At a root: the group's last member in IR order."""
        self.leaving = [{edge.consumer for edge in node.outputs} for node in dag.nodes]
        """At a root: the consumers of the group's members outside it (so a cycle check
        reads these, not every member: a chain's group grows to max-depth ops)."""

    def find(self, index: int) -> int:
        root = index
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[index] != root:  # path compression
            self.parent[index], index = root, self.parent[index]
        return root

    def root_kind(self, index: int) -> FusionKind:
        return self.kind[self.find(index)]

    def merge(self, child: int, target: int) -> None:
        """Merge child's group into target's (TVM MergeFromTo)."""
        child, target = self.find(child), self.find(target)
        if child == target:
            return
        self.leaving[target] = self._outside(child, target) | self._outside(target, child)
        self.leaving[child] = set()
        self.parent[child] = target
        # The shorter list joins the longer: a chain's group merges into each next op.
        small, large = sorted((self.members[child], self.members[target]), key=len)
        large.extend(small)
        self.members[target], self.members[child] = large, []
        self.size[target] += self.size[child]
        self.last[target] = max(self.last[target], self.last[child])
        if self.anchored[child]:
            self.anchored[target] = True
            self.kind[target] = combine(self.kind[child], self.kind[target])

    def _outside(self, group: int, other: int) -> set[int]:
        """Root `group`'s leaving consumers less the members of root `other`'s group,
        checked from the smaller side."""
        consumers, members = self.leaving[group], self.members[other]
        if len(consumers) <= len(members):
            return {c for c in consumers if self.find(c) != other}
        return consumers.difference(members)

    def groups(self) -> list[list[int]]:
        """Every group's members in IR order, groups ordered by their first member."""
        found = [sorted(self.members[i]) for i in range(len(self.parent)) if self.parent[i] == i]
        return sorted(found, key=lambda members: members[0])


class Partitioner:
    """Runs the three phases over one function's DAG."""

    def __init__(self, dag: DataflowGraph, max_depth: int):
        self.dag = dag
        self.tree = PostDominatorTree.build(dag)
        self.groups = GroupSet(dag)
        self.max_depth = max_depth
        self.decisions: list[Decision] = []

    def run(self) -> list[list[int]]:
        for phase in Phase:
            for index in range(len(self.dag)):
                self.consider(phase, index)
        return self.groups.groups()

    def _reject(self, phase: Phase, source: int, sink: int | None, reason: str) -> None:
        self.decisions.append(Decision(phase, source, sink, False, reason))

    def consider(self, phase: Phase, index: int) -> None:
        """Try to fuse node `index`'s group into its immediate post-dominator's."""
        kind = self.groups.kind[index]
        sink = self.tree.immediate(index)
        if phase is Phase.ANCHORS and kind is FusionKind.OPAQUE:
            self._reject(phase, index, sink, "opaque ops never fuse")
            return
        if phase is Phase.ANCHORS and sink is None:
            self._reject(
                phase,
                index,
                sink,
                "no post-dominator: its value leaves the function "
                "or is used on paths that never meet again",
            )
            return
        if sink is None or self.groups.find(index) == self.groups.find(sink):
            return
        rule = rule_for(phase, kind)
        if rule is None or self.groups.kind[sink] not in rule.sink_node:
            return
        edge = self.tree.kind[index]
        if rule.dominator_edge is not None and edge not in rule.dominator_edge:
            self._reject(phase, index, sink, f"{rule.name}: the edges to it are {edge.value}")
            return
        between = nodes_between(self.dag, index, sink)
        reason = self._check(rule, index, sink, between)
        if reason is not None:
            self._reject(phase, index, sink, f"{rule.name}: {reason}")
            return
        self._commit([index, *between], sink)
        self.decisions.append(Decision(phase, index, sink, True, f"by {rule.describe()}"))

    def _check(self, rule: FusionRule, index: int, sink: int, between: list[int]) -> str | None:
        """Why `rule` forbids fusing `index` (through `between`) into `sink`, or None."""
        size = self._fused_size([index, *between])
        if size > self.max_depth:
            return f"the kernel would have {size} ops, over max-depth={self.max_depth}"
        if (reason := self._check_path(rule, between, sink)) is not None:
            return reason
        if (through := self._cycle_through([index, *between])) is not None:
            return f"merging would create a cycle between kernels through {self.dag.label(through)}"
        return None

    def _check_path(self, rule: FusionRule, between: list[int], sink: int) -> str | None:
        """TVM CheckPath: every group on the way, and the sink's, must be of allowed kinds."""
        for node in between:
            kind = self.groups.root_kind(node)
            allowed = rule.sink if node == sink else rule.path
            if kind not in allowed:
                where = "post-dominator" if node == sink else "op on the path"
                return f"{where} {self.dag.label(node)} is in a {kind.value} group"
        return None

    def _fused_size(self, nodes: Iterable[int]) -> int:
        roots = {self.groups.find(n) for n in nodes}
        return sum(self.groups.size[r] for r in roots)

    def _cycle_through(self, nodes: list[int]) -> int | None:
        """A node outside the would-be group that lies on a path leaving and re-entering it."""
        groups = self.groups
        roots = {groups.find(n) for n in nodes}
        last = max(groups.last[r] for r in roots)
        # Only nodes before the group's last member can lead back into it.
        frontier = [
            consumer
            for r in sorted(roots)
            for consumer in sorted(groups.leaving[r])
            if consumer < last and groups.find(consumer) not in roots
        ]
        seen: set[int] = set()
        while frontier:
            current = frontier.pop()
            if current in seen:
                continue
            seen.add(current)
            for edge in self.dag.nodes[current].outputs:
                if groups.find(edge.consumer) in roots:
                    return current
                if edge.consumer < last:
                    frontier.append(edge.consumer)
        return None

    def _commit(self, nodes: list[int], sink: int) -> None:
        """TVM CommitFuse: the source and every node between join the sink's group."""
        target = self.groups.find(sink)
        for node in nodes:
            self.groups.merge(node, target)
