"""The kernel plan that graph-fuse's refinement steps edit: which DAG nodes each kernel holds.

A plan starts from the TVM partitioner's groups. Refinement (priority fusion, multi-output,
horizontal fusion, merger, rollback; see `fusion_refine`) replaces kernels by others through
`Change`s, which the plan can try (apply, measure, undo) before committing to one.

A node may be held by several kernels: one *owns* it, the others hold a recomputed copy
(Ascend's recomputation, XLA's duplication of a producer into its consumers). A kernel
reads every value its nodes use that it does not compute itself, and its owned nodes'
results are written to memory exactly when something needs them there: a use outside the
DAG (the function's return), or a consumer held by a kernel that does not compute the
value itself. Bytes, flops and times come from `cost_model`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.analysis.cost_model import KernelCost, Target, op_flops
from graphfuse.passes.analysis.dataflow import DataflowGraph, op_label
from graphfuse.passes.analysis.kernel_stats import elements, value_bytes
from graphfuse.passes.fusion.outline import is_small_constant


@dataclass(frozen=True)
class Change:
    """Replace the kernels `removed` by `added` (node sets). A node of a removed kernel
    is then owned by the first added kernel holding it."""

    removed: tuple[int, ...]
    added: tuple[frozenset[int], ...]


@dataclass
class Undo:
    """What `Plan.apply` needs to put the plan back."""

    kernels: dict[int, tuple[int, ...]]
    added_ids: list[int]
    owner: dict[int, int]
    holders: dict[int, set[int]]
    stale: set[int]
    """Kernels whose cost the change can alter (`Plan.neighbourhood` of those removed)."""
    costs: dict[int, KernelCost]
    """Their cached costs before the change."""


@dataclass
class Plan:
    """Kernels as sorted node tuples; `owner[n]` and `holders[n]` per node."""

    dag: DataflowGraph
    target: Target
    kernels: dict[int, tuple[int, ...]] = field(default_factory=dict[int, tuple[int, ...]])
    owner: list[int] = field(default_factory=list[int])
    holders: list[set[int]] = field(default_factory=list[set[int]])
    opaque: set[int] = field(default_factory=set[int])
    """Kernels that never merge: ops of other dialects, kernels of an earlier graph-fuse."""
    next_id: int = 0
    flops: list[int] = field(default_factory=list[int])
    """Each node's flops (the plan measures kernels thousands of times)."""
    nbytes: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """Bytes of each value measured so far."""
    reads: dict[int, list[SSAValue]] = field(default_factory=dict[int, list[SSAValue]])
    """`read` per kernel id: it depends on the kernel's nodes alone, and ids are not reused."""
    costs: dict[int, KernelCost] = field(default_factory=dict[int, KernelCost])
    """`cost` per kernel id, dropped by `apply` and `undo` for the kernels they can alter."""

    @staticmethod
    def from_groups(
        dag: DataflowGraph, groups: Sequence[Sequence[int]], target: Target, opaque: set[int]
    ) -> Plan:
        """A plan of disjoint groups; groups whose first node is in `opaque` never merge."""
        plan = Plan(dag, target, owner=[0] * len(dag), holders=[set() for _ in dag.nodes])
        plan.flops = [op_flops(node.op) for node in dag.nodes]
        for members in groups:
            kernel = plan.next_id
            plan.next_id += 1
            plan.kernels[kernel] = tuple(sorted(members))
            for node in members:
                plan.owner[node] = kernel
                plan.holders[node].add(kernel)
            if members[0] in opaque:
                plan.opaque.add(kernel)
        return plan

    # ---- what a kernel moves -----------------------------------------------------------

    def node_of(self, op: Operation | object) -> int | None:
        return self.dag.index_of.get(op) if isinstance(op, Operation) else None

    def needed_in_memory(self, node: int, result: SSAValue) -> bool:
        """Whether some use of `result` (of `node`) must read it from memory."""
        for use in result.uses:
            consumer = self.node_of(use.operation)
            if consumer is None:
                return True
            if not self.holders[consumer] <= self.holders[node]:
                return True
        return False

    def written(self, kernel: int) -> list[SSAValue]:
        return [
            result
            for node in self.kernels[kernel]
            if self.owner[node] == kernel
            for result in self.dag.nodes[node].op.results
            if self.needed_in_memory(node, result)
        ]

    def read(self, kernel: int) -> list[SSAValue]:
        """Values the kernel loads, in order of first use (small constants included: they
        are cloned in, but still bytes the kernel touches)."""
        found = self.reads.get(kernel)
        if found is not None:
            return found
        held = set(self.kernels[kernel])
        values: dict[SSAValue, None] = {}
        for node in self.kernels[kernel]:
            for operand in self.dag.nodes[node].op.operands:
                producer = self.node_of(operand.owner)
                if producer is None or producer not in held:
                    values[operand] = None
        found = self.reads[kernel] = list(values)
        return found

    def inputs(self, kernel: int) -> int:
        """Buffers the kernel takes: values read, small constants aside (cloned in)."""
        return sum(1 for v in self.read(kernel) if not is_small_constant(_owner_op(v)))

    def size(self, kernel: int) -> int:
        return sum(self.dag.nodes[n].size for n in self.kernels[kernel])

    def value_bytes(self, value: SSAValue) -> int:
        found = self.nbytes.get(value)
        if found is None:
            found = self.nbytes[value] = value_bytes(value)
        return found

    def cost(self, kernel: int) -> KernelCost:
        found = self.costs.get(kernel)
        if found is None:
            found = self.costs[kernel] = KernelCost(
                bytes_read=sum(self.value_bytes(v) for v in self.read(kernel)),
                bytes_written=sum(self.value_bytes(v) for v in self.written(kernel)),
                flops=sum(self.flops[n] for n in self.kernels[kernel]),
            )
        return found

    def space(self, kernel: int) -> tuple[int, ...]:
        """The kernel's iteration space: the largest shape among its results and the
        inputs of its reductions (kernels sharing one can share their loops)."""
        best: tuple[int, ...] = ()
        best_elements = -1
        for node in self.kernels[kernel]:
            op = self.dag.nodes[node].op
            values = [*op.results, *([op.input] if isinstance(op, graph.ReduceOp) else [])]
            for value in values:
                if elements(value) > best_elements:
                    best_elements = elements(value)
                    best = tuple(graph.tensor_type_of(value).get_shape())
        return best

    def kinds(self, kernel: int) -> set[FusionKind]:
        return {self.dag.nodes[n].kind for n in self.kernels[kernel]}

    # ---- the kernel graph --------------------------------------------------------------

    def consumers(self, kernel: int) -> list[int]:
        """Kernels that read a value this one writes, in id order."""
        found: set[int] = set()
        for node in self.kernels[kernel]:
            if self.owner[node] != kernel:
                continue
            for result in self.dag.nodes[node].op.results:
                for use in result.uses:
                    consumer = self.node_of(use.operation)
                    if consumer is not None:
                        found |= self.holders[consumer] - self.holders[node]
        return sorted(found)

    def producers(self, kernel: int) -> list[int]:
        """Kernels that write a value this one reads."""
        found: set[int] = set()
        for value in self.read(kernel):
            producer = self.node_of(value.owner)
            if producer is not None:
                found.add(self.owner[producer])
        return sorted(found)

    # ---- changing the plan -------------------------------------------------------------

    def apply(self, change: Change, stale: set[int] | None = None) -> Undo:
        """Make the change; returns how to undo it. `stale`: the `neighbourhood` of the
        kernels removed, when the caller has already computed it."""
        touched = {n for k in change.removed for n in self.kernels[k]}
        touched |= {n for nodes in change.added for n in nodes}
        undo = Undo(
            kernels={k: self.kernels[k] for k in change.removed},
            added_ids=[],
            owner={n: self.owner[n] for n in touched},
            holders={n: set(self.holders[n]) for n in touched},
            stale=self.neighbourhood(change.removed) if stale is None else stale,
            costs={},
        )
        for kernel in undo.stale:
            cost = self.costs.pop(kernel, None)
            if cost is not None:
                undo.costs[kernel] = cost
        for kernel in change.removed:
            for node in self.kernels.pop(kernel):
                self.holders[node].discard(kernel)
        for nodes in change.added:
            kernel = self.next_id
            self.next_id += 1
            undo.added_ids.append(kernel)
            self.kernels[kernel] = tuple(sorted(nodes))
            for node in nodes:
                self.holders[node].add(kernel)
                if self.owner[node] in change.removed or self.owner[node] not in self.kernels:
                    self.owner[node] = kernel
        return undo

    def undo(self, undo: Undo) -> None:
        for kernel in undo.added_ids:
            del self.kernels[kernel]
            self.costs.pop(kernel, None)
        for kernel in undo.stale:
            self.costs.pop(kernel, None)
        self.costs.update(undo.costs)
        self.kernels.update(undo.kernels)
        for node, owner in undo.owner.items():
            self.owner[node] = owner
        for node, holders in undo.holders.items():
            self.holders[node] = holders

    def neighbourhood(self, kernels: Iterable[int]) -> set[int]:
        """`kernels` and the owners of their nodes and of every node those use: all whose
        cost a change to `kernels` can alter. (The owner of a value a kernel recomputes
        is no producer of that kernel, yet writes the value again once the copy is gone.)"""
        around = set(kernels)
        nodes = self.dag.nodes
        for kernel in list(around):
            for node in self.kernels[kernel]:
                around.add(self.owner[node])
                around.update(self.owner[p] for p in nodes[node].inputs)
        return around

    def label(self, kernel: int) -> str:
        """The kernel's first op and how many more it holds, for explanations."""
        nodes = self.kernels[kernel]
        first = op_label(self.dag.nodes[nodes[0]].op, nodes[0])
        return first if len(nodes) == 1 else f"{{{first} +{len(nodes) - 1}}}"

    def ordered(self) -> list[int]:
        """Kernel ids in order of their first node."""
        return sorted(self.kernels, key=lambda k: self.kernels[k][0])


def _owner_op(value: SSAValue) -> Operation | None:
    owner = value.owner
    return owner if isinstance(owner, Operation) else None


def kernel_cycle(plan: Plan) -> list[int] | None:
    """Kernels left over when the kernel graph is sorted topologically (a cycle among
    them), or None: the invariant every change keeps, checked by the tests."""
    waiting = {k: 0 for k in plan.kernels}
    edges = {k: plan.consumers(k) for k in plan.kernels}
    for targets in edges.values():
        for target in targets:
            waiting[target] += 1
    ready = [k for k, count in waiting.items() if count == 0]
    done = 0
    while ready:
        kernel = ready.pop()
        done += 1
        for target in edges[kernel]:
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    if done == len(waiting):
        return None
    return sorted(k for k, count in waiting.items() if count > 0)
