"""ONNX operators imported and run equal onnxruntime (reference interpreter; a few compiled)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from graphfuse.testing.onnx_models import check_against_onnxruntime, model

F = TensorProto.FLOAT
I64 = TensorProto.INT64
node = helper.make_node


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_elementwise_with_broadcasting_compiled() -> None:
    x, y = _rand(3, 4), _rand(4, seed=1)
    nodes = [
        node("Add", ["x", "y"], ["a"]),
        node("Sub", ["a", "y"], ["s"]),
        node("Mul", ["s", "x"], ["m"]),
        node("Div", ["m", "two"], ["d"]),
        node("Abs", ["d"], ["ab"]),
        node("Sqrt", ["ab"], ["sq"]),
        node("Pow", ["sq", "two"], ["p"]),
        node("Neg", ["p"], ["n"]),
        node("Exp", ["n"], ["e"]),
        node("Log", ["e"], ["l"]),
        node("Relu", ["x"], ["r"]),
        node("Sigmoid", ["r"], ["sg"]),
        node("Tanh", ["sg"], ["t"]),
        node("Erf", ["t"], ["ef"]),
        node("Max", ["ef", "x", "y"], ["mx"]),
        node("Min", ["mx", "l"], ["mn"]),
        node("Reciprocal", ["e"], ["rc"]),
        node("Clip", ["mn", "lo", "hi"], ["c"]),
        node("Sum", ["c", "rc", "y"], ["out"]),
    ]
    inits = {
        "two": np.array(2.0, np.float32),
        "lo": np.array(-0.5, np.float32),
        "hi": np.array(0.75, np.float32),
    }
    built = model(nodes, {"x": x, "y": y}, {"out": (F, [3, 4])}, inits)
    check_against_onnxruntime(built, {"x": x, "y": y}, compile_it=True)


def test_where_compare_cast_not() -> None:
    x, y = _rand(2, 5), _rand(2, 5, seed=2)
    nodes = [
        node("Less", ["x", "y"], ["lt"]),
        node("Not", ["lt"], ["ge"]),
        node("Where", ["ge", "x", "zero"], ["w"]),
        node("Greater", ["x", "zero"], ["gt"]),
        node("Cast", ["gt"], ["gi"], to=TensorProto.INT64),
        node("Equal", ["gi", "one"], ["eq"]),
        node("Cast", ["eq"], ["ef"], to=F),
        node("Add", ["w", "ef"], ["out"]),
    ]
    inits = {"zero": np.array(0.0, np.float32), "one": np.array(1, np.int64)}
    built = model(nodes, {"x": x, "y": y}, {"out": (F, [2, 5])}, inits)
    check_against_onnxruntime(built, {"x": x, "y": y})


def test_gemm_transposed_with_alpha_beta_and_batched_matmul() -> None:
    a, w, c = _rand(3, 5), _rand(4, 5, seed=1), _rand(4, seed=2)
    q, k = _rand(2, 3, 4, 6, seed=3), _rand(2, 3, 6, 4, seed=4)
    nodes = [
        node("Gemm", ["a", "w", "c"], ["g"], transB=1, alpha=0.5, beta=2.0),
        node("MatMul", ["q", "k"], ["qk"]),
    ]
    inputs = {"a": a, "q": q, "k": k}
    built = model(nodes, inputs, {"g": (F, [3, 4]), "qk": (F, [2, 3, 4, 4])}, {"w": w, "c": c})
    check_against_onnxruntime(built, inputs, compile_it=True)


def test_cnn_ops_compiled() -> None:
    """Conv (bias, pads, stride, groups, SAME_UPPER), BatchNormalization, Relu, pooling,
    GlobalAveragePool, Flatten, Gemm: a small CNN."""
    x = _rand(2, 4, 9, 9)
    w1, b1 = _rand(8, 4, 3, 3, seed=1), _rand(8, seed=2)
    w2 = _rand(8, 2, 3, 3, seed=3)
    gamma, beta = _rand(8, seed=4), _rand(8, seed=5)
    mean, var = _rand(8, seed=6), np.abs(_rand(8, seed=7)) + 0.5
    fc_w, fc_b = _rand(3, 8, seed=8), _rand(3, seed=9)
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"]),
        node("Relu", ["bn"], ["r"]),
        node("Conv", ["r", "w2"], ["c2"], group=4, auto_pad="SAME_UPPER"),
        node("MaxPool", ["c2"], ["mp"], kernel_shape=[2, 2], pads=[0, 0, 1, 1], strides=[2, 2]),
        node("AveragePool", ["c2"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node(
            "AveragePool",
            ["c2"],
            ["api"],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),
        node("GlobalAveragePool", ["c2"], ["gap"]),
        node("Flatten", ["gap"], ["flat"]),
        node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    inits = {
        "w1": w1,
        "b1": b1,
        "w2": w2,
        "gamma": gamma,
        "beta": beta,
        "mean": mean,
        "var": var,
        "fc_w": fc_w,
        "fc_b": fc_b,
    }
    outputs = {
        "logits": (F, [2, 3]),
        "mp": (F, [2, 8, 3, 3]),
        "ap": (F, [2, 8, 5, 5]),
        "api": (F, [2, 8, 5, 5]),
    }
    built = model(nodes, {"x": x}, outputs, inits)
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_axes_as_attribute_or_input(opset: int) -> None:
    x = _rand(2, 3, 4)
    if opset >= 18:
        nodes = [
            node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
            node("ReduceMax", ["x", "ax"], ["mx"], keepdims=0),
        ]
    else:
        nodes = [
            node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1),
            node("ReduceMax", ["x"], ["mx"], axes=[-1], keepdims=0),
        ]
    nodes += [node("ReduceSum", ["x", "ax02"], ["s"], keepdims=0), node("ReduceMin", ["x"], ["mn"])]
    inits = {"ax": np.array([-1], np.int64), "ax02": np.array([0, 2], np.int64)}
    outputs = {
        "m": (F, [2, 3, 1]),
        "mx": (F, [2, 3]),
        "s": (F, [3]),
        "mn": (F, [1, 1, 1]),
    }
    built = model(nodes, {"x": x}, outputs, inits, opset=opset)
    check_against_onnxruntime(built, {"x": x})


def test_softmax_layernorm_gelu() -> None:
    x = _rand(2, 3, 8)
    nodes = [
        node("Softmax", ["x"], ["sm"], axis=1),
        node("LogSoftmax", ["x"], ["lsm"]),
        node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-3),
        node("LayerNormalization", ["x", "g2"], ["ln2"], axis=1),
        node("Gelu", ["x"], ["ge"]),
        node("Gelu", ["x"], ["gt"], approximate="tanh"),
    ]
    inits = {"g": _rand(8, seed=1), "b": _rand(8, seed=2), "g2": _rand(3, 8, seed=3)}
    outputs = {n: (F, [2, 3, 8]) for n in ("sm", "lsm", "ln", "ln2", "ge", "gt")}
    built = model(nodes, {"x": x}, outputs, inits, opset=20)
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_data_movement() -> None:
    x = _rand(2, 3, 8)
    nodes = [
        node("Reshape", ["x", "shape"], ["r"]),
        node("Transpose", ["r"], ["t"], perm=[1, 0, 2]),
        node("Slice", ["x", "starts", "ends", "axes", "steps"], ["sl"]),
        node("Split", ["x"], ["p0", "p1"], axis=2, num_outputs=2),
        node("Split", ["x", "parts"], ["q0", "q1", "q2"], axis=2),
        node("Concat", ["q2", "q0"], ["cat"], axis=-1),
        node("Unsqueeze", ["cat", "ax0"], ["u"]),
        node("Squeeze", ["u", "ax0"], ["sq"]),
        node("Expand", ["y", "eshape"], ["ex"]),
        node("Pad", ["x", "pads", "pval"], ["pd"]),
        node("Identity", ["pd"], ["id"]),
    ]
    y = _rand(3, 1, seed=4)
    inits = {
        "shape": np.array([0, -1, 4], np.int64),
        "starts": np.array([-2, 1], np.int64),
        "ends": np.array([2**62, 8], np.int64),
        "axes": np.array([1, 2], np.int64),
        "steps": np.array([1, 3], np.int64),
        "parts": np.array([2, 3, 3], np.int64),
        "ax0": np.array([0], np.int64),
        "eshape": np.array([2, 1, 5], np.int64),
        "pads": np.array([0, 1, 0, 0, 0, 2], np.int64),
        "pval": np.array(1.5, np.float32),
    }
    outputs = {
        "t": (F, [6, 2, 4]),
        "sl": (F, [2, 2, 3]),
        "p0": (F, [2, 3, 4]),
        "p1": (F, [2, 3, 4]),
        "q1": (F, [2, 3, 3]),
        "sq": (F, [2, 3, 5]),
        "ex": (F, [2, 3, 5]),
        "id": (F, [2, 4, 10]),
    }
    built = model(nodes, {"x": x, "y": y}, outputs, inits)
    check_against_onnxruntime(built, {"x": x, "y": y}, compile_it=True)


def test_shape_arithmetic_is_folded() -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape and Range, as
    exporters emit them, fold at import: the graph holds only the reshape and the add."""
    x = _rand(2, 3, 4)
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "ax0"], ["b1"]),
        node("Concat", ["b1", "minus1"], ["target"], axis=0),
        node("Reshape", ["x", "target"], ["flat"]),
        node("Shape", ["flat"], ["fs"]),
        node("Slice", ["fs", "one", "two"], ["width"]),
        node("ConstantOfShape", ["width"], ["ones"], value=helper.make_tensor("v", F, [1], [1.0])),
        node("Range", ["zero_f", "twelve", "one_f"], ["ramp"]),
        node("Add", ["flat", "ones"], ["a"]),
        node("Add", ["a", "ramp"], ["out"]),
    ]
    inits = {
        "zero": np.array(0, np.int64),
        "ax0": np.array([0], np.int64),
        "minus1": np.array([-1], np.int64),
        "one": np.array([1], np.int64),
        "two": np.array([2], np.int64),
        "zero_f": np.array(0.0, np.float32),
        "twelve": np.array(12.0, np.float32),
        "one_f": np.array(1.0, np.float32),
    }
    built = model(nodes, {"x": x}, {"out": (F, [2, 12])}, inits)
    check_against_onnxruntime(built, {"x": x})
    from graphfuse.frontend.onnx_import import from_onnx

    names = [op.name for op in from_onnx(built).walk()]
    assert names.count("graph.reshape") == 1 and names.count("graph.add") == 2
    assert "graph.concat" not in names and "graph.gather" not in names


def test_gather_with_known_contiguous_indices_is_a_slice() -> None:
    x = _rand(5, 4)
    nodes = [
        node("Gather", ["x", "idx"], ["g"], axis=0),
        node("Gather", ["x", "last"], ["h"], axis=1),
    ]
    inits = {"idx": np.array([[1, 2]], np.int64), "last": np.array(-1, np.int64)}
    built = model(nodes, {"x": x}, {"g": (F, [1, 2, 4]), "h": (F, [5])}, inits)
    check_against_onnxruntime(built, {"x": x})


def test_gather_elements_on_known_inputs_is_folded() -> None:
    """BERT-base's export picks position ids with GatherElements on two initializers (a
    [1, 512] table, [1, 128] indices), which onnx.reference fails to evaluate."""
    x = _rand(1, 5, 3)
    nodes = [
        node("GatherElements", ["table", "idx"], ["positions"], axis=1),
        node("Gather", ["emb", "positions"], ["e"], axis=0),
        node("Add", ["x", "e"], ["out"]),
    ]
    inits = {
        "table": np.arange(12, dtype=np.int64).reshape(1, 12) * 2 % 7,
        "idx": np.array([[0, 1, 2, 3, -1]], np.int64),
        "emb": _rand(12, 3, seed=1),
    }
    built = model(nodes, {"x": x}, {"out": (F, [1, 5, 3])}, inits)
    check_against_onnxruntime(built, {"x": x})


def test_matmul_with_vector_operands_compiled() -> None:
    """numpy.matmul semantics: vector x matrix, matrix x vector, batched x vector, vector x
    batched and vector x vector (a scalar)."""
    v, m, m2, v3 = _rand(4), _rand(4, 3, seed=1), _rand(5, 3, seed=2), _rand(3, seed=3)
    batched, stacked = _rand(2, 5, 4, seed=4), _rand(2, 4, 3, seed=5)
    nodes = [
        node("MatMul", ["v", "m"], ["vm"]),
        node("MatMul", ["m2", "v3"], ["mv"]),
        node("MatMul", ["batched", "v"], ["bv"]),
        node("MatMul", ["v", "stacked"], ["vs"]),
        node("MatMul", ["v", "v"], ["vv"]),
    ]
    inputs = {"v": v, "m": m, "m2": m2, "v3": v3, "batched": batched, "stacked": stacked}
    outputs = {
        "vm": (F, [3]),
        "mv": (F, [5]),
        "bv": (F, [2, 5]),
        "vs": (F, [2, 3]),
        "vv": (F, []),
    }
    check_against_onnxruntime(model(nodes, inputs, outputs), inputs, compile_it=True)


def test_layernorm_mean_and_inv_std_dev_outputs_compiled() -> None:
    """Mean and InvStdDev as graph outputs and read by a later node, normalized over the
    last two axes (kept as unit dimensions)."""
    x = _rand(2, 3, 8)
    nodes = [
        node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"], axis=1, epsilon=1e-3),
        node("Mul", ["inv", "mean"], ["scaled"]),
        node("LayerNormalization", ["x", "g8"], ["y8", "", "inv8"]),
    ]
    inits = {"g": _rand(3, 8, seed=1), "b": _rand(8, seed=2), "g8": _rand(8, seed=3)}
    outputs = {
        "y": (F, [2, 3, 8]),
        "mean": (F, [2, 1, 1]),
        "scaled": (F, [2, 1, 1]),
        "inv8": (F, [2, 3, 1]),
    }
    built = model(nodes, {"x": x}, outputs, inits)
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_layernorm_statistics_of_float16_are_float() -> None:
    """stash_type (float by default) is the statistics' precision and element type."""
    x = _rand(2, 8).astype(np.float16)
    nodes = [node("LayerNormalization", ["x", "g"], ["y", "mean", "inv"])]
    outputs = {"y": (TensorProto.FLOAT16, [2, 8]), "mean": (F, [2, 1]), "inv": (F, [2, 1])}
    built = model(nodes, {"x": x}, outputs, {"g": np.ones(8, np.float16)})
    check_against_onnxruntime(built, {"x": x})


def test_pow_and_batchnorm_mix_element_types() -> None:
    """ONNX types Pow's exponent, and BatchNormalization's parameters, apart from the input."""
    x, n = _rand(1, 2, 3, 3), np.array([[1, 2, 3]], np.int64)
    nodes = [
        node("Pow", ["x", "n"], ["p"]),
        node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["bn"]),
    ]
    inits = {
        "gamma": np.array([0.5, 2.0], np.float16),
        "beta": np.array([1.0, -1.0], np.float16),
        "mean": _rand(2, seed=1),
        "var": np.array([0.5, 2.0], np.float32),
    }
    outputs = {"p": (F, [1, 2, 3, 3]), "bn": (F, [1, 2, 3, 3])}
    built = model(nodes, {"x": x, "n": n}, outputs, inits)
    check_against_onnxruntime(built, {"x": x, "n": n})


def test_reduce_max_and_min_of_booleans_are_any_and_all() -> None:
    flags = np.array([[True, False, True], [True, True, True]])
    nodes = [
        node("ReduceMax", ["flags", "axis"], ["any"], keepdims=0),
        node("ReduceMin", ["flags", "axis"], ["all"], keepdims=0),
    ]
    outputs = {"any": (TensorProto.BOOL, [2]), "all": (TensorProto.BOOL, [2])}
    built = model(nodes, {"flags": flags}, outputs, {"axis": np.array([1], np.int64)}, opset=20)
    check_against_onnxruntime(built, {"flags": flags})


def test_constant_node_the_onnx_evaluator_lacks_is_imported() -> None:
    """Gelu of an initializer: onnx.reference has no Gelu, so the node is built as a graph
    op (folded by graph-simplify) instead of refused at import (found by the fuzzer)."""
    x = _rand(2, 4)
    nodes = [node("Gelu", ["c"], ["g"]), node("Add", ["x", "g"], ["out"])]
    built = model(nodes, {"x": x}, {"out": (F, [2, 4])}, {"c": _rand(2, 4, seed=1)}, opset=20)
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_max_pool_of_a_constant_with_a_window_ending_in_padding() -> None:
    """onnx.reference's MaxPool fails when a window ends in padding; on a constant input
    the node is built as a graph op instead (found by the fuzzer)."""
    x = _rand(2, 4, 2, 1)
    nodes = [
        node("MaxPool", ["c"], ["p"], kernel_shape=[3, 1], pads=[0, 0, 1, 0], strides=[1, 1]),
        node("Add", ["x", "p"], ["out"]),
    ]
    built = model(nodes, {"x": x}, {"out": (F, [2, 4, 2, 1])}, {"c": _rand(2, 4, 3, 1, seed=1)})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_pooling_of_a_constant_with_asymmetric_pads() -> None:
    """onnx.reference's MaxPool reads pads [1, 1, 0, 0] wrongly (1x16 becomes 2x15): a
    pooling or convolution of constants is built as a graph op, never folded by it (found
    by the fuzzer: MaxPool, Conv, MatMul refused for contraction sizes that differ)."""
    x = _rand(2, 3, 1, 15)
    nodes = [
        node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        node("AveragePool", ["c"], ["a"], kernel_shape=[2, 2], pads=[1, 0, 0, 1]),
        node("Conv", ["p", "w"], ["v"], kernel_shape=[1, 2]),
        node("Add", ["x", "v"], ["out"]),
    ]
    inits = {"c": _rand(2, 4, 1, 16, seed=1), "w": _rand(3, 4, 1, 2, seed=2)}
    outputs = {"out": (F, [2, 3, 1, 15]), "a": (F, [2, 4, 1, 16])}
    check_against_onnxruntime(model(nodes, {"x": x}, outputs, inits), {"x": x}, compile_it=True)
