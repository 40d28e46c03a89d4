"""TOSA text as mlir-opt 22 prints it (the pretty form torch-mlir and TFLite emit), built
from NumPy weights, and NumPy references of the TOSA ops the tests check against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

_ELEMENTS = {
    np.dtype(np.float32): "f32",
    np.dtype(np.int32): "i32",
    np.dtype(np.int8): "i8",
    np.dtype(np.bool_): "i1",
}


def ttype(shape: Sequence[int], element: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def ttype_of(array: Array) -> str:
    return ttype(array.shape, _ELEMENTS[array.dtype])


def const(name: str, array: Array) -> str:
    """A `tosa.const` holding `array` as hex bytes, as torch-mlir and TFLite print weights."""
    typ = ttype_of(array)
    data = np.ascontiguousarray(array).tobytes().hex().upper()
    return f'%{name} = "tosa.const"() <{{values = dense<"0x{data}"> : {typ}}}> : () -> {typ}'


def zero(name: str = "zp", element: str = "f32") -> str:
    typ = ttype([1], element)
    value = "0.000000e+00" if element.startswith("f") else "0"
    return f'%{name} = "tosa.const"() <{{values = dense<{value}> : {typ}}}> : () -> {typ}'


def const_shape(name: str, values: Sequence[int]) -> str:
    listed = ", ".join(str(v) for v in values)
    return (
        f"%{name} = tosa.const_shape {{values = dense<[{listed}]> : tensor<{len(values)}xindex>}}"
        f" : () -> !tosa.shape<{len(values)}>"
    )


def function(
    name: str, args: Sequence[str], results: Sequence[str], body: Sequence[str], returned: str
) -> str:
    """`func.func @name(%arg0: T0, ...) -> (R...)` with `body` and `return returned`."""
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    outs = results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
    lines = [f"func.func @{name}({params}) -> {outs} {{"]
    lines += [f"  {line}" for line in body]
    lines += [f"  return {returned} : {', '.join(results)}", "}"]
    return "\n".join(lines) + "\n"


# ---- NumPy references (NHWC, TOSA's attribute conventions) --------------------------------


def _windows(x: Array, kh: int, kw: int, stride: Sequence[int], dilation: Sequence[int]):
    """(i, j, patch) for each kernel tap: patch[n, oh, ow, c] = x[n, oh*s + i*d, ...]."""
    sy, sx = stride
    dy, dx = dilation
    oh = (x.shape[1] - dy * (kh - 1) - 1) // sy + 1
    ow = (x.shape[2] - dx * (kw - 1) - 1) // sx + 1
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dy, i * dy + sy * (oh - 1) + 1, sy)
            cols = slice(j * dx, j * dx + sx * (ow - 1) + 1, sx)
            yield i, j, x[:, rows, cols, :]


def _pad_nhwc(x: Array, pad: Sequence[int], value: float = 0.0) -> Array:
    top, bottom, left, right = pad
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=value)


def conv2d(x: Array, w_ohwi: Array, bias: Array, pad, stride, dilation) -> Array:
    xp = _pad_nhwc(x.astype(np.float64), pad)
    _, kh, kw, _ = w_ohwi.shape
    out = 0.0
    for i, j, patch in _windows(xp, kh, kw, stride, dilation):
        out = out + patch @ w_ohwi[:, i, j, :].T.astype(np.float64)
    return out + bias


def depthwise_conv2d(x: Array, w_hwcm: Array, bias: Array, pad, stride, dilation) -> Array:
    xp = _pad_nhwc(x.astype(np.float64), pad)
    kh, kw, c, m = w_hwcm.shape
    out = 0.0
    for i, j, patch in _windows(xp, kh, kw, stride, dilation):
        taps = patch[..., :, None] * w_hwcm[i, j].astype(np.float64)
        out = out + taps.reshape(*patch.shape[:3], c * m)
    return out + bias


def max_pool2d(x: Array, kernel, stride, pad) -> Array:
    xp = _pad_nhwc(x.astype(np.float64), pad, -np.inf)
    return np.max([p for _, _, p in _windows(xp, *kernel, stride, (1, 1))], axis=0)


def avg_pool2d(x: Array, kernel, stride, pad) -> Array:
    """Padding is left out of each window's divisor (TOSA's rule)."""
    total = _windows(_pad_nhwc(x.astype(np.float64), pad), *kernel, stride, (1, 1))
    count = _windows(_pad_nhwc(np.ones_like(x, np.float64), pad), *kernel, stride, (1, 1))
    return sum(p for _, _, p in total) / sum(p for _, _, p in count)
