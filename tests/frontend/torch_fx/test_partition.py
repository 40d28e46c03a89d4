"""The torch.fx front end on its own, with no compiler: an ATen graph split into the
partitions graphfuse supports, each imported to a graph-dialect module on request."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphfuse.frontend.torch_fx.partition import split
from graphfuse.frontend.torch_fx.typed_torch import core_aten_table


def _cumulative_middle(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.cumsum(torch.tanh(x) * 2, dim=1)) + 1


def _aten(x: torch.Tensor) -> torch.fx.GraphModule:
    return make_fx(_cumulative_middle, decomposition_table=core_aten_table())(x)


def test_split_leaves_unsupported_ops_between_partitions() -> None:
    graph = split(_aten(torch.randn(4, 6)), {})
    assert graph.eager == ["aten.cumsum.default"]
    assert [p.ops for p in graph.partitions] == [
        ["tanh.default", "mul.Tensor"],
        ["relu.default", "add.Tensor"],
    ]
    assert [len(p.inputs) for p in graph.partitions] == [1, 1]


def test_partition_imports_as_a_graph_function() -> None:
    first = split(_aten(torch.randn(4, 6)), {}).partitions[0]
    text = str(first.import_module())
    assert "func.func @main(%0: tensor<4x6xf32>) -> tensor<4x6xf32>" in text
    assert "graph.tanh %0" in text and "graph.mul" in text


def test_frozen_placeholder_is_a_constant_of_the_module() -> None:
    def scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * w

    aten = make_fx(scaled, decomposition_table=core_aten_table())(torch.randn(2, 3), torch.ones(3))
    weight = torch.full((3,), 0.5).numpy()
    (partition,) = split(aten, {1: weight}).partitions
    assert len(partition.inputs) == 1
    text = str(partition.import_module())
    assert "func.func @main(%0: tensor<2x3xf32>)" in text
    assert "dense<5.000000e-01> : tensor<3xf32>" in text
