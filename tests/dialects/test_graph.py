"""The graph dialect's Python API: fusion kinds, builders, purity (CSE/DCE apply)."""

from __future__ import annotations

import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType, f32, i32, i64
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import CompoundOp, FusionKind, FusionKindTrait, fusion_kind


def _function(*arg_shapes: tuple[int, ...]) -> tuple[ModuleOp, func.FuncOp]:
    types = [TensorType(f32, s) for s in arg_shapes]
    function = func.FuncOp("main", (types, []))
    return ModuleOp([function]), function


def test_fusion_kind_of_each_family():
    module, function = _function((4, 8), (8, 16))
    x, w = function.body.block.args
    with ImplicitBuilder(function.body.block):
        ops = {
            graph.ExpOp(x): FusionKind.ELEMWISE,
            graph.AddOp(x, x): FusionKind.ELEMWISE,
            graph.TransposeOp(x, [1, 0]): FusionKind.INJECTIVE,
            graph.ReduceSumOp(x, [1]): FusionKind.REDUCTION,
            graph.MatmulOp(
                operands=[x, w], result_types=[TensorType(f32, (4, 16))]
            ): FusionKind.OUT_ELEMWISE_FUSABLE,
            graph.SoftmaxOp.create(
                operands=[x],
                result_types=[x.type],
                properties={"axis": IntegerAttr(1, 64)},
            ): FusionKind.OPAQUE,
        }
        func.ReturnOp()
    module.verify()
    for op, kind in ops.items():
        assert fusion_kind(op) is kind, op.name


def test_fusion_kind_of_foreign_op_is_opaque():
    op = arith.ConstantOp.from_int_and_width(1, 32)
    assert fusion_kind(op) is FusionKind.OPAQUE


def test_fusion_kind_declared_by_every_graph_op():
    structural = {graph.FusedOp, graph.YieldOp}
    for op_type in graph.Graph.operations:
        if op_type in structural:
            continue
        assert op_type.get_trait(FusionKindTrait) is not None, op_type.name


def test_fusion_kind_declared_exactly_once():
    # xDSL unions base-class traits into subclasses; two kinds would make the answer
    # depend on set order.
    for op_type in graph.Graph.operations:
        kinds = [t for t in op_type.traits if isinstance(t, FusionKindTrait)]
        assert len(kinds) <= 1, (op_type.name, kinds)


def test_fusion_kind_of_shape_ops():
    expected = {
        graph.BroadcastToOp: FusionKind.BROADCAST,
        graph.ReshapeOp: FusionKind.INJECTIVE,
        graph.TransposeOp: FusionKind.INJECTIVE,
        graph.SliceOp: FusionKind.INJECTIVE,
        graph.PadOp: FusionKind.INJECTIVE,
        graph.ConcatOp: FusionKind.INJECTIVE,
        graph.GatherOp: FusionKind.INJECTIVE,
    }
    for op_type, kind in expected.items():
        trait = op_type.get_trait(FusionKindTrait)
        assert trait is not None and trait.kind is kind, op_type.name


def test_fusion_kind_compound_ops_are_marked():
    compound = {op.name for op in graph.Graph.operations if op.has_trait(CompoundOp)}
    assert compound == {
        "graph.softmax",
        "graph.log_softmax",
        "graph.layer_norm",
        "graph.batch_norm",
        "graph.gelu",
        "graph.silu",
    }


def test_fusion_kind_rank_follows_tvm():
    ranks = [k.rank for k in FusionKind]
    assert ranks == sorted(ranks)
    assert FusionKind.OUT_ELEMWISE_FUSABLE.rank == 4
    assert FusionKind.OPAQUE.rank == 8


def test_builder_binary_infers_broadcast_result():
    module, function = _function((4, 1), (8,))
    a, b = function.body.block.args
    with ImplicitBuilder(function.body.block):
        add = graph.AddOp(a, b)
        func.ReturnOp()
    module.verify()
    assert add.result.type == TensorType(f32, (4, 8))


def test_builder_reduce_keepdims_and_transpose():
    module, function = _function((2, 3, 4))
    (x,) = function.body.block.args
    with ImplicitBuilder(function.body.block):
        kept = graph.ReduceMaxOp(x, [-1, 0], keepdims=True)
        dropped = graph.ReduceMeanOp(x, [1])
        transposed = graph.TransposeOp(x, [2, 0, 1])
        func.ReturnOp()
    module.verify()
    assert kept.result.type == TensorType(f32, (1, 3, 1))
    assert dropped.result.type == TensorType(f32, (2, 4))
    assert transposed.result.type == TensorType(f32, (4, 2, 3))


def _gather_function() -> tuple[ModuleOp, func.FuncOp]:
    """@main(table: 10x4xf32, ids: 2x5xi64, scalar: i32)."""
    types = [TensorType(f32, (10, 4)), TensorType(i64, (2, 5)), TensorType(i32, ())]
    function = func.FuncOp("main", (types, []))
    return ModuleOp([function]), function


def test_builder_gather_infers_result_shape():
    module, function = _gather_function()
    table, ids, scalar = function.body.block.args
    with ImplicitBuilder(function.body.block):
        rows = graph.GatherOp(table, ids)
        column = graph.GatherOp(table, scalar, axis=-1)
        func.ReturnOp()
    module.verify()
    assert rows.result.type == TensorType(f32, (2, 5, 4))
    assert column.result.type == TensorType(f32, (10,))
    assert column.axis.value.data == -1


def test_builder_gather_rejects_bad_axis():
    _, function = _gather_function()
    table, ids, _ = function.body.block.args
    with pytest.raises(VerifyException, match="axis 2 is out of range for rank 2"):
        graph.GatherOp(table, ids, axis=2)


def test_builder_rejects_bad_perm():
    _, function = _function((2, 3))
    with pytest.raises(VerifyException, match="not a permutation"):
        graph.TransposeOp(function.body.block.args[0], [0, 0])


def test_pure_ops_are_removed_by_dce_and_merged_by_cse():
    module, function = _function((4, 8))
    (x,) = function.body.block.args
    function.function_type = func.FunctionType.from_lists([x.type], [x.type])
    with ImplicitBuilder(function.body.block):
        graph.ExpOp(x)  # unused: dead
        first = graph.AddOp(x, x)
        second = graph.AddOp(x, x)  # same as first: merged
        total = graph.MulOp(first, second)
        func.ReturnOp(total)
    module.verify()
    CommonSubexpressionElimination().apply(Context(), module)
    DeadCodeElimination().apply(Context(), module)
    names = [op.name for op in function.body.block.ops]
    assert names == ["graph.add", "graph.mul", "func.return"]


def test_external_op_is_not_removed_by_dce():
    module, function = _function((4,))
    (x,) = function.body.block.args
    with ImplicitBuilder(function.body.block):
        graph.ExternalOp.create(
            operands=[x],
            result_types=[x.type],
            properties={"callee": StringAttr("side_effect")},
        )
        func.ReturnOp()
    DeadCodeElimination().apply(Context(), module)
    assert [op.name for op in function.body.block.ops] == ["graph.external", "func.return"]
