"""The bundled examples run in the reference interpreter and match NumPy written directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * g + b


def _gelu(x):
    from math import erf, sqrt

    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def _transformer(x, ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2):
    h = _layer_norm(x, ln1_g, ln1_b)
    heads = lambda t: t.reshape(1, 128, 4, 64).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(h @ wq + bq), heads(h @ wk + bk), heads(h @ wv + bv)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(64)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(1, 128, 256)
    r = x + ctx @ wo + bo
    return r + _gelu(_layer_norm(r, ln2_g, ln2_b) @ w1 + b1) @ w2 + b2


def test_transformer_block_matches_numpy():
    module = parse_file(EXAMPLES / "transformer_block.mlir")
    inputs = reference.random_inputs(reference.find_function(module, "main"), seed=7)
    # Scale weights as a trained model would have them, so activations stay moderate.
    scaled = [a if a.ndim != 2 else a / np.sqrt(a.shape[0]) for a in inputs]
    (out,) = reference.run(module, "main", *scaled)
    expected = _transformer(*(a.astype(np.float64) for a in scaled))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def _conv3x3_same(x, w):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(padded, (3, 3), axis=(2, 3))  # n c h w kh kw
    return np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


def test_resnet_block_matches_numpy():
    module = parse_file(EXAMPLES / "resnet_block.mlir")
    x, w1, w2, g1, b1, g2, b2 = reference.random_inputs(
        reference.find_function(module, "main"), seed=3
    )
    (out,) = reference.run(module, "main", x, w1, w2, g1, b1, g2, b2)

    def bn(t, g, b):
        c = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
        return (t - 0.05) / np.sqrt(1.5 + 1e-5) * c(g) + c(b)

    x64 = x.astype(np.float64)
    h = np.maximum(bn(_conv3x3_same(x64, w1), g1, b1), 0)
    expected = np.maximum(bn(_conv3x3_same(h, w2), g2, b2) + x64, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
