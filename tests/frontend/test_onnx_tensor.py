"""ONNX index and data-movement operators built from graph ops, checked against onnxruntime
(reference interpreter; the models marked compiled also as native code)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.testing.onnx_models import check_against_onnxruntime, model

F = TensorProto.FLOAT
I64 = TensorProto.INT64
I32 = TensorProto.INT32
node = helper.make_node


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ops(built: object) -> list[str]:
    module = graphfuse.from_onnx(built)
    return [op.name for op in module.walk() if op.name.startswith("graph.")]


def test_argmax_argmin_first_and_last_of_ties_compiled() -> None:
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 1], [0, 5, 5, 5]], np.float32)
    nodes = [
        node("ArgMax", ["x"], ["first_max"], axis=1, keepdims=0),
        node("ArgMax", ["x"], ["last_max"], axis=1, select_last_index=1),
        node("ArgMin", ["x"], ["first_min"], axis=0),
        node("ArgMin", ["x"], ["last_min"], axis=-1, keepdims=0, select_last_index=1),
    ]
    outputs = {
        "first_max": (I64, [3]),
        "last_max": (I64, [3, 1]),
        "first_min": (I64, [1, 4]),
        "last_min": (I64, [3]),
    }
    check_against_onnxruntime(model(nodes, {"x": x}, outputs), {"x": x}, compile_it=True)


def test_argmax_of_nan_is_the_first_nan_compiled() -> None:
    x = np.array([[1, np.nan, 3, np.nan], [2, 5, 5, 1]], np.float32)
    nodes = [
        node("ArgMax", ["x"], ["first"], axis=1, keepdims=0),
        node("ArgMin", ["x"], ["last"], axis=1, keepdims=0, select_last_index=1),
    ]
    module = graphfuse.from_onnx(model(nodes, {"x": x}, {"first": (I64, [2]), "last": (I64, [2])}))
    for first, last in [reference.run(module, "main", x), graphfuse.compile(module)(x)]:
        np.testing.assert_array_equal(first, [1, 1])
        np.testing.assert_array_equal(last, [3, 3])


def test_hardmax_marks_the_first_maximum() -> None:
    x = np.array([[[1, 4, 4], [2, 0, 2]], [[7, 7, 1], [0, 0, 0]]], np.float32)
    nodes = [node("Hardmax", ["x"], ["y"], axis=1), node("Hardmax", ["x"], ["z"])]
    built = model(nodes, {"x": x}, {"y": (F, [2, 2, 3]), "z": (F, [2, 2, 3])})
    check_against_onnxruntime(built, {"x": x})


@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_largest_and_smallest_with_ties(largest: int) -> None:
    x = np.array([[3, 1, 3, 2, 1], [0, 4, 4, 4, 2]], np.float32)
    nodes = [node("TopK", ["x", "k"], ["values", "indices"], axis=-1, largest=largest)]
    outputs = {"values": (F, [2, 3]), "indices": (I64, [2, 3])}
    built = model(nodes, {"x": x}, outputs, {"k": np.array([3], np.int64)})
    check_against_onnxruntime(built, {"x": x})


def test_top_k_smallest_integers_include_the_least_compiled() -> None:
    low = np.iinfo(np.int64).min
    x = np.array([[5, low, 7, -3], [low, low, 2, 0]], np.int64)
    nodes = [node("TopK", ["x", "k"], ["values", "indices"], largest=0)]
    outputs = {"values": (I64, [2, 2]), "indices": (I64, [2, 2])}
    built = model(nodes, {"x": x}, outputs, {"k": np.array([2], np.int64)})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_trilu_tile_depth_to_space_compiled() -> None:
    x, d = _rand(2, 3, 4), _rand(1, 8, 2, 3, seed=1)
    nodes = [
        node("Trilu", ["x", "k"], ["upper"]),
        node("Trilu", ["x"], ["lower"], upper=0),
        node("Tile", ["x", "repeats"], ["tiled"]),
        node("DepthToSpace", ["d"], ["dcr"], blocksize=2),
        node("DepthToSpace", ["d"], ["crd"], blocksize=2, mode="CRD"),
        node("SpaceToDepth", ["dcr"], ["back"], blocksize=2),
    ]
    inits = {"k": np.array(1, np.int64), "repeats": np.array([2, 1, 3], np.int64)}
    outputs = {
        "upper": (F, [2, 3, 4]),
        "lower": (F, [2, 3, 4]),
        "tiled": (F, [4, 3, 12]),
        "dcr": (F, [1, 2, 4, 6]),
        "crd": (F, [1, 2, 4, 6]),
        "back": (F, [1, 8, 2, 3]),
    }
    inputs = {"x": x, "d": d}
    check_against_onnxruntime(model(nodes, inputs, outputs, inits), inputs, compile_it=True)


def test_eye_like_is_a_known_array() -> None:
    x = _rand(3, 4)
    nodes = [node("EyeLike", ["x"], ["eye"], k=1), node("Add", ["x", "eye"], ["y"])]
    built = model(nodes, {"x": x}, {"y": (F, [3, 4])})
    check_against_onnxruntime(built, {"x": x})
    assert "graph.constant" in _ops(built)


def test_one_hot_with_negative_and_out_of_range_indices() -> None:
    indices = np.array([[0, -1, 2], [5, -4, 1]], np.int64)
    values = np.array([-2.0, 3.0], np.float32)
    nodes = [node("OneHot", ["indices", "depth", "values"], ["y"], axis=1)]
    inputs = {"indices": indices, "values": values}
    built = model(nodes, inputs, {"y": (F, [2, 4, 3])}, {"depth": np.array(4, np.int64)})
    check_against_onnxruntime(built, inputs)


def test_gather_elements_and_gather_nd_with_computed_indices_compiled() -> None:
    data = _rand(3, 4)
    elements = np.array([[0, -1, 2, 1], [2, 2, -3, 0]], np.int64)
    batched = _rand(2, 3, 4, seed=1)
    tuples = np.array([[[2, -1], [0, 0]], [[1, 3], [-3, 2]]], np.int64)
    nodes = [
        node("GatherElements", ["data", "elements"], ["e"], axis=0),
        node("GatherND", ["batched", "tuples"], ["nd"], batch_dims=1),
    ]
    inputs = {"data": data, "elements": elements, "batched": batched, "tuples": tuples}
    built = model(nodes, inputs, {"e": (F, [2, 4]), "nd": (F, [2, 2])})
    check_against_onnxruntime(built, inputs, compile_it=True)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_elements_and_nd_reductions_with_duplicate_indices(reduction: str) -> None:
    data = _rand(3, 4)
    indices = np.array([[1, 1, -1], [0, 3, 1]], np.int64)
    updates = _rand(2, 3, seed=1)
    rows = np.array([[2], [0], [-1]], np.int64)
    row_updates = _rand(3, 4, seed=2)
    nodes = [
        node("ScatterElements", ["data", "indices", "updates"], ["e"], axis=1, reduction=reduction),
        node("ScatterND", ["data", "rows", "row_updates"], ["nd"], reduction=reduction),
    ]
    inputs = {
        "data": data,
        "indices": indices,
        "updates": updates,
        "rows": rows,
        "row_updates": row_updates,
    }
    built = model(nodes, inputs, {"e": (F, [3, 4]), "nd": (F, [3, 4])})
    check_against_onnxruntime(built, inputs)


def test_scatter_without_reduction_last_duplicate_wins_compiled() -> None:
    """ONNX leaves duplicate targets without a reduction unspecified; graphfuse applies
    updates in order, as ONNX's reference does, so the last one wins."""
    data = _rand(5)
    indices = np.array([3, 1, 3, -5], np.int64)
    updates = np.array([10, 20, 30, 40], np.float32)
    nodes = [node("ScatterElements", ["data", "indices", "updates"], ["y"])]
    inputs = {"data": data, "indices": indices, "updates": updates}
    built = model(nodes, inputs, {"y": (F, [5])})
    expected = data.copy()
    expected[[3, 1, 0]] = [30, 20, 40]
    module = graphfuse.from_onnx(built)
    np.testing.assert_array_equal(
        reference.run(module, "main", data, indices, updates)[0], expected
    )
    np.testing.assert_array_equal(graphfuse.compile(module)(data, indices, updates), expected)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max"])
def test_scatter_with_known_indices_gathers_without_comparing(reduction: str) -> None:
    data, updates = _rand(4, 3), _rand(2, 3, seed=1)
    flat_updates = _rand(1, 5, seed=2)
    nodes = [
        node("ScatterND", ["data", "rows", "updates"], ["nd"], reduction=reduction),
        node(
            "ScatterElements", ["data", "cells", "flat_updates"], ["e"], axis=1, reduction=reduction
        ),
    ]
    inputs = {"data": data, "updates": updates, "flat_updates": flat_updates}
    inits = {"rows": np.array([[3], [1]], np.int64), "cells": np.array([[2, -1, 0, 2, 2]])}
    built = model(nodes, inputs, {"nd": (F, [4, 3]), "e": (F, [4, 3])}, inits)
    if reduction != "none":  # onnxruntime's choice among duplicates is its own
        check_against_onnxruntime(built, inputs)
    assert "graph.compare" not in _ops(built)
    expected = data.copy()
    for update, column in zip(flat_updates[0], [2, 2, 0, 2, 2], strict=True):
        combine = {"none": lambda a, u: u, "add": np.add, "mul": np.multiply, "max": np.maximum}
        expected[0, column] = combine[reduction](expected[0, column], update)
    got = reference.run(graphfuse.from_onnx(built), "main", *inputs.values())[1]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_scatter_with_too_many_computed_pairs_is_refused() -> None:
    data = np.zeros(1 << 13, np.float32)
    indices = np.zeros(1 << 12, np.int64)
    updates = np.zeros(1 << 12, np.float32)
    nodes = [node("ScatterElements", ["data", "indices", "updates"], ["y"], reduction="add")]
    inputs = {"data": data, "indices": indices, "updates": updates}
    built = model(nodes, inputs, {"y": (F, [1 << 13])})
    with pytest.raises(ImportFailure, match="compares 33554432 pairs, more than"):
        graphfuse.from_onnx(built)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulative_sum_and_product(op: str, exclusive: int, reverse: int) -> None:
    x = (_rand(3, 7) * 0.5 + 1).astype(np.float32)
    nodes = [node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)]
    built = model(nodes, {"x": x}, {"y": (F, [3, 7])}, {"axis": np.array(-1, np.int64)}, 26)
    check_against_onnxruntime(built, {"x": x})


def test_cumulative_sum_of_integers_compiled() -> None:
    x = np.arange(1, 13, dtype=np.int32).reshape(4, 3)
    nodes = [node("CumSum", ["x", "axis"], ["y"], exclusive=1)]
    built = model(nodes, {"x": x}, {"y": (I32, [4, 3])}, {"axis": np.array(0, np.int32)})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


@pytest.mark.parametrize(
    ("equation", "shapes", "out"),
    [
        ("ij->ji", [(3, 4)], [4, 3]),
        ("ij->i", [(3, 4)], [3]),
        ("...ii->...i", [(2, 4, 4)], [2, 4]),
        ("bij, bjk -> bik", [(5, 2, 3), (5, 3, 4)], [5, 2, 4]),
        ("i,i", [(5,), (5,)], []),
        ("ij,kj", [(2, 3), (4, 3)], [2, 4]),
        ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)], [2, 5]),
        ("...j,j->...", [(2, 3, 4), (4,)], [2, 3]),
        ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)], [1, 2, 3, 5]),
    ],
)
def test_einsum_equations(equation: str, shapes: list[tuple[int, ...]], out: list[int]) -> None:
    inputs = {f"x{i}": _rand(*s, seed=i) for i, s in enumerate(shapes)}
    nodes = [node("Einsum", list(inputs), ["y"], equation=equation)]
    check_against_onnxruntime(model(nodes, inputs, {"y": (F, out)}), inputs)


def test_einsum_attention_and_diagonal_compiled() -> None:
    q, k, m = _rand(2, 3, 4, 5), _rand(2, 3, 6, 5, seed=1), _rand(3, 4, 4, seed=2)
    nodes = [
        node("Einsum", ["q", "k"], ["scores"], equation="bhqd,bhkd->bhqk"),
        node("Einsum", ["m"], ["diagonal"], equation="...ii->...i"),
        node("Einsum", ["m", "q"], ["mixed"], equation="hij,bhjd->bhid"),
    ]
    inputs = {"q": q, "k": k, "m": m}
    outputs = {"scores": (F, [2, 3, 4, 6]), "diagonal": (F, [3, 4]), "mixed": (F, [2, 3, 4, 5])}
    check_against_onnxruntime(model(nodes, inputs, outputs), inputs, compile_it=True)


def test_reverse_sequence_with_computed_lengths() -> None:
    x = _rand(4, 3, 2)
    lens = np.array([4, 1, 2], np.int64)
    nodes = [node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0)]
    inputs = {"x": x, "lens": lens}
    check_against_onnxruntime(model(nodes, inputs, {"y": (F, [4, 3, 2])}), inputs)


def test_slice_with_negative_steps() -> None:
    x = _rand(6, 5, 4)
    nodes = [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])]
    inits = {
        "starts": np.array([-1, 0, 10], np.int64),
        "ends": np.array([-1000, 5, 0], np.int64),
        "axes": np.array([0, 1, 2], np.int64),
        "steps": np.array([-2, 2, -1], np.int64),
    }
    check_against_onnxruntime(model(nodes, {"x": x}, {"y": (F, [3, 3, 3])}, inits), {"x": x})


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap", "constant"])
def test_pad_modes_with_negative_pads(mode: str) -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    nodes = [node("Pad", ["x", "pads"], ["y"], mode=mode)]
    pads = np.array([0, 2, -1, 1, 2, 2], np.int64)
    built = model(nodes, {"x": x}, {"y": (I32, [3, 7, 5])}, {"pads": pads})
    check_against_onnxruntime(built, {"x": x})


def test_pad_with_a_computed_value_compiled() -> None:
    x, value = _rand(2, 3), np.array(7.5, np.float32)
    nodes = [node("Pad", ["x", "pads", "value"], ["y"])]
    inputs = {"x": x, "value": value}
    built = model(nodes, inputs, {"y": (F, [3, 5])}, {"pads": np.array([1, 0, 0, 2], np.int64)})
    check_against_onnxruntime(built, inputs, compile_it=True)


@pytest.mark.parametrize("op", ["NonZero", "Unique"])
def test_value_shaped_ops_are_refused(op: str) -> None:
    x = _rand(3)
    outputs = {"y": (I64 if op == "NonZero" else F, None)}
    built = model([node(op, ["x"], ["y"])], {"x": x}, outputs, check=False)
    with pytest.raises(ImportFailure, match=f"{op}'s output shape depends on its input values"):
        graphfuse.from_onnx(built)


def test_constant_of_computed_shape_is_refused() -> None:
    shape = np.array([2, 3], np.int64)
    nodes = [node("Abs", ["shape"], ["s"]), node("ConstantOfShape", ["s"], ["y"])]
    built = model(nodes, {"shape": shape}, {"y": (F, None)}, check=False)
    with pytest.raises(ImportFailure, match="the output shape is the input's values"):
        graphfuse.from_onnx(built)


@pytest.mark.parametrize(
    ("equation", "message"),
    [
        ("ij->jk", "output subscripts 'jk' must be distinct subscripts of the operands"),
        ("ij->ii", "output subscripts 'ii' must be distinct"),
        ("ijk->i", "subscripts 'ijk' do not fit an operand of rank 2"),
        ("ij,jk->ik", "has 2 operands, the node 1"),
    ],
)
def test_einsum_bad_equations_are_one_line(equation: str, message: str) -> None:
    x = _rand(2, 3)
    built = model(
        [node("Einsum", ["x"], ["y"], equation=equation)], {"x": x}, {"y": (F, None)}, check=False
    )
    with pytest.raises(ImportFailure, match=message):
        graphfuse.from_onnx(built)
