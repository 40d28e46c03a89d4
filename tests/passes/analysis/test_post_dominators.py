"""Post-dominator tree on textbook DAGs: chain, diamond, nested diamonds, outputs, dead values."""

from __future__ import annotations

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.analysis.dataflow import DataflowGraph
from graphfuse.passes.analysis.post_dominators import PostDominatorTree, nodes_between
from tests.conftest import parse

T = "tensor<8xf32>"


def _analyse(body: str, results: str, result_types: str):
    text = f"func.func @main(%x: {T}) -> ({result_types}) {{\n{body}\n  func.return {results} : {result_types}\n}}"
    function = next(iter(parse(text).ops))
    dag = DataflowGraph.from_block(function.body.block)
    names = {node.op.results[0].name_hint: node.index for node in dag.nodes}
    return dag, PostDominatorTree.build(dag), names


def _unary(name: str, op: str, operand: str) -> str:
    return f"  %{name} = graph.{op} %{operand} : {T}"


def _add(name: str, lhs: str, rhs: str) -> str:
    return f"  %{name} = graph.add %{lhs}, %{rhs} : ({T}, {T}) -> {T}"


def _parents(tree, names):
    inverse = {index: name for name, index in names.items()}
    return {
        name: (None if tree.immediate(i) is None else inverse[tree.immediate(i)])
        for name, i in names.items()
    }


def test_post_dominators_chain():
    body = "\n".join([_unary("a", "exp", "x"), _unary("b", "neg", "a"), _unary("c", "tanh", "b")])
    _, tree, names = _analyse(body, "%c", T)
    assert _parents(tree, names) == {"a": "b", "b": "c", "c": None}
    assert [tree.depth[names[n]] for n in "abc"] == [3, 2, 1]


def test_post_dominators_diamond():
    body = "\n".join(
        [
            _unary("a", "exp", "x"),
            _unary("l", "neg", "a"),
            _unary("r", "tanh", "a"),
            _add("j", "l", "r"),
        ]
    )
    dag, tree, names = _analyse(body, "%j", T)
    assert _parents(tree, names) == {"a": "j", "l": "j", "r": "j", "j": None}
    assert nodes_between(dag, names["a"], names["j"]) == sorted(
        [names["l"], names["r"], names["j"]]
    )
    assert tree.lca(names["l"], names["r"]) == names["j"]
    assert tree.kind[names["a"]] is FusionKind.ELEMWISE


def test_post_dominators_nested_diamonds():
    body = "\n".join(
        [
            _unary("a", "exp", "x"),
            _unary("b", "neg", "a"),
            _unary("c", "tanh", "b"),
            _unary("d", "abs", "b"),
            _add("e", "c", "d"),  # inner diamond b -> {c, d} -> e
            _unary("f", "sigmoid", "a"),
            _add("g", "e", "f"),  # outer diamond a -> {b.., f} -> g
        ]
    )
    dag, tree, names = _analyse(body, "%g", T)
    parents = _parents(tree, names)
    assert parents["b"] == "e" and parents["a"] == "g" and parents["e"] == "g"
    assert tree.dominates(names["g"], names["b"])
    assert not tree.dominates(names["e"], names["f"])
    between = nodes_between(dag, names["a"], names["g"])
    assert between == sorted(names[n] for n in "bcdefg")


def test_post_dominators_several_outputs_meet_at_virtual_sink():
    body = "\n".join([_unary("a", "exp", "x"), _unary("b", "neg", "a"), _unary("c", "tanh", "a")])
    dag, tree, names = _analyse(body, "%b, %c", f"{T}, {T}")
    assert _parents(tree, names) == {"a": None, "b": None, "c": None}
    assert tree.lca(names["b"], names["c"]) is None
    assert not dag.nodes[names["a"]].extern_ref and dag.nodes[names["b"]].extern_ref


def test_post_dominators_returned_value_has_no_post_dominator():
    body = "\n".join([_unary("a", "exp", "x"), _unary("b", "neg", "a")])
    dag, tree, names = _analyse(body, "%a, %b", f"{T}, {T}")
    assert dag.nodes[names["a"]].extern_ref
    assert tree.immediate(names["a"]) is None


def test_post_dominators_dead_value_flows_to_sink():
    body = "\n".join(
        [_unary("a", "exp", "x"), _unary("dead", "neg", "a"), _unary("b", "tanh", "a")]
    )
    _, tree, names = _analyse(body, "%b", T)
    # `a` feeds a dead value and `b`: the paths meet only at the virtual sink.
    assert _parents(tree, names) == {"a": None, "dead": None, "b": None}


def test_post_dominator_edge_kind_combines_paths():
    body = "\n".join(
        [
            f"  %a = graph.exp %x : {T}",
            "  %s = graph.reduce_sum %a axes = [0] : tensor<8xf32> -> tensor<f32>",
            f"  %b = graph.add %a, %s : ({T}, tensor<f32>) -> {T}",
        ]
    )
    _, tree, names = _analyse(body, "%b", T)
    assert tree.immediate(names["a"]) == names["b"]
    # One path crosses the reduction: the combined kind is reduction.
    assert tree.kind[names["a"]] is FusionKind.REDUCTION
    # The reduction's result reaches `add` broadcast (scalar to 8 elements).
    assert tree.kind[names["s"]] is FusionKind.BROADCAST
