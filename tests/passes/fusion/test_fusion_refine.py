"""The refinement's pure pieces: cost model, kernel plan with copies, legality, each step."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.passes.analysis.cost_model import CPU_HOST, H100, KernelCost, Target, op_flops
from graphfuse.passes.analysis.dataflow import DataflowGraph
from graphfuse.passes.fusion.fusion_legality import Limits, _describe, duplicable, violations
from graphfuse.passes.fusion.fusion_refine import RefineOptions, Refiner
from graphfuse.passes.fusion.graph_fuse import GraphFusePass, fuse_function
from graphfuse.passes.fusion.kernel_plan import Change, Plan, kernel_cycle
from graphfuse.passes.fusion.partition import Partitioner
from graphfuse.testing.random_graphs import random_graph
from tests.conftest import parse

M = "tensor<64x32xf32>"
ROW = "tensor<64x1xf32>"
LIMITS = Limits(max_ops=256, max_inputs=64, max_results=8, stitch=True)


def _function(body: str, args: str, results: str, types: str) -> func.FuncOp:
    text = f"func.func @main({args}) -> ({types}) {{\n{body}\n  func.return {results} : {types}\n}}"
    function = next(iter(parse(text).ops))
    assert isinstance(function, func.FuncOp)
    return function


def _plan(function: func.FuncOp, groups: list[list[str]]) -> tuple[Plan, dict[str, int]]:
    dag = DataflowGraph.from_block(function.body.block)
    names = {n.op.results[0].name_hint or "": n.index for n in dag.nodes}
    members = [[names[name] for name in group] for group in groups]
    return Plan.from_groups(dag, members, CPU_HOST, set()), names


def test_kernel_cost_roofline_memory_and_compute_bound():
    target = Target("t", bandwidth=1e9, peak_flops=1e9, launch=1e-6)
    memory_bound = KernelCost(bytes_read=1000, bytes_written=1000, flops=10)
    compute_bound = KernelCost(bytes_read=10, bytes_written=10, flops=5000)
    assert memory_bound.time(target) == pytest.approx(1e-6 + 2e-6)
    assert compute_bound.time(target) == pytest.approx(1e-6 + 5e-6)
    assert memory_bound.time(H100) < memory_bound.time(CPU_HOST)


def test_op_flops_matmul_and_elementwise():
    function = _function(
        "  %m = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>\n"
        "  %e = graph.exp %m : tensor<4x16xf32>",
        "%a: tensor<4x8xf32>, %b: tensor<8x16xf32>",
        "%e",
        "tensor<4x16xf32>",
    )
    matmul, exp = list(function.body.block.ops)[:2]
    assert op_flops(matmul) == 2 * 4 * 16 * 8
    assert op_flops(exp) == 4 * 16 * 10


_BROADCAST_TWO_USERS = (
    "  %p = graph.broadcast_to %v : tensor<32xf32> -> tensor<64x32xf32>\n"
    f"  %a = graph.exp %p : {M}\n"
    f"  %b = graph.neg %p : {M}"
)


def test_plan_copy_is_not_written_and_its_input_is_read():
    function = _function(_BROADCAST_TWO_USERS, "%v: tensor<32xf32>", "%a, %b", f"{M}, {M}")
    plan, names = _plan(function, [["p", "a"], ["b"]])
    second = plan.ordered()[1]
    before = plan.cost(second)
    undo = plan.apply(Change((second,), (frozenset({names["p"], names["b"]}),)))
    copy = undo.added_ids[0]
    first = plan.ordered()[0]
    assert plan.written(first) == [plan.dag.nodes[names["a"]].op.results[0]]  # %p not stored
    assert [v.name_hint for v in plan.read(copy)] == ["v"]
    assert plan.cost(copy).bytes_read < before.bytes_read
    assert kernel_cycle(plan) is None
    plan.undo(undo)
    assert plan.cost(second) == before


def test_priority_fusion_recomputes_broadcast_when_merging_all_is_over_limit():
    function = _function(_BROADCAST_TWO_USERS, "%v: tensor<32xf32>", "%a, %b", f"{M}, {M}")
    refine = RefineOptions(Limits(2, 64, 8, True))
    result = fuse_function(function, 2, refine)
    assert result.copies == 1
    assert any("recomputed in 2 consumers" in line for line in result.lines)
    assert any("over max-ops=2" in line for line in result.lines)


def test_no_recompute_option_keeps_the_producer_kernel():
    function = _function(_BROADCAST_TWO_USERS, "%v: tensor<32xf32>", "%a, %b", f"{M}, {M}")
    refine = RefineOptions(Limits(2, 64, 8, True), recompute=False)
    assert fuse_function(function, 2, refine).copies == 0


_SOFTMAX = "\n".join(
    [
        f"  %m = graph.reduce_max %x axes = [1] keepdims : {M} -> {ROW}",
        f"  %s = graph.sub %x, %m : ({M}, {ROW}) -> {M}",
        f"  %e = graph.exp %s : {M}",
        f"  %t = graph.reduce_sum %e axes = [1] keepdims : {M} -> {ROW}",
        f"  %y = graph.div %e, %t : ({M}, {ROW}) -> {M}",
    ]
)


def test_violations_stitching_allowed_only_when_on():
    function = _function(_SOFTMAX, f"%x: {M}", "%y", M)
    dag = DataflowGraph.from_block(function.body.block)
    everything = range(len(dag))
    assert violations(dag, everything, stitch=True) == set()
    assert violations(dag, everything, stitch=False) != set()


def test_reductions_are_never_duplicable():
    function = _function(_SOFTMAX, f"%x: {M}", "%y", M)
    plan, _ = _plan(function, [["m"], ["s", "e"], ["t"], ["y"]])
    kernels = plan.ordered()
    assert not duplicable(plan, kernels[0])
    assert duplicable(plan, kernels[1])


def test_fusion_merger_alone_stitches_softmax():
    """With priority fusion off, the merger merges wherever bytes do not grow."""
    function = _function(_SOFTMAX, f"%x: {M}", "%y", M)
    refine = RefineOptions(LIMITS, priority=False, multi_output=False, horizontal=False)
    lines = fuse_function(function, 256, refine).lines
    assert any(line.startswith("@main: [merger]") for line in lines)
    kernels = [op for op in function.body.block.ops if op.name == "graph.fused"]
    assert len(kernels) == 1


def test_rollback_splits_a_kernel_that_saves_no_bytes():
    function = _function(
        f"  %a = graph.exp %x : {M}\n  %b = graph.neg %x : {M}", f"%x: {M}", "%a, %b", f"{M}, {M}"
    )
    plan, _ = _plan(function, [["a", "b"]])
    # exp and neg share %x, so together they read it once: that saves bytes, kept.
    refiner = Refiner(plan, RefineOptions(LIMITS))
    refiner.rollback()
    assert len(plan.kernels) == 1
    function = _function(
        f"  %a = graph.exp %x : {M}\n  %b = graph.neg %z : {M}",
        f"%x: {M}, %z: {M}",
        "%a, %b",
        f"{M}, {M}",
    )
    plan, _ = _plan(function, [["a", "b"]])
    refiner = Refiner(plan, RefineOptions(LIMITS))
    refiner.rollback()
    assert len(plan.kernels) == 2
    assert refiner.log[0].startswith("[rollback]")


def test_limits_split_a_partitioner_kernel_over_max_inputs():
    function = _function(
        f"  %a = graph.add %x, %y : ({M}, {M}) -> {M}\n  %b = graph.add %a, %z : ({M}, {M}) -> {M}",
        f"%x: {M}, %y: {M}, %z: {M}",
        "%b",
        M,
    )
    plan, _ = _plan(function, [["a", "b"]])
    refiner = Refiner(plan, RefineOptions(Limits(256, 2, 8, True)))
    refiner.enforce_limits()
    assert len(plan.kernels) == 2
    assert "max-inputs=2" in refiner.log[0]


def test_graph_fuse_rejects_bad_options():
    module = parse(f"func.func @main(%x: {M}) -> {M} {{\n  func.return %x : {M}\n}}")
    with pytest.raises(PassFailedException, match="unknown target 'tpu'; valid targets: cpu, h100"):
        GraphFusePass(target="tpu").apply(Context(), module)
    with pytest.raises(PassFailedException, match="max-inputs must be >= 1"):
        GraphFusePass(max_inputs=0).apply(Context(), module)


def test_priority_fusion_measures_stale_entries_again():
    """A queued fusion measured before a later commit can close a cycle through the
    kernel that commit formed: it must be measured again (this graph hung the levels)."""
    function = next(iter(parse(random_graph(26, 177809803)).ops))
    assert isinstance(function, func.FuncOp)
    limits = Limits(max_ops=256, max_inputs=64, max_results=8, stitch=False)
    dag = DataflowGraph.from_block(function.body.block)
    plan = Plan.from_groups(dag, Partitioner(dag, 256).run(), CPU_HOST, set())
    Refiner(plan, RefineOptions(limits)).run()
    assert kernel_cycle(plan) is None


def test_plan_cached_costs_match_fresh_ones_after_changes():
    function = next(iter(parse(random_graph(30, 5)).ops))
    assert isinstance(function, func.FuncOp)
    dag = DataflowGraph.from_block(function.body.block)
    plan = Plan.from_groups(dag, Partitioner(dag, 256).run(), CPU_HOST, set())
    refiner = Refiner(plan, RefineOptions(LIMITS))
    refiner.run()
    assert any(line.startswith("[priority]") for line in refiner.log)
    for kernel in plan.kernels:
        cached = plan.cost(kernel)
        del plan.costs[kernel]
        assert plan.cost(kernel) == cached


_Q = "tensor<2x16x8xf32>"
_KT = "tensor<2x8x16xf32>"
_S = "tensor<2x16x16xf32>"


def _anchor_prologue(producers: str) -> set[tuple[int, int]]:
    """The violations of one kernel of `producers` and the matmul of %q with their %kt."""
    body = f"{producers}\n  %s = graph.matmul %q, %kt : ({_Q}, {_KT}) -> {_S}"
    function = _function(body, f"%q: {_Q}, %k: {_Q}", "%s", _S)
    dag = DataflowGraph.from_block(function.body.block)
    return violations(dag, range(len(dag)), stitch=True)


def test_violations_let_a_transpose_into_its_matmul():
    """Attention's K^T: a permutation of the matmul's load indices, nothing recomputed."""
    transpose = f"  %kt = graph.transpose %k perm = [0, 2, 1] : {_Q} -> {_KT}"
    assert _anchor_prologue(transpose) == set()
    # Two transposes in a row are still only a permutation.
    twice = "\n".join(
        [
            f"  %k2 = graph.transpose %k perm = [0, 2, 1] : {_Q} -> {_KT}",
            f"  %k3 = graph.transpose %k2 perm = [0, 2, 1] : {_KT} -> {_Q}",
            f"  %kt = graph.transpose %k3 perm = [0, 2, 1] : {_Q} -> {_KT}",
        ]
    )
    assert _anchor_prologue(twice) == set()


def test_violations_keep_arithmetic_out_of_a_matmul_and_let_reshapes_in():
    """Arithmetic upstream of the transpose would be recomputed per use. A reshape that
    merges dims costs a div/mod per read: it goes only into a matmul big enough to tile,
    whose packing reads each operand element once; one that splits dims is affine."""
    computed = "\n".join(
        [
            f"  %e = graph.exp %k : {_Q}",
            f"  %kt = graph.transpose %e perm = [0, 2, 1] : {_Q} -> {_KT}",
        ]
    )
    assert len(_anchor_prologue(computed)) == 1
    reshaped = f"  %kt = graph.reshape %k : {_Q} -> {_KT}"
    assert len(_anchor_prologue(reshaped)) == 1
    q, kt, s = "tensor<2x128x64xf32>", "tensor<2x64x128xf32>", "tensor<2x128x128xf32>"
    for source, producer in [
        (q, f"  %kt = graph.reshape %k : {q} -> {kt}"),
        ("tensor<2x64x8x16xf32>", f"  %kt = graph.reshape %k : tensor<2x64x8x16xf32> -> {kt}"),
    ]:
        body = f"{producer}\n  %s = graph.matmul %q, %kt : ({q}, {kt}) -> {s}"
        function = _function(body, f"%q: {q}, %k: {source}", "%s", s)
        dag = DataflowGraph.from_block(function.body.block)
        assert violations(dag, range(len(dag)), stitch=True) == set()


def test_graph_fuse_puts_attention_transpose_in_the_matmul_kernel():
    body = "\n".join(
        [
            f"  %kt = graph.transpose %k perm = [0, 2, 1] : {_Q} -> {_KT}",
            f"  %s = graph.matmul %q, %kt : ({_Q}, {_KT}) -> {_S}",
        ]
    )
    function = _function(body, f"%q: {_Q}, %k: {_Q}", "%s", _S)
    fuse_function(function, 256, RefineOptions(LIMITS))
    kernels = [op for op in function.body.block.ops if op.name == "graph.fused"]
    assert len(kernels) == 1
    assert [op.name for op in kernels[0].regions[0].block.ops][:2] == [
        "graph.transpose",
        "graph.matmul",
    ]


_IMAGE = "tensor<1x16x8x8xf32>"
_ROWS = "tensor<64x16xf32>"


def _layer_norm_after(layout: str, source: str) -> str:
    """A layer-norm over the last axis of `%rows`, which `layout` computes from %x."""
    return f"""func.func @main(%x: {source}, %g: tensor<16xf32>) -> {_ROWS} {{
{layout}
  %ln = graph.layer_norm %rows, %g, %g axis = 1 : ({_ROWS}, tensor<16xf32>, tensor<16xf32>) -> {_ROWS}
  func.return %ln : {_ROWS}
}}
"""


_UNFOLD = f"""  %v = graph.reshape %x : {_IMAGE} -> tensor<16x64xf32>
  %rows = graph.transpose %v perm = [1, 0] : tensor<16x64xf32> -> {_ROWS}"""
_MERGE = """  %a = graph.slice %x starts = [0, 0] strides = [2, 1] : tensor<128x8xf32> -> tensor<64x8xf32>
  %b = graph.slice %x starts = [1, 0] strides = [2, 1] : tensor<128x8xf32> -> tensor<64x8xf32>
  %rows = graph.concat %a, %b axis = 1 : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x16xf32>"""


@pytest.mark.parametrize(
    ("layout", "source"),
    [(_UNFOLD, _IMAGE), (_MERGE, "tensor<128x8xf32>")],
    ids=["transpose", "concat"],
)
def test_a_reduction_reads_its_rows_after_a_copy_not_through_layout_ops(layout, source):
    """MobileViT's unfold (NCHW image to patch rows) and Swin's patch merging (strided
    slices and a concat) before a layer-norm: the row kernel's passes would each redo the
    gather element by element, so the layout ops end in a copy kernel of their own, and
    the reduction never reads through them; the results stay the reference's."""
    text = _layer_norm_after(layout, source)
    module = parse(text)
    inputs = reference.random_inputs(reference.find_function(module, "main"), 0)
    before = reference.run(module, "main", *inputs)
    GraphFusePass().apply(Context(), module)
    kernels = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    for kernel in kernels:
        ops = list(kernel.body.block.ops)
        if any(isinstance(op, graph.ReduceOp) for op in ops):
            moved = (graph.TransposeOp, graph.SliceOp, graph.ConcatOp)
            assert not any(isinstance(op, moved) for op in ops), kernel.sym_name
    assert len(kernels) == 2
    after = reference.run(module, "main", *inputs)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)


def test_violations_name_the_layout_ops_a_reduction_would_read_through():
    body = "\n".join(
        [
            _UNFOLD,
            f"  %sum = graph.reduce_sum %rows axes = [1] keepdims : {_ROWS} -> tensor<64x1xf32>",
            f"  %c = graph.sub %rows, %sum : ({_ROWS}, tensor<64x1xf32>) -> {_ROWS}",
        ]
    )
    function = _function(body, f"%x: {_IMAGE}", "%c", _ROWS)
    dag = DataflowGraph.from_block(function.body.block)
    names = {n.op.results[0].name_hint: n.index for n in dag.nodes}
    found = violations(dag, range(len(dag)), stitch=True)
    assert found == {(names["rows"], names["sum"])}
    assert "%sum would read its rows through the layout ops of" in _describe(dag, min(found))
    # A reshape alone keeps the rows contiguous: no violation.
    reshaped = body.replace(
        "graph.transpose %v perm = [1, 0] : tensor<16x64xf32>",
        "graph.reshape %v : tensor<16x64xf32>",
    )
    function = _function(reshaped, f"%x: {_IMAGE}", "%c", _ROWS)
    dag = DataflowGraph.from_block(function.body.block)
    assert violations(dag, range(len(dag)), stitch=True) == set()
