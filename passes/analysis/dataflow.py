"""The op DAG of one function body, as the fusion analyses see it (TVM's IndexedForwardGraph).

Nodes are the ops of the function's block in IR order, which is a topological order:
constants are left out (they are kernel inputs, never kernels) and so is the terminator.
An edge runs from a producer to each consumer of one of its results and carries the kind
the consumer imposes on that use: the consumer's fusion kind, except that an elementwise or
broadcast consumer reading an operand of another shape than its result broadcasts it (TVM
marks a broadcast op elementwise on operands of the result's shape). A node whose result
is returned is `extern_ref`: its value must exist outside any kernel it could join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind, fusion_kind
from graphfuse.passes.analysis.kernel_stats import elements


@dataclass(frozen=True)
class Edge:
    """A use of a producer's result by `consumer`, with the kind that use imposes."""

    consumer: int
    kind: FusionKind


@dataclass
class Node:
    """One op of the DAG; `index` is its position among the nodes in IR order."""

    index: int
    op: Operation
    kind: FusionKind
    outputs: list[Edge] = field(default_factory=list[Edge])
    inputs: list[int] = field(default_factory=list[int])
    extern_ref: bool = False
    size: int = 1
    """Ops the node stands for in a kernel (`op_count`), for the max-depth limit."""
    elements: int = 0
    """Elements of its largest result (fusion legality compares sizes on every trial)."""
    reduced: int | None = None
    """For a reduction, the elements of its input."""


def _shape(value: SSAValue) -> tuple[int, ...] | None:
    typ = value.type
    return typ.get_shape() if isinstance(typ, TensorType) else None


def is_preformed(op: Operation) -> bool:
    """A kernel a fusion pattern formed: the partitioner keeps it whole and may grow it."""
    return isinstance(op, graph.FusedOp) and op.pattern is not None


def node_kind(op: Operation) -> FusionKind:
    """An op's fusion kind as a DAG node: a pre-formed kernel counts as its recorded kind."""
    if isinstance(op, graph.FusedOp) and is_preformed(op):
        return op.kind.data
    return fusion_kind(op)


def op_count(op: Operation) -> int:
    """Ops `op` puts into a kernel: a pre-formed kernel its own (constants and the yield
    aside, as outlining leaves them out), any other op one."""
    if not is_preformed(op):
        return 1
    assert isinstance(op, graph.FusedOp)
    skip = graph.ConstantOp | graph.YieldOp
    return sum(1 for inner in op.body.block.ops if not isinstance(inner, skip))


def edge_kind(consumer: Operation, operand: SSAValue) -> FusionKind:
    """The kind a consumer imposes on one operand (TVM's edge pattern)."""
    kind = node_kind(consumer)
    if kind not in (FusionKind.ELEMWISE, FusionKind.BROADCAST) or not consumer.results:
        return kind
    same_shape = _shape(operand) == _shape(consumer.results[0])
    return FusionKind.ELEMWISE if same_shape else FusionKind.BROADCAST


def is_node_op(op: Operation) -> bool:
    """Ops that are DAG nodes: everything but constants and the function's terminator."""
    return not isinstance(op, graph.ConstantOp | func.ReturnOp)


@dataclass
class DataflowGraph:
    """The DAG of a block's ops (see module docstring); `nodes` are in IR order."""

    nodes: list[Node]
    index_of: dict[Operation, int]

    @staticmethod
    def from_block(block: Block) -> DataflowGraph:
        nodes: list[Node] = []
        index_of: dict[Operation, int] = {}
        for op in block.ops:
            if is_node_op(op):
                index_of[op] = len(nodes)
                nodes.append(_node(len(nodes), op))
        for node in nodes:
            _link_operands(node, nodes, index_of)
        return DataflowGraph(nodes, index_of)

    def __len__(self) -> int:
        return len(self.nodes)

    def label(self, index: int) -> str:
        """`graph.add %sum` (or `graph.add #7` for an unnamed result): names an op in reports."""
        return op_label(self.nodes[index].op, index)


def _node(index: int, op: Operation) -> Node:
    largest = max((elements(r) for r in op.results), default=0)
    reduced = elements(op.input) if isinstance(op, graph.ReduceOp) else None
    return Node(index, op, node_kind(op), size=op_count(op), elements=largest, reduced=reduced)


def _link_operands(node: Node, nodes: Sequence[Node], index_of: dict[Operation, int]) -> None:
    seen: set[int] = set()
    for operand in node.op.operands:
        owner = operand.owner
        if not isinstance(owner, Operation) or owner not in index_of:
            continue
        producer = index_of[owner]
        nodes[producer].outputs.append(Edge(node.index, edge_kind(node.op, operand)))
        if producer not in seen:
            seen.add(producer)
            node.inputs.append(producer)
    for result in node.op.results:
        if any(use.operation not in index_of for use in result.uses):
            node.extern_ref = True


def op_label(op: Operation, index: int | None = None) -> str:
    """An op's name and its first result's name, for diagnostics and reports."""
    if op.results and op.results[0].name_hint:
        return f"{op.name} %{op.results[0].name_hint}"
    return f"{op.name} #{index}" if index is not None else op.name
