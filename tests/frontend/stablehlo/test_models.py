"""JAX functions imported through StableHLO, compiled, run, and compared with JAX's own
result: an MLP, softmax and layer norm, attention, CNNs in flax's and torch's layouts,
and the data-movement and elementwise ops JAX emits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import graphfuse


def _random(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


def _check(f: Callable[..., Any], *args: Any, tolerance: float = 1e-5) -> None:
    """f imported with graphfuse.from_jax, compiled and run, against jax.jit(f)."""
    compiled = graphfuse.compile(graphfuse.from_jax(f, *args))
    got = compiled(*args)
    expected = jax.jit(f)(*args)
    got_all = got if isinstance(got, tuple) else (got,)
    expected_all = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_all) == len(expected_all)
    for index, (g, e) in enumerate(zip(got_all, expected_all, strict=True)):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, f"result #{index}"
        np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance, err_msg=f"#{index}")


def _mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    h = jax.nn.relu(x @ w1 + b1)
    return jax.nn.gelu(h @ w2 + b2, approximate=False), jax.nn.gelu(h, approximate=True)


def test_stablehlo_mlp_matches_jax() -> None:
    _check(_mlp, *_random((8, 32), (32, 64), (64,), (64, 16), (16,)))


def _norms(x: Any, scale: Any, bias: Any) -> Any:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    normed = (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias
    return jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=0), normed


def test_stablehlo_softmax_and_layer_norm_match_jax() -> None:
    _check(_norms, *_random((6, 40), (40,), (40,)))


def _attention(x: Any, wq: Any, wk: Any, wv: Any) -> Any:
    batch, seq, dim = x.shape
    heads = 2

    def split(t: Any) -> Any:
        return t.reshape(batch, seq, heads, dim // heads)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dim // heads)
    mask = jnp.tril(jnp.ones((seq, seq), bool))
    scores = jnp.where(mask, scores, -1e9)
    out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
    return out.reshape(batch, seq, dim)


def test_stablehlo_attention_with_batched_dot_general_matches_jax() -> None:
    _check(_attention, *_random((2, 8, 16), (16, 16), (16, 16), (16, 16)))


def _cnn_nhwc(x: Any, w1: Any, b1: Any, w2: Any) -> Any:
    """flax's layout: NHWC input, HWIO kernels; 'SAME' and strided convs, max and avg pools."""
    dims = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dims) + b1
    y = jax.nn.relu(y)
    pooled = lax.reduce_window(y, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    z = lax.conv_general_dilated(
        pooled, w2, (2, 2), ((1, 0), (1, 0)), rhs_dilation=(1, 1), dimension_numbers=dims
    )
    window = (1, 2, 2, 1)
    avg = lax.reduce_window(z, 0.0, lax.add, window, window, "VALID") / 4.0
    return avg, jnp.mean(z, axis=(1, 2))


def test_stablehlo_nhwc_cnn_with_pools_matches_jax() -> None:
    _check(_cnn_nhwc, *_random((2, 16, 16, 3), (3, 3, 3, 8), (8,), (3, 3, 8, 12)), tolerance=1e-4)


def _cnn_nchw(x: Any, w: Any, w1d: Any, x1d: Any) -> Any:
    """torch's layout (NCHW / OIHW), grouped, dilated and strided; a 1-D conv; an avg pool
    with padding (flax's count_include_pad)."""
    y = lax.conv_general_dilated(
        x,
        w,
        (2, 1),
        ((2, 2), (1, 1)),
        rhs_dilation=(2, 1),
        feature_group_count=2,
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )
    pooled = (
        lax.reduce_window(
            y, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), ((0, 0), (0, 0), (1, 1), (1, 1))
        )
        / 9.0
    )
    line = lax.conv_general_dilated(x1d, w1d, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
    return pooled, line


def test_stablehlo_nchw_grouped_and_1d_convolutions_match_jax() -> None:
    _check(_cnn_nchw, *_random((1, 4, 12, 10), (6, 2, 3, 3), (5, 3, 4), (2, 20, 3)), tolerance=1e-4)


def _data_movement(x: Any, y: Any) -> Any:
    iota = jnp.arange(8, dtype=jnp.float32)
    chosen = jnp.where(x > y, x[:, ::2].repeat(2, axis=1), jnp.pad(y, ((0, 0), (1, 1)))[:, 1:-1])
    joined = jnp.concatenate([chosen, x.T.reshape(4, 8), jnp.flip(y, axis=1)], axis=0)
    interior = lax.pad(x, 0.5, ((0, 0, 0), (1, -1, 1)))
    counts = jnp.sum((x > 0).astype(jnp.int32), axis=1)
    anything = jnp.any(x > 2.5, axis=0)
    return joined + iota, interior, counts, anything, jnp.max(x, axis=1), jnp.prod(y, axis=0)


def test_stablehlo_data_movement_matches_jax() -> None:
    _check(_data_movement, *_random((4, 8), (4, 8)))


def _elementwise(x: Any, y: Any) -> Any:
    positive = jnp.abs(y) + 0.5
    first = jax.scipy.special.erf(x) + jnp.clip(x, -1.0, 1.0) + jnp.sin(x) * jnp.cos(y)
    second = jnp.floor(x) - jnp.ceil(y) + x.astype(jnp.int32).astype(jnp.float32)
    third = positive**y + jnp.log1p(positive) + jnp.expm1(x / 4) + jnp.sqrt(positive)
    fourth = jnp.tanh(x) * jax.nn.sigmoid(y) - jnp.exp(-positive) / positive
    fifth = jnp.minimum(x, y) + jnp.maximum(x, y) + jnp.sign(x) + jnp.fmod(x, positive)
    return first, second, third, fourth, fifth, jnp.round(x * 3), (x < y) ^ (x > 0)


def test_stablehlo_elementwise_ops_match_jax() -> None:
    _check(_elementwise, *_random((3, 16), (3, 16)))


@pytest.mark.parametrize("name", ["from_stablehlo", "from_jax"])
def test_stablehlo_entry_points_are_graphfuse_attributes(name: str) -> None:
    from graphfuse.frontend import stablehlo

    assert getattr(graphfuse, name) is getattr(stablehlo, name)


def _indexing(x: Any, table: Any, ids: Any, ids2: Any) -> Any:
    """Embedding lookups (gather as numpy.take on either axis), a transposed convolution
    (lhs dilation and a reversed kernel), a dynamic slice at known starts."""
    up = lax.conv_transpose(
        x,
        table[:3, :2].reshape(3, 1, 2, 1) * jnp.ones((3, 3, 2, 4)),
        (2, 2),
        "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    rows = jnp.take(table, ids, axis=0)
    columns = table[:, ids2]
    window = lax.dynamic_slice(x, (0, 1, 2, 0), (1, 3, 3, 2))
    return up, rows, columns, window


def test_stablehlo_gather_transposed_conv_and_dynamic_slice_match_jax() -> None:
    x, table = _random((1, 5, 5, 2), (10, 6))
    ids = np.array([1, 3, 9, 0, 3], np.int32)
    ids2 = np.array([[0, 5], [2, 2], [4, 1]], np.int32)
    _check(_indexing, x, table, ids, ids2, tolerance=1e-4)


def _dtypes(x: Any, u: Any) -> Any:
    half = (x * 2).astype(jnp.float16) + jnp.float16(1)
    return half, jnp.sum(u, axis=0) + jnp.arange(3, dtype=jnp.uint8), (x > 0).astype(jnp.int8)


def test_stablehlo_f16_and_integer_types_match_jax() -> None:
    (x,) = _random((2, 3))
    _check(_dtypes, x, np.arange(6, dtype=np.uint8).reshape(2, 3), tolerance=1e-3)


def test_stablehlo_bf16_matches_jax() -> None:
    """bf16 values travel as float32 arrays holding bf16 numbers (graphfuse's runtime)."""
    import ml_dtypes

    def f(x: Any, w: Any) -> Any:
        return jax.nn.relu(x @ w + jnp.bfloat16(0.5))

    x, w = (a.astype(ml_dtypes.bfloat16) for a in _random((4, 8), (8, 3)))
    compiled = graphfuse.compile(graphfuse.from_jax(f, x, w))
    got = compiled(x.astype(np.float32), w.astype(np.float32))
    expected = np.asarray(jax.jit(f)(x, w)).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


def test_stablehlo_bf16_constant_of_several_values_matches_jax() -> None:
    """A non-splat bf16 constant (jaxlib's bindings cannot iterate bf16): its values read
    exactly, NaN, infinity, the largest and the smallest normal bf16 included."""
    import ml_dtypes

    values = [1.5, -2.25, 3.140625, 3.3895e38, -np.inf, np.nan, 1.2e-38, -0.0]
    table = np.array(values, np.float32).astype(ml_dtypes.bfloat16)

    def f(x: Any) -> Any:
        return (x * jnp.asarray(table)).astype(jnp.float32)

    x = np.array([1, 2, 0.5, 1, 4, 1, 1, -1], np.float32).astype(ml_dtypes.bfloat16)
    got = graphfuse.compile(graphfuse.from_jax(f, x))(x.astype(np.float32))
    expected = np.asarray(jax.jit(f)(x))
    assert expected[0] == 1.5 and np.isnan(expected[5]) and expected[6] > 0
    np.testing.assert_array_equal(got, expected)


def test_stablehlo_round_half_away_from_zero_is_exact_like_jax() -> None:
    """lax.round (round_nearest_afz) next to .5 and past 2^23, where floor(|x| + 0.5) in
    f32 rounds the sum (0.49999997 -> 1, 8388609 -> 8388610); in f32 and f16."""
    edges = [0.49999997, -0.49999997, 8388609.0, -8388609.0, 0.5, -0.5, 2.5, -2.5, 1.4999999]
    x = np.array([*edges, 3e38, np.inf, -np.inf, np.nan, -0.25, 0.0], np.float32)
    h = np.array([0.49975586, 2049.0, -2049.0, 0.5, -1.5, 1023.5, np.nan], np.float16)
    f = lambda a, b: (lax.round(a), lax.round(b))  # noqa: E731
    expected = [np.asarray(e) for e in jax.jit(f)(x, h)]
    assert expected[0][0] == 0 and expected[0][2] == 8388609 and expected[1][0] == 0
    got = graphfuse.compile(graphfuse.from_jax(f, x, h))(x, h)
    for actual, want in zip(got, expected, strict=True):
        assert actual.dtype == want.dtype
        np.testing.assert_array_equal(actual, want)
