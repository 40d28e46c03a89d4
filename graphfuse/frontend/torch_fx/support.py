"""Which fx nodes graphfuse computes: torch.fx's OperatorSupport, answered by aten_table.

A node is supported when its overload is in ATEN_OPS, every tensor it takes and gives has
a static shape on the CPU and a dtype its entry lists, its entry accepts the call, and
only results graphfuse computes are read. Views of a graph input, and views the graph
returns, stay eager: torch expects those outputs to alias, and a compiled kernel would
hand back a copy. CapabilityBasedPartitioner groups supported nodes into partitions.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch._ops import OpOverload
from torch.fx.passes.operator_support import OperatorSupportBase

from graphfuse.frontend.torch_fx.aten_call import AtenOp
from graphfuse.frontend.torch_fx.aten_table import ATEN_OPS, VIEWS
from graphfuse.frontend.torch_fx.typed_torch import overload_of

NO_WORK: frozenset[OpOverload] = VIEWS | {torch.ops.aten.clone.default}
"""Ops that move no data in the graph dialect: a partition of only these stays eager."""


def _tensors(value: Any) -> Iterator[Any]:
    """The fake tensors (or other values) in a node's `val`, one level of tuple deep."""
    if isinstance(value, tuple | list):
        yield from value
    else:
        yield value


def _plain_tensor(value: Any, dtypes: frozenset[torch.dtype]) -> bool:
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return False
    # A dynamic size is a SymInt, although torch.Size declares its items int.
    return value.dtype in dtypes and not any(isinstance(d, torch.SymInt) for d in value.shape)


def _input_nodes(node: torch.fx.Node) -> Iterator[torch.fx.Node]:
    yield from node.all_input_nodes


class AtenSupport(OperatorSupportBase):
    """Supported nodes of an ATen graph whose `frozen` placeholders hold constant weights."""

    def __init__(self, frozen: set[torch.fx.Node]) -> None:
        self.frozen = frozen

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            return self._getitem_supported(node)
        entry = entry_of(node)
        if entry is None or not self._types_supported(node, entry) or not entry.accepts(node):
            return False
        if isinstance(node.meta.get("val"), tuple | list) and not all(
            _reads_computed_result(user, entry) for user in node.users
        ):
            return False
        return not (overload_of(node) in VIEWS and self._aliases_outside(node))

    def _getitem_supported(self, node: torch.fx.Node) -> bool:
        source = node.args[0]
        if not isinstance(source, torch.fx.Node):
            return False
        return entry_of(source) is not None and self.is_node_supported({}, source)

    def _types_supported(self, node: torch.fx.Node, entry: AtenOp) -> bool:
        results = list(_tensors(node.meta.get("val")))[: entry.results]
        if not results or not all(_plain_tensor(r, entry.dtypes) for r in results):
            return False
        return all(_plain_tensor(i.meta.get("val"), entry.dtypes) for i in _input_nodes(node))

    def _aliases_outside(self, node: torch.fx.Node) -> bool:
        """A view that the graph returns, or one of a graph input (through other views)."""
        readers = [
            *node.users,
            *(r for u in node.users if u.target is operator.getitem for r in u.users),
        ]
        if any(reader.op == "output" for reader in readers):
            return True
        source = node
        while source.op == "call_function" and overload_of(source) in VIEWS:
            first = source.args[0]
            if not isinstance(first, torch.fx.Node):
                return False
            source = first
        return source.op == "placeholder" and source not in self.frozen


def entry_of(node: torch.fx.Node) -> AtenOp | None:
    """The table's entry for the node's op overload, if it has one."""
    overload = overload_of(node)
    return None if overload is None else ATEN_OPS.get(overload)


def _reads_computed_result(user: torch.fx.Node, entry: AtenOp) -> bool:
    return (
        user.op == "call_function"
        and user.target is operator.getitem
        and isinstance(user.args[1], int)
        and user.args[1] < entry.results
    )
