"""The front end keeps the reference's numbers: decompositions, folding, simplification."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.pattern_rewriter import PatternRewriteWalker

from graphfuse.dialects import graph
from graphfuse.dialects.graph import CompoundOp
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import verify
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.passes.rewrites.graph_decompose import GraphDecomposePass
from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass
from graphfuse.passes.rewrites.rewrite_spec import Decomposition, DecompositionPattern, Step
from tests.conftest import parse


def _parse_main(text: str) -> func.FuncOp:
    function = next(iter(parse(text).ops))
    assert isinstance(function, func.FuncOp)
    return function


COMPOUND = {
    "softmax": "graph.softmax %x axis = 1 : tensor<4x16xf32>",
    "log_softmax": "graph.log_softmax %x axis = 0 : tensor<4x16xf32>",
    "gelu": "graph.gelu %x : tensor<4x16xf32>",
    "gelu_tanh": "graph.gelu %x approximate = tanh : tensor<4x16xf32>",
    "silu": "graph.silu %x : tensor<4x16xf32>",
    "reduce_mean": "graph.reduce_mean %x axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>",
}


def _single(body: str, result: str) -> str:
    return (
        f"func.func @main(%x: tensor<4x16xf32>) -> {result} {{\n"
        f"  %y = {body}\n  func.return %y : {result}\n}}"
    )


def _run_before_after(text: str, apply, *arrays):
    module = parse(text)
    before = reference.run(module, "main", *arrays)
    apply(module)
    verify(module)
    return before, reference.run(module, "main", *arrays), module


@pytest.mark.parametrize("name", sorted(COMPOUND))
def test_decomposition_matches_reference(name, rng):
    body = COMPOUND[name]
    result = body.rsplit("-> ", 1)[1] if "->" in body else "tensor<4x16xf32>"
    x = rng.uniform(-3, 3, (4, 16)).astype(np.float32)
    before, after, module = _run_before_after(
        _single(body, result), lambda m: GraphDecomposePass().apply(Context(), m), x
    )
    compound = {
        "graph.softmax",
        "graph.log_softmax",
        "graph.gelu",
        "graph.silu",
        "graph.reduce_mean",
    }
    assert not [op.name for op in module.walk() if op.name in compound]
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-6)


def _gelu64(x: np.ndarray, tanh: bool) -> np.ndarray:
    x = x.astype(np.float64)
    if tanh:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


NARROW_CASES = {
    # name: (op text with T for the tensor type, float64 definition)
    "softmax": ("graph.softmax %x axis = 1 : T", lambda x: _softmax64(x, 1)),
    "log_softmax": ("graph.log_softmax %x axis = 1 : T", lambda x: np.log(_softmax64(x, 1))),
    "gelu": ("graph.gelu %x : T", lambda x: _gelu64(x, tanh=False)),
    "gelu_tanh": ("graph.gelu %x approximate = tanh : T", lambda x: _gelu64(x, tanh=True)),
    "silu": ("graph.silu %x : T", lambda x: x / (1 + np.exp(-x.astype(np.float64)))),
}


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize("name", sorted(NARROW_CASES))
def test_narrow_float_decomposition_rounds_once(name, element, rng):
    # f16 and bf16 compound ops compute in f32 and round once, like the reference; each
    # opened step rounding to the narrow type drifts by many ulps (bf16 gelu near -3).
    body, exact = NARROW_CASES[name]
    type_ = f"tensor<4x64x{element}>"
    text = (
        f"func.func @main(%x: {type_}) -> {type_} {{\n"
        f"  %y = {body.replace('T', type_)}\n  func.return %y : {type_}\n}}"
    )
    x32 = np.concatenate([np.linspace(-3.5, -2.5, 64), rng.uniform(-4, 4, 192)]).reshape(4, 64)
    element_type = graph.tensor_type_of(_parse_main(text).args[0]).get_element_type()
    x = reference.to_element_type(x32, element_type)
    _, after, module = _run_before_after(
        text, lambda m: GraphDecomposePass().apply(Context(), m), x
    )
    assert not [op.name for op in module.walk() if op.has_trait(CompoundOp)]
    expected = reference.to_element_type(exact(x), element_type)
    ulp = 2.0**-10 if element == "f16" else 2.0**-7
    np.testing.assert_allclose(after[0], expected, rtol=ulp, atol=1e-6)


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_narrow_float_reduce_mean_does_not_overflow(element):
    # 4096 * 20 = 81920 is past f16's largest finite number; the mean is 20.
    text = f"""
func.func @main(%x: tensor<1x4096x{element}>) -> tensor<1x{element}> {{
  %m = graph.reduce_mean %x axes = [-1] : tensor<1x4096x{element}> -> tensor<1x{element}>
  func.return %m : tensor<1x{element}>
}}"""
    x = np.full((1, 4096), 20.0, dtype=np.float16 if element == "f16" else np.float32)
    _, after, _ = _run_before_after(text, lambda m: GraphDecomposePass().apply(Context(), m), x)
    np.testing.assert_array_equal(after[0], np.array([20.0]))


def test_narrow_float_layer_norm_and_batch_norm_round_once(rng):
    # Every parameter is its own tensor of its own values, so passing one in another's
    # place (scale for bias, mean for bias, ...) changes the numbers.
    text = """
func.func @main(%x: tensor<2x3x64xf16>, %g: tensor<64xf16>, %h: tensor<64xf16>, %s: tensor<3xf16>, %c: tensor<3xf16>, %m: tensor<3xf16>, %v: tensor<3xf16>) -> (tensor<2x3x64xf16>, tensor<2x3x64xf16>) {
  %l = graph.layer_norm %x, %g, %h axis = 2 : (tensor<2x3x64xf16>, tensor<64xf16>, tensor<64xf16>) -> tensor<2x3x64xf16>
  %b = graph.batch_norm %x, %s, %c, %m, %v : (tensor<2x3x64xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>) -> tensor<2x3x64xf16>
  func.return %l, %b : tensor<2x3x64xf16>, tensor<2x3x64xf16>
}"""
    x = (rng.standard_normal((2, 3, 64)) * 4 + 100).astype(np.float16)
    g = rng.uniform(0.5, 2.0, 64).astype(np.float16)
    h = rng.uniform(-3.0, -1.0, 64).astype(np.float16)
    s = np.array([0.5, 1.5, -2.0], dtype=np.float16)
    c = np.array([3.0, -1.0, 0.25], dtype=np.float16)
    m = np.array([99.0, 101.0, 100.5], dtype=np.float16)
    v = np.array([0.5, 2.0, 1.25], dtype=np.float16)
    _, after, _ = _run_before_after(
        text, lambda mod: GraphDecomposePass().apply(Context(), mod), x, g, h, s, c, m, v
    )
    layer, batch = _layer_and_batch_norm64(x, g, h, s, c, m, v, axis=2, epsilon=1e-5)
    for expected, actual in zip((layer, batch), after, strict=True):
        np.testing.assert_allclose(actual, expected.astype(np.float16), rtol=2**-10, atol=1e-3)


def _layer_and_batch_norm64(
    x: np.ndarray, *params: np.ndarray, axis: int, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """layer_norm(x, scale g, bias h) over the dims from `axis` on (epsilon given) and
    batch_norm(x, scale s, bias c, mean m, var v) over channel dim 1 (epsilon 1e-5), in
    float64."""
    g, h, s, c, m, v = (p.astype(np.float64) for p in params)
    x64 = x.astype(np.float64)
    dims = tuple(range(axis, x.ndim))
    mean = x64.mean(axis=dims, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=dims, keepdims=True)
    layer = (x64 - mean) / np.sqrt(var + epsilon) * g + h
    channel = (-1,) + (1,) * (x.ndim - 2)
    k = (s / np.sqrt(v + 1e-5)).reshape(channel)
    batch = (x64 - m.reshape(channel)) * k + c.reshape(channel)
    return layer, batch


def test_layer_norm_and_batch_norm_decompositions_match_reference(rng):
    text = """
func.func @main(%x: tensor<2x3x4x4xf32>, %g: tensor<4x4xf32>, %h: tensor<4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) {
  %l = graph.layer_norm %x, %g, %h axis = 2 epsilon = 1.0e-03 : (tensor<2x3x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4x4xf32>
  %n = graph.batch_norm %x, %s, %b, %m, %v : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %l, %n : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}"""
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    g = rng.uniform(0.5, 2.0, (4, 4)).astype(np.float32)
    h = rng.uniform(-3.0, -1.0, (4, 4)).astype(np.float32)
    s = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    b = rng.uniform(1.0, 3.0, 3).astype(np.float32)
    m = rng.uniform(-1.0, -0.5, 3).astype(np.float32)
    v = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    before, after, _ = _run_before_after(
        text, lambda mod: GraphDecomposePass().apply(Context(), mod), x, g, h, s, b, m, v
    )
    exact = _layer_and_batch_norm64(x, g, h, s, b, m, v, axis=2, epsilon=1e-3)
    for expected, reference_result, actual in zip(exact, before, after, strict=True):
        np.testing.assert_allclose(actual, reference_result, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(reference_result, expected, rtol=1e-5, atol=1e-5)


def test_softmax_of_large_inputs_stays_finite():
    x = np.full((4, 16), 1000.0, dtype=np.float32)
    x[:, 0] = 1010.0
    _, after, _ = _run_before_after(
        _single(COMPOUND["softmax"], "tensor<4x16xf32>"),
        lambda m: GraphFusePass().apply(Context(), m),
        x,
    )
    assert np.isfinite(after[0]).all()
    expected = np.exp(x - 1010.0) / np.exp(x - 1010.0).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(after[0], expected, rtol=1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_batch_norm_folding_matches_reference(with_bias, rng):
    def const(name: str, shape: tuple[int, ...], low: float = -1.0) -> str:
        values = rng.uniform(low, 1.0, shape).astype(np.float32).tolist()
        type_ = f"tensor<{'x'.join(map(str, shape))}xf32>"
        return f"  %{name} = graph.constant dense<{values}> : {type_}"

    bias_lines = (
        [
            const("cb", (1, 4, 1, 1)),
            "  %cc = graph.add %c, %cb : (tensor<1x4x5x5xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x5x5xf32>",
        ]
        if with_bias
        else ["  %cc = graph.relu %c : tensor<1x4x5x5xf32>"]
    )
    text = "\n".join(
        [
            "func.func @main(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> {",
            const("w", (4, 2, 3, 3)),
            const("g", (4,)),
            const("b", (4,)),
            const("m", (4,)),
            const("v", (4,), low=0.5),
            "  %c = graph.conv2d %x, %w padding = [1, 1, 1, 1] : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>",
            *bias_lines,
            "  %y = graph.batch_norm %cc, %g, %b, %m, %v : (tensor<1x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>",
            "  func.return %y : tensor<1x4x5x5xf32>",
            "}",
        ]
    )
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    before, after, module = _run_before_after(
        text, lambda m: GraphDecomposePass().apply(Context(), m), x
    )
    names = [op.name for op in module.walk()]
    assert "graph.batch_norm" not in names
    # Folded (no subtraction of the mean left) only when the conv feeds the batch-norm
    # through a constant bias; after a relu it is opened instead.
    assert ("graph.sub" not in names) == with_bias
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)


def _conv_bias_batch_norm(rng, bias_shape: tuple[int, ...], result: str) -> str:
    """conv2d (1x2x4x4 -> 1x4x4x4, so C = W = 4) + constant bias of `bias_shape`, then a
    constant batch-norm over the sum, whose type is `result`."""

    def const(name: str, shape: tuple[int, ...], low: float = -1.0) -> str:
        values = rng.uniform(low, 1.0, shape).astype(np.float32).tolist()
        return f"  %{name} = graph.constant dense<{values}> : {_tensor(shape)}"

    channels = (int(result.split("x")[1]),)
    bn_types = ", ".join([result] + [_tensor(channels)] * 4)
    return "\n".join(
        [
            f"func.func @main(%x: tensor<1x2x4x4xf32>) -> {result} {{",
            const("w", (4, 2, 1, 1)),
            const("cb", bias_shape),
            *(const(name, channels) for name in ("g", "b", "m")),
            const("v", channels, low=0.5),
            "  %c = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x4x4xf32>",
            f"  %cc = graph.add %c, %cb : (tensor<1x4x4x4xf32>, {_tensor(bias_shape)}) -> {result}",
            f"  %y = graph.batch_norm %cc, %g, %b, %m, %v : ({bn_types}) -> {result}",
            f"  func.return %y : {result}",
            "}",
        ]
    )


def _tensor(shape: tuple[int, ...]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


@pytest.mark.parametrize(
    ("bias_shape", "folds"),
    [
        ((4, 1, 1), True),
        ((1, 4, 1, 1), True),
        ((1,), True),  # one number for every channel
        ((4,), False),  # broadcasts along W, not C
        ((1, 4), False),  # along H and W
        ((4, 1), False),  # along H
    ],
)
def test_conv_bias_batch_norm_folds_only_per_channel_bias(bias_shape, folds, rng):
    text = _conv_bias_batch_norm(rng, bias_shape, "tensor<1x4x4x4xf32>")
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    before, after, module = _run_before_after(
        text, lambda m: GraphDecomposePass().apply(Context(), m), x
    )
    names = [op.name for op in module.walk()]
    assert ("graph.sub" not in names) == folds
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("bias_shape", "result"),
    [((4, 1, 1, 1), "tensor<4x4x4x4xf32>"), ((1, 1, 4, 1, 1), "tensor<1x1x4x4x4xf32>")],
)
def test_conv_bias_batch_norm_not_folded_when_bias_grows_result(bias_shape, result, rng):
    # The add's result is larger than the conv's: folding would drop the broadcast.
    text = _conv_bias_batch_norm(rng, bias_shape, result)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    before, after, module = _run_before_after(
        text, lambda m: GraphDecomposePass().apply(Context(), m), x
    )
    assert "graph.sub" in [op.name for op in module.walk()]
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)


def test_simplify_keeps_results_and_removes_ops(rng):
    text = """
func.func @main(%x: tensor<4x16xf32>) -> tensor<16x4xf32> {
  %z = graph.constant dense<-0.0> : tensor<f32>
  %o = graph.constant dense<1.0> : tensor<16xf32>
  %a = graph.add %x, %z : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %m = graph.mul %a, %o : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %t = graph.transpose %m perm = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  %u = graph.transpose %t perm = [1, 0] : tensor<16x4xf32> -> tensor<4x16xf32>
  %r = graph.reshape %u : tensor<4x16xf32> -> tensor<64xf32>
  %s = graph.reshape %r : tensor<64xf32> -> tensor<16x4xf32>
  func.return %s : tensor<16x4xf32>
}"""
    x = rng.standard_normal((4, 16)).astype(np.float32)
    before, after, module = _run_before_after(
        text, lambda m: GraphSimplifyPass().apply(Context(), m), x
    )
    np.testing.assert_array_equal(after[0], before[0])
    function = next(iter(module.ops))
    assert [op.name for op in function.body.block.ops] == ["graph.reshape", "func.return"]


def _add_sub_zero(op: str, zero: str) -> str:
    return f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %z = graph.constant dense<{zero}> : tensor<f32>
  %s = graph.{op} %x, %z : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}}"""


@pytest.mark.parametrize(
    ("op", "zero", "removed"),
    [("add", "-0.0", True), ("sub", "0.0", True), ("add", "0.0", False), ("sub", "-0.0", False)],
)
def test_simplify_keeps_the_sign_of_zero(op, zero, removed):
    # -0.0 + 0.0 and -0.0 - (-0.0) are +0.0, so only x + (-0.0) and x - 0.0 are x.
    x = np.array([-0.0, 0.0, 2.0, -3.5], dtype=np.float32)
    before, after, module = _run_before_after(
        _add_sub_zero(op, zero), lambda m: GraphSimplifyPass().apply(Context(), m), x
    )
    np.testing.assert_array_equal(np.signbit(after[0]), np.signbit(before[0]))
    np.testing.assert_array_equal(after[0], before[0])
    assert (f"graph.{op}" not in [o.name for o in module.walk()]) == removed


def test_user_decomposition_rule_is_data(rng):
    # A user opens sigmoid into 1 / (1 + exp(-x)) by writing only the rule.
    rule = Decomposition(
        root="graph.sigmoid",
        operands=("x",),
        steps=(
            Step("one", "graph.constant", value=1.0),
            Step("neg", "graph.neg", ("x",)),
            Step("exp", "graph.exp", ("neg",)),
            Step("den", "graph.add", ("exp", "one")),
            Step("out", "graph.div", ("one", "den")),
        ),
    )
    x = rng.uniform(-4, 4, (4, 16)).astype(np.float32)
    before, after, module = _run_before_after(
        _single("graph.sigmoid %x : tensor<4x16xf32>", "tensor<4x16xf32>"),
        lambda m: PatternRewriteWalker(DecompositionPattern(rule)).rewrite_module(m),
        x,
    )
    assert "graph.sigmoid" not in [op.name for op in module.walk()]
    np.testing.assert_allclose(after[0], before[0], rtol=1e-6)


def test_decomposition_rule_reading_undefined_name_is_rejected():
    with pytest.raises(AssertionError, match="reads undefined"):
        Decomposition(root="graph.exp", operands=("x",), steps=(Step("y", "graph.neg", ("z",)),))
