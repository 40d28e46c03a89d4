"""Graphviz picture of a fused function: one cluster per kernel, edges along the dataflow.

Ops inside a `graph.fused` are drawn in that kernel's cluster; a value crossing kernels is
drawn from the op that computes it (found through the producer's `graph.yield`) to the op
that reads it, so the picture shows ops, not kernel boundaries, as its nodes.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from graphfuse.dialects import graph


class _DotWriter:
    def __init__(self, function: func.FuncOp):
        self.function = function
        self.ids: dict[Operation, str] = {}
        self.lines: list[str] = []

    def node_id(self, op: Operation) -> str:
        if op not in self.ids:
            self.ids[op] = f"n{len(self.ids)}"
        return self.ids[op]

    def source_of(self, value: SSAValue) -> str:
        """The drawn node that computes `value`."""
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            if isinstance(owner, graph.FusedOp):
                return self.source_of(owner.inputs[value.index])
            return f"arg{value.index}"
        assert isinstance(value, OpResult)
        producer = value.op
        if isinstance(producer, graph.FusedOp):
            terminator = producer.body.block.last_op
            assert terminator is not None
            return self.source_of(terminator.operands[value.index])
        return self.node_id(producer)

    def draw_op(self, op: Operation, indent: str) -> None:
        label = op.name.removeprefix("graph.")
        self.lines.append(f'{indent}{self.node_id(op)} [label="{label}"];')

    def edges_into(self, op: Operation) -> None:
        for operand in op.operands:
            if isinstance(operand, OpResult) and isinstance(operand.op, graph.ConstantOp):
                continue
            self.lines.append(f"  {self.source_of(operand)} -> {self.node_id(op)};")

    def render(self) -> str:
        name = self.function.sym_name.data
        self.lines = [f'digraph "{name}" {{', "  rankdir=TB;", "  node [shape=box];"]
        for index, _ in enumerate(self.function.body.block.args):
            self.lines.append(f'  arg{index} [label="%arg{index}", shape=ellipse];')
        drawn: list[Operation] = []
        for position, op in enumerate(self.function.body.block.ops):
            if isinstance(op, graph.FusedOp):
                self._draw_kernel(op, position, drawn)
            elif isinstance(op, func.ReturnOp):
                self.lines.append('  ret [label="return", shape=ellipse];')
                for operand in op.operands:
                    self.lines.append(f"  {self.source_of(operand)} -> ret;")
            elif not isinstance(op, graph.ConstantOp):
                self.draw_op(op, "  ")
                drawn.append(op)
        for op in drawn:
            self.edges_into(op)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _draw_kernel(self, op: graph.FusedOp, position: int, drawn: list[Operation]) -> None:
        self.lines.append(f"  subgraph cluster_{position} {{")
        self.lines.append(f'    label="{op.sym_name.data} ({op.kind.data.value})";')
        for inner in op.body.block.ops:
            if not isinstance(inner, graph.YieldOp | graph.ConstantOp):
                self.draw_op(inner, "    ")
                drawn.append(inner)
        self.lines.append("  }")


def function_to_dot(function: func.FuncOp) -> str:
    """The Graphviz text of one function."""
    return _DotWriter(function).render()
