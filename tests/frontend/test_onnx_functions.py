"""ONNX ops defined by a function body, expanded by the importer into their primitives.

ONNX specifies many ops (activations, some reductions, CastLike, and the opset-23 LLM ops
Attention, RMSNormalization and RotaryEmbedding) by a body of other ops. The importer
converts that body in the node's place, so the primitives fuse with their neighbours as if
the model had written them by hand; these tests compare the compiled results with
onnxruntime and check that the opened-up ops still end in few kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import AttributeProto, TensorProto, helper

import graphfuse
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import check_against_onnxruntime, model, onnxruntime_outputs

F = TensorProto.FLOAT
node = helper.make_node


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("op", "attributes"),
    [
        ("HardSwish", {}),
        ("Elu", {}),  # the body reads alpha, which the node leaves to the schema's default
        ("Elu", {"alpha": 0.5}),
        ("Selu", {}),
        ("Celu", {"alpha": 2.0}),
        ("LeakyRelu", {"alpha": 0.2}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("Softplus", {}),
        ("Softsign", {}),
        ("Mish", {}),
        ("ThresholdedRelu", {"alpha": 0.1}),
        ("Shrink", {"lambd": 0.5, "bias": 0.25}),
    ],
)
def test_activations_defined_by_function_bodies(op: str, attributes: dict[str, float]) -> None:
    x = _rand(3, 7) * 3
    built = model([node(op, ["x"], ["y"], **attributes)], {"x": x}, {"y": (F, [3, 7])})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"])
def test_reductions_defined_by_function_bodies(op: str) -> None:
    x = _rand(2, 5, 6)
    axes = np.array([1, -1], np.int64)
    built = model(
        [node(op, ["x", "axes"], ["y"], keepdims=0)], {"x": x}, {"y": (F, [2])}, {"axes": axes}
    )
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_castlike_takes_the_element_type_of_its_second_input() -> None:
    x = _rand(4, 4) * 10
    like = np.zeros((1,), np.int64)
    built = model(
        [node("CastLike", ["x", "like"], ["y"])],
        {"x": x},
        {"y": (TensorProto.INT64, [4, 4])},
        {"like": like},
    )
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def _compiled_against_onnxruntime(built: object, inputs: dict[str, np.ndarray]) -> int:
    """Compile, compare with onnxruntime (1e-4), return the number of kernels."""
    expected = onnxruntime_outputs(built, inputs)  # type: ignore[arg-type]
    compiled = graphfuse.compile(from_onnx(built))
    got = compiled(*inputs.values())
    got = got if isinstance(got, tuple) else (got,)
    for index, (actual, want) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(actual, want, rtol=1e-4, atol=1e-4, err_msg=f"#{index}")
    return compiled.kernel_count


def test_rms_normalization_is_one_kernel() -> None:
    x, scale = _rand(4, 16, 64), _rand(64, seed=1)
    built = model(
        [node("RMSNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-6)],
        {"x": x},
        {"y": (F, [4, 16, 64])},
        {"scale": scale},
        opset=23,
    )
    assert _compiled_against_onnxruntime(built, {"x": x}) == 1


def test_attention_with_grouped_query_heads_and_a_causal_mask() -> None:
    """Opset-23 Attention: 4 query heads sharing 2 key/value heads, causal, scaled."""
    q, k, v = _rand(2, 4, 8, 16), _rand(2, 2, 8, 16, seed=1), _rand(2, 2, 8, 16, seed=2)
    built = model(
        [node("Attention", ["q", "k", "v"], ["y"], is_causal=1, scale=0.3)],
        {"q": q, "k": k, "v": v},
        {"y": (F, [2, 4, 8, 16])},
        opset=23,
    )
    kernels = _compiled_against_onnxruntime(built, {"q": q, "k": k, "v": v})
    assert kernels <= 6


def test_attention_with_an_additive_mask_and_3d_inputs() -> None:
    """3-D inputs (heads folded into the hidden size) and a float mask added to the scores."""
    q, k, v = _rand(2, 6, 32), _rand(2, 10, 32, seed=1), _rand(2, 10, 32, seed=2)
    mask = _rand(6, 10, seed=3)
    built = model(
        [node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=4, kv_num_heads=4)],
        {"q": q, "k": k, "v": v, "mask": mask},
        {"y": (F, [2, 6, 32])},
        opset=23,
    )
    _compiled_against_onnxruntime(built, {"q": q, "k": k, "v": v, "mask": mask})


def test_rotary_embedding() -> None:
    x = _rand(2, 4, 6, 8)  # batch, heads, sequence, head size
    cos, sin = np.cos(_rand(10, 4, seed=1)), np.sin(_rand(10, 4, seed=2))
    positions = np.tile(np.arange(6, dtype=np.int64), (2, 1))
    built = model(
        [node("RotaryEmbedding", ["x", "cos", "sin", "positions"], ["y"])],
        {"x": x},
        {"y": (F, [2, 4, 6, 8])},
        {"cos": cos, "sin": sin, "positions": positions},
        opset=23,
    )
    _compiled_against_onnxruntime(built, {"x": x})


def test_model_local_functions_are_expanded() -> None:
    """A function the model defines itself (as exporters write modules), with an attribute
    parameter and its default, called twice: both calls are inlined apart."""
    constant = node("Constant", [], ["a"])
    reference = helper.make_attribute_ref("value_float", AttributeProto.FLOAT)
    reference.ref_attr_name = "alpha"
    constant.attribute.append(reference)
    scaled = helper.make_function(
        "local",
        "ScaledTanh",
        ["x"],
        ["y"],
        [constant, node("Tanh", ["x"], ["t"]), node("Mul", ["t", "a"], ["y"])],
        [helper.make_opsetid("", 18)],
        attributes=[],
        attribute_protos=[helper.make_attribute("alpha", 2.0)],
    )
    x = _rand(3, 5)
    nodes = [
        node("ScaledTanh", ["x"], ["h"], domain="local", alpha=0.5),
        node("ScaledTanh", ["h"], ["y"], domain="local"),  # alpha's default, 2.0
    ]
    built = model(nodes, {"x": x}, {"y": (F, [3, 5])}, check=False)
    built.opset_import.append(helper.make_opsetid("local", 1))
    built.functions.append(scaled)
    assert _compiled_against_onnxruntime(built, {"x": x}) == 1
    expected = 2.0 * np.tanh(0.5 * np.tanh(x))
    got = graphfuse.compile(from_onnx(built))(x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
