"""The partitioner's pure pieces: union-find groups, rule table, cycle safeguard."""

from __future__ import annotations

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.dataflow import DataflowGraph
from graphfuse.passes.fusion_rules import RULES, Phase, rule_for
from graphfuse.passes.partition import GroupSet, Partitioner
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
