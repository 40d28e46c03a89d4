"""The partitioner's pure pieces: union-find groups, rule table, cycle safeguard."""

from __future__ import annotations

import numpy as np
from xdsl.context import Context

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.passes.analysis.dataflow import DataflowGraph
from graphfuse.passes.fusion.fusion_rules import RULES, Phase, rule_for
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.passes.fusion.graph_fuse_patterns import fuse_patterns
from graphfuse.passes.fusion.partition import GroupSet, Partitioner
from tests.conftest import parse

T = "tensor<8xf32>"


def _dag(body: str, results: str = "%c") -> tuple[DataflowGraph, dict[str, int]]:
    text = f"func.func @main(%x: {T}) -> {T} {{\n{body}\n  func.return {results} : {T}\n}}"
    function = next(iter(parse(text).ops))
    dag = DataflowGraph.from_block(function.body.block)
    return dag, {n.op.results[0].name_hint: n.index for n in dag.nodes}


_SKIP_BODY = "\n".join(
    [
        f"  %a = graph.exp %x : {T}",
        f"  %b = graph.sort %a axis = 0 : {T}",
        f"  %c = graph.add %a, %b : ({T}, {T}) -> {T}",
    ]
)


def test_union_find_merge_keeps_members_and_anchor_kind():
    dag, names = _dag(_SKIP_BODY)
    groups = GroupSet(dag)
    groups.merge(names["a"], names["c"])
    assert groups.find(names["a"]) == groups.find(names["c"]) == names["c"]
    assert groups.groups() == [[names["a"], names["c"]], [names["b"]]]
    assert groups.root_kind(names["a"]) is FusionKind.ELEMWISE


def test_cycle_safeguard_finds_path_through_outside_op():
    # a -> sort -> c and a -> c: putting a and c in one kernel with the sort outside would
    # make the kernel both feed and consume the sort.
    dag, names = _dag(_SKIP_BODY)
    partitioner = Partitioner(dag, max_depth=256)
    assert partitioner._cycle_through([names["a"], names["c"]]) == names["b"]
    assert partitioner._cycle_through([names["a"], names["b"], names["c"]]) is None


def test_opaque_path_is_rejected_with_reason():
    dag, names = _dag(_SKIP_BODY)
    partitioner = Partitioner(dag, max_depth=256)
    groups = partitioner.run()
    assert [names["a"]] in groups and [names["c"]] in groups
    reasons = [d.reason for d in partitioner.decisions if d.source == names["a"] and not d.accepted]
    # The path from a to its post-dominator c runs through the sort: an opaque edge.
    assert "elemwise-into-consumer: the edges to it are opaque" in reasons


def test_rule_table_covers_tvm_phases():
    assert rule_for(Phase.ANCHORS, FusionKind.OUT_ELEMWISE_FUSABLE).name == "anchor-epilogue"
    assert rule_for(Phase.INJECTIVE, FusionKind.OUT_ELEMWISE_FUSABLE) is None
    assert rule_for(Phase.ANCHORS, FusionKind.INJECTIVE) is None  # deferred to phase 1
    assert rule_for(Phase.INJECTIVE, FusionKind.INJECTIVE).name == "injective-chain"
    assert rule_for(Phase.INJECTIVE, FusionKind.ELEMWISE).name == "elemwise-into-consumer"
    assert rule_for(Phase.TUPLES, FusionKind.ELEMWISE).name == "into-fused-tuple"
    for kind in (FusionKind.REDUCTION, FusionKind.OPAQUE):
        assert all(rule_for(phase, kind) is None for phase in Phase)
    assert all(FusionKind.OPAQUE not in rule.path | rule.sink for rule in RULES)


def test_max_depth_counts_the_merged_kernel():
    body = "\n".join(
        [f"  %a = graph.exp %x : {T}", f"  %b = graph.neg %a : {T}", f"  %c = graph.tanh %b : {T}"]
    )
    dag, names = _dag(body)
    partitioner = Partitioner(dag, max_depth=2)
    assert partitioner.run() == [[names["a"], names["b"]], [names["c"]]]
    rejected = [d for d in partitioner.decisions if not d.accepted and d.source == names["b"]]
    assert "the kernel would have 3 ops, over max-depth=2" in rejected[0].reason


_PREFORMED = """
func.func @main(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>, %b: tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %a = graph.add %c, %b : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %r = graph.relu %a : tensor<1x2x4x4xf32>
  %m = graph.neg %r : tensor<1x2x4x4xf32>
  %t = graph.tanh %m : tensor<1x2x4x4xf32>
  func.return %t : tensor<1x2x4x4xf32>
}"""
_SHAPES = ((1, 2, 4, 4), (2, 2, 1, 1), (1, 2, 1, 1))


def _preformed_dag() -> tuple[DataflowGraph, dict[str, int]]:
    """conv2d+add+relu pre-formed by a fusion pattern (one node of three ops), neg, tanh."""
    module = parse(_PREFORMED)
    assert fuse_patterns(module) == 1
    function = next(iter(module.ops))
    dag = DataflowGraph.from_block(function.body.block)
    return dag, {n.op.results[0].name_hint: n.index for n in dag.nodes}


def test_max_depth_counts_the_ops_of_a_preformed_kernel():
    dag, names = _preformed_dag()
    assert [node.size for node in dag.nodes] == [3, 1, 1]
    partitioner = Partitioner(dag, max_depth=4)
    assert partitioner.run() == [[names["r"], names["m"]], [names["t"]]]
    rejected = [d for d in partitioner.decisions if not d.accepted]
    assert "the kernel would have 5 ops, over max-depth=4" in rejected[0].reason


def test_preformed_kernel_over_max_depth_is_opened():
    module = parse(_PREFORMED)
    x, w, b = (np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in _SHAPES)
    before = reference.run(module, "main", x, w, b)
    GraphFusePass(max_depth=2).apply(Context(), module)
    kernels = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    skip = graph.ConstantOp | graph.YieldOp
    sizes = [sum(not isinstance(o, skip) for o in k.body.block.ops) for k in kernels]
    assert sizes and max(sizes) <= 2
    np.testing.assert_array_equal(reference.run(module, "main", x, w, b)[0], before[0])
