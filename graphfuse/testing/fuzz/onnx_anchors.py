"""Recipes for the anchor ops of the ONNX generator: Conv, pooling, Gemm, MatMul, Gelu.

Kept apart from onnx_recipes because each needs its operand's layout (NCHW, [M, K]) and
builds the other operands to fit: convolution weights for strided, dilated, grouped and
depthwise cases with asymmetric pads, Gemm's C in every broadcast form, MatMul at every
rank including 1-D operands on either side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import GraphBuilder, Tensor

F32 = np.dtype(np.float32)


def _int(b: GraphBuilder, low: int, high: int) -> int:
    return int(b.rng.integers(low, high + 1))


def _flip(b: GraphBuilder, p: float = 0.5) -> bool:
    return bool(b.rng.random() < p)


def _weights(b: GraphBuilder, shape: tuple[int, ...]) -> str:
    """Constant weights scaled by fan-in, so stacked layers keep values near 1."""
    fan_in = max(1, int(np.prod(shape[1:])))
    return b.const((b.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(F32))


def _image(b: GraphBuilder) -> Tensor:
    """An NCHW float value, or a new input of random batch, channels and size."""
    found = b.pick(lambda t: t.dtype == F32 and t.rank == 4 and t.shape[2] * t.shape[3] > 1)
    if found is not None and _flip(b, 0.8):
        return found
    channels = int(b.rng.choice([1, 2, 3, 4, 6, 8, 16]))
    size = int(b.rng.choice([1, 3, 5, 7, 8, 12, 16]))
    return b.input(F32, (_int(b, 1, 2), channels, size, _int(b, max(1, size - 2), size + 2)))


def _groups(b: GraphBuilder, channels: int) -> tuple[int, int]:
    """(group, output channels): ungrouped, depthwise (multiplier 1 or 2), or a divisor."""
    kind = _int(b, 0, 3)
    if kind == 1:
        return channels, channels * _int(b, 1, 2)
    divisors = [g for g in range(2, channels) if channels % g == 0]
    if kind == 2 and divisors:
        group = int(b.rng.choice(divisors))
        return group, group * _int(b, 1, 3)
    return 1, int(b.rng.choice([1, 3, 4, 8, 16]))


def _window_attrs(b: GraphBuilder, kernel: list[int]) -> dict[str, Any]:
    """Strides 1-3, asymmetric pads below the kernel size, or an auto_pad mode."""
    attrs: dict[str, Any] = {"kernel_shape": kernel}
    if _flip(b, 0.5):
        attrs["strides"] = [_int(b, 1, 3), _int(b, 1, 3)]
    if _flip(b, 0.15):
        attrs["auto_pad"] = str(b.rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
    elif _flip(b, 0.6):
        attrs["pads"] = [_int(b, 0, k - 1) for k in kernel + kernel]
    return attrs


def fits(size: tuple[int, ...], kernel: list[int], attrs: dict[str, Any]) -> bool:
    """Whether each (dilated) window fits the padded input: onnxruntime runs some models
    where it does not, with an output size ONNX leaves undefined."""
    if str(attrs.get("auto_pad", "NOTSET")).startswith("SAME"):
        return True
    pads = attrs.get("pads", [0, 0, 0, 0]) if "auto_pad" not in attrs else [0, 0, 0, 0]
    dilations = attrs.get("dilations", [1, 1])
    return all(
        size[i] + pads[i] + pads[i + 2] >= dilations[i] * (kernel[i] - 1) + 1 for i in range(2)
    )


def conv(b: GraphBuilder) -> None:
    x = _image(b)
    channels = x.shape[1]
    group, out = _groups(b, channels)
    kernel = [_int(b, 1, 3), _int(b, 1, 3)]
    attrs = _window_attrs(b, kernel)
    if _flip(b, 0.3):
        attrs["dilations"] = [_int(b, 1, 2), _int(b, 1, 2)]
    if group > 1:
        attrs["group"] = group
    if not fits(x.shape[2:], kernel, attrs):
        return
    inputs = [x.name, _weights(b, (out, channels // group, *kernel))]
    if _flip(b, 0.6):
        inputs.append(b.const(b.rng.standard_normal(out).astype(F32)))
    result = b.node("Conv", inputs, **attrs)
    if result is not None and _flip(b, 0.5):
        b.node("Relu", [result[0].name])


def pool(b: GraphBuilder) -> None:
    """MaxPool/AveragePool (count_include_pad either way; ceil_mode and dilations rarely,
    which graphfuse refuses), GlobalAveragePool, GlobalMaxPool."""
    x = _image(b)
    kind = str(b.rng.choice(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]))
    if kind.startswith("Global"):
        b.node(kind, [x.name])
        return
    kernel = [_int(b, 1, 3), _int(b, 1, 3)]
    attrs = _window_attrs(b, kernel)
    if not fits(x.shape[2:], kernel, attrs):
        return
    if kind == "AveragePool" and _flip(b):
        attrs["count_include_pad"] = 1
    if _flip(b, 0.05):
        attrs["ceil_mode"] = 1
    b.node(kind, [x.name], **attrs)


def gemm(b: GraphBuilder) -> None:
    """Gemm with transA/transB, alpha, beta (0 included), C absent or broadcast."""
    a = b.float_value(min_rank=2, max_rank=2)
    trans_a = _int(b, 0, 1)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = int(b.rng.choice([1, 3, 7, 8, 16, 127]))
    trans_b = _int(b, 0, 1)
    w = _weights(b, (n, k) if trans_b else (k, n))
    attrs: dict[str, Any] = {"transA": trans_a, "transB": trans_b}
    if _flip(b, 0.4):
        attrs["alpha"] = float(b.rng.choice([0.5, 2.0, -1.0]))
    if _flip(b, 0.4):
        attrs["beta"] = float(b.rng.choice([0.0, 0.5, 2.0]))
    inputs = [a.name, w]
    if _flip(b, 0.8):
        c_shape = [(n,), (1, n), (m, 1), (m, n), (), (1, 1)][_int(b, 0, 5)]
        inputs.append(b.const(b.rng.standard_normal(c_shape).astype(F32)))
    b.node("Gemm", inputs, **attrs)


def matmul(b: GraphBuilder) -> None:
    """MatMul of every rank, 1-D operands on either side, batch dims broadcast."""
    a = b.float_value(min_rank=1, max_rank=4)
    k = a.shape[-1]
    n = int(b.rng.choice([1, 3, 7, 16]))
    batch = a.shape[:-2] if a.rank > 2 else ()
    shapes = [(k,), (k, n), (*[1] * len(batch), k, n), (*batch, k, n), (2, k, n)]
    other_shape = shapes[_int(b, 0, len(shapes) - 1)]
    other = _weights(b, other_shape[::-1])
    transposed = b.node("Transpose", [other]) if len(other_shape) > 1 else None
    rhs = transposed[0].name if transposed else other
    if a.rank == 1 and _flip(b, 0.5):
        lhs = _weights(b, (n, k))
        b.node("MatMul", [lhs, a.name])
        return
    b.node("MatMul", [a.name, rhs])


def gelu(b: GraphBuilder) -> None:
    if b.opset < 20:
        return
    x = b.float_value()
    b.node("Gelu", [x.name], approximate=str(b.rng.choice(["none", "tanh"])))


ANCHORS: dict[Callable[[GraphBuilder], None], float] = {
    conv: 5,
    pool: 2,
    gemm: 2,
    matmul: 4,
    gelu: 1,
}
