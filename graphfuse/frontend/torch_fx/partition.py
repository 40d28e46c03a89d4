"""An ATen graph split into the partitions graphfuse computes, each ready to import.

torch.fx's CapabilityBasedPartitioner groups the nodes support.AtenSupport accepts; each
group that computes something becomes a call of a sub-GraphModule in the fused graph. A
`Partition` holds what a driver needs to replace that call: the partition's graph-dialect
module (imported on request: from_fx), the inputs it takes at run time (frozen weights are
constants in the module), and `SplitGraph.install`, which makes the fused graph call a
kernel instead. Compiling is the driver's (graphfuse.torch_backend): the front end sits
below the compiler, so a partition left uncompiled simply stays an eager submodule.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from xdsl.dialects.builtin import ModuleOp

from graphfuse.frontend.onnx_builder import Array
from graphfuse.frontend.torch_fx.fx_import import constant_array, from_fx, placeholders
from graphfuse.frontend.torch_fx.support import NO_WORK, AtenSupport
from graphfuse.frontend.torch_fx.typed_torch import overload_of

PREFIX = "graphfuse_"
"""Names of the fx submodules graphfuse computes."""


@dataclass(frozen=True)
class Partition:
    """One supported partition, called as submodule `name` by `call` in the fused graph."""

    name: str
    call: torch.fx.Node
    graph: torch.fx.GraphModule
    """The partition's ATen graph (the submodule)."""
    constants: Mapping[int, Array]
    """Values of the submodule's inputs that are frozen weights or tensor constants, by
    position; the compiled function takes the others (`inputs`)."""
    inputs: tuple[torch.fx.Node, ...]
    """The fused graph's nodes the kernel takes at run time, in order."""

    def import_module(self) -> ModuleOp:
        """The partition as a verified graph-dialect module, `func.func @main` (raises
        ImportFailure, a GraphfuseError, naming the node it cannot import)."""
        return from_fx(self.graph, self.constants)

    @property
    def returns_tuple(self) -> bool:
        """Whether the submodule returns a tuple (its users index into it)."""
        output = next(n for n in self.graph.graph.nodes if n.op == "output")
        return isinstance(output.args[0], tuple)

    @property
    def ops(self) -> list[str]:
        """The ATen ops the partition computes, in graph order ("addmm.default", ...)."""
        return [
            str(n.target).removeprefix("aten.")
            for n in self.graph.graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem
        ]


@dataclass
class SplitGraph:
    """An ATen graph with its supported partitions as submodule calls (`module`), and the
    ATen ops left to eager PyTorch."""

    module: torch.fx.GraphModule
    partitions: list[Partition] = field(default_factory=list[Partition])
    eager: list[str] = field(default_factory=list[str])

    def install(self, partition: Partition, kernel: Callable[..., Any]) -> None:
        """Make the graph call `kernel` on the partition's run-time inputs in place of its
        submodule: a plain function call, cheaper than a module's. `kernel` needs a
        `__name__` and `__module__` (fx's code generator names it by them)."""
        graph = self.module.graph
        with graph.inserting_before(partition.call):
            node = graph.call_function(kernel, partition.inputs)
        node.meta = dict(partition.call.meta)
        partition.call.replace_all_uses_with(node)
        graph.erase_node(partition.call)
        self.module.delete_submodule(partition.name)

    def finish(self) -> torch.fx.GraphModule:
        """The graph module with every install done, its code generated again (now: its
        `forward` may be called directly, without the module's `__call__`)."""
        # GraphModule's own recompile: a lazy graph module's (Dynamo makes those) defers
        # the code to the first call, through a `forward` that goes back to `__call__`.
        torch.fx.GraphModule.recompile(self.module)
        return self.module


def split(aten: torch.fx.GraphModule, constants: Mapping[int, Array]) -> SplitGraph:
    """`aten` with the partitions graphfuse supports fused into submodules; `constants`
    gives the values of its placeholders (by position) that are frozen weights."""
    inputs = placeholders(aten)
    partitioner = CapabilityBasedPartitioner(
        aten, AtenSupport({inputs[i] for i in constants}), allows_single_node_partition=True
    )
    proposed = [p for p in partitioner.propose_partitions() if _does_work(p.nodes)]
    taken = {node for p in proposed for node in p.nodes}
    eager = [str(n.target) for n in aten.graph.nodes if n.op == "call_function" and n not in taken]
    if not proposed:
        return SplitGraph(aten, [], eager)
    fused = partitioner.fuse_partitions(proposed, prefix=PREFIX)
    # Fusing copies the graph's nodes (a topological sort): placeholders by position.
    frozen = {placeholders(fused)[i]: constant for i, constant in constants.items()}
    partitions = [
        _partition(fused, node, frozen)
        for node in fused.graph.nodes
        if node.op == "call_module" and str(node.target).startswith(PREFIX)
    ]
    return SplitGraph(fused, partitions, eager)


def _partition(
    fused: torch.fx.GraphModule, call: torch.fx.Node, frozen: Mapping[torch.fx.Node, Array]
) -> Partition:
    name = str(call.target)
    sub = fused.get_submodule(name)
    assert isinstance(sub, torch.fx.GraphModule), type(sub)
    constants: dict[int, Array] = {}
    runtime: list[torch.fx.Node] = []
    for index, arg in enumerate(call.args):
        assert isinstance(arg, torch.fx.Node), arg  # fuse_partitions passes nodes only
        if arg in frozen:
            constants[index] = frozen[arg]
        elif arg.op == "get_attr":
            constants[index] = constant_array(getattr(fused, str(arg.target)))
        else:
            runtime.append(arg)
    return Partition(name, call, sub, constants, tuple(runtime))


def _does_work(nodes: Iterable[torch.fx.Node]) -> bool:
    """Whether a partition computes anything (not only views, copies and getitems)."""
    return any(n.target is not operator.getitem and overload_of(n) not in NO_WORK for n in nodes)


def frozen_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of Dynamo's graph inputs that are a module's parameters or buffers (read
    from the source Dynamo records on each placeholder)."""
    found: list[int] = []
    for index, node in enumerate(placeholders(gm)):
        source: object = getattr(node.meta.get("grapharg"), "source", None)
        name: object = getattr(source, "name", "")
        if isinstance(name, str) and ("._parameters[" in name or "._buffers[" in name):
            found.append(index)
    return found
