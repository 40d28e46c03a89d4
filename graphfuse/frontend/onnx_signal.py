"""ONNX signal-processing operators (DFT, STFT) as graph ops.

A discrete Fourier transform of static length is a linear map, so each becomes one matmul
with a constant matrix of cosines and sines computed with NumPy at import time. ONNX keeps
complex values as a trailing dimension of 2 (real, imaginary) and real ones as a trailing
dimension of 1; the matrix reads the signal with that dimension flattened into it (row
n * channels + c) and writes bin k's real and imaginary parts to columns 2k and 2k + 1, so
neither side needs a split. A `dft_length` shorter than the signal drops its tail (zero
rows), a longer one pads it with zeros (no rows needed).

The window functions (HannWindow, HammingWindow, BlackmanWindow) and MelWeightMatrix take
only sizes and constants: the importer folds them with ONNX's reference evaluator.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
    element_of,
    i64_attr,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    Attrs,
    Inputs,
    converter,
    optional,
    required,
)

Matrix = np.ndarray[Any, np.dtype[np.float64]]


def dft_matrix(
    samples: int, channels: int, length: int, bins: int, inverse: bool, real_out: bool
) -> Matrix:
    """The [samples * channels, bins * 2] matrix (bins * 1 when `real_out`) of a DFT of
    `length` points read from `samples` samples with 1 (real) or 2 (complex) channels.

    Forward: X[k] = sum_n x[n] e^(-2 pi i n k / length); inverse: the conjugate (the
    division by `length` is left to the caller, so that sums of integers stay exact).
    `real_out` is the inverse of a one-sided spectrum (irfft): `samples` bins of a Hermitian
    spectrum, bins 0 and length/2 once and the others twice (their mirror images), real
    part only, as numpy.fft.irfft. Cosines and sines that are 0 or +-1 are exactly that,
    so a sum that cancels in exact arithmetic (the imaginary part of the Nyquist bin of a
    real signal) cancels in floating point too."""
    used = min(samples, length // 2 + 1 if real_out else length)
    n = np.arange(used)[:, None]
    k = np.arange(bins)[None, :]
    angle = 2.0 * np.pi * ((n * k) % length) / length
    cos, sin = np.cos(angle), np.sin(angle)
    cos[np.abs(cos) < 1e-9] = 0.0
    sin[np.abs(sin) < 1e-9] = 0.0
    if real_out:  # rows are bins, columns output samples
        weight = np.where((n == 0) | (2 * n == length), 1.0, 2.0)
        parts = [[weight * cos], [-weight * sin]]
    elif inverse:
        parts = [[cos, sin], [-sin, cos]]
    else:
        parts = [[cos, -sin], [sin, cos]]
    outputs = 1 if real_out else 2
    matrix = np.zeros((samples, channels, bins, outputs))
    for c in range(channels):
        for d in range(outputs):
            matrix[:used, c, :, d] = parts[c][d]
    return matrix.reshape(samples * channels, bins * outputs)


MATRIX_LIMIT = 64 << 20
"""Largest DFT matrix built, in bytes of float32 (a 2896-point complex DFT)."""


def _matrix(
    b: Builder, samples: int, channels: int, length: int, bins: int, inverse: bool, real_out: bool
) -> Matrix:
    """dft_matrix, refused when it would be larger than MATRIX_LIMIT."""
    size = samples * channels * bins * (1 if real_out else 2) * 4
    if size > MATRIX_LIMIT:
        raise b.fail(
            f"a {length}-point {b.op_type} is built as a matmul with a constant "
            f"{samples * channels}x{size // 4 // (samples * channels)} matrix "
            f"({size >> 20} MiB), over graphfuse's limit of {MATRIX_LIMIT >> 20} MiB"
        )
    return dft_matrix(samples, channels, length, bins, inverse, real_out)


def _apply(b: Builder, x: Value, matrix: Matrix) -> Value:
    """x [..., K] @ matrix [K, N] -> [..., N], as a 2-D matmul."""
    shape = shape_of(x)
    rows = math.prod(shape[:-1])
    flat = b.reshape(x, [rows, shape[-1]])
    dtype = numpy_dtype(element_of(x, f"node {b.node}"))
    product = b.op(graph.MatmulOp, [flat, matrix.astype(dtype)], [rows, matrix.shape[1]])
    return b.reshape(product, [*shape[:-1], matrix.shape[1]])


def _scalar(b: Builder, value: Value | None, what: str) -> int | None:
    if value is None:
        return None
    values = b.ints(value, what)
    if len(values) != 1:
        raise b.fail(f"{what} must be a scalar, got {len(values)} values")
    return values[0]


def _dft_axis(b: Builder, inputs: Inputs, attrs: Attrs, rank: int) -> int:
    """DFT's axis: an attribute before opset 20 (default 1), an input since (default -2).
    The converter does not see the opset, so an axis given neither way is taken where both
    defaults agree (a signal of one dimension) and refused elsewhere."""
    axis = _scalar(b, optional(inputs, 2), "DFT's axis input")
    if axis is None:
        axis = attrs.get("axis")
    if axis is None:
        if rank != 3:
            raise b.fail(
                "DFT without axis on a signal of several dimensions: the default axis depends "
                "on the opset (1 before 20, -2 since); give the axis explicitly"
            )
        axis = 1
    if not -rank <= axis < rank:
        raise b.fail(f"DFT axis {axis} is out of range for a rank-{rank} input")
    axis %= rank
    if axis in (0, rank - 1):
        raise b.fail(f"DFT axis {axis} is the batch or the real/imaginary dimension")
    return axis


@converter("DFT")
def _dft(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x = required(inputs)
    shape = shape_of(x)
    rank = len(shape)
    if rank < 3 or shape[-1] not in (1, 2):
        raise b.fail(f"DFT input of shape {rules.format_shape(shape)}: expected [batch, ..., 1|2]")
    axis = _dft_axis(b, inputs, attrs, rank)
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    samples = shape[axis]
    length = _scalar(b, optional(inputs, 1), "DFT's dft_length")
    real_out = inverse and onesided
    if length is None:
        length = 2 * (samples - 1) if real_out else samples
    if length < 1:
        raise b.fail(f"DFT length {length} must be positive")
    bins = length if real_out else (length // 2 + 1 if onesided else length)
    matrix = _matrix(b, samples, shape[-1], length, bins, inverse, real_out)
    # Move the transformed axis next to the channels, apply, move it back.
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    moved = b.transpose(x, perm)
    transformed = _apply(b, b.reshape(moved, [*shape_of(moved)[:-2], samples * shape[-1]]), matrix)
    if inverse:
        transformed = b.binary(graph.DivOp, transformed, np.array(length, np.float32))
    outputs = 1 if real_out else 2
    result = b.reshape(transformed, [*shape_of(moved)[:-2], bins, outputs])
    back = [perm.index(d) for d in range(rank)]
    return [b.transpose(result, back)]


@converter("STFT")
def _stft(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    """Frames gathered from the signal (indices known at import), weighted by the window,
    transformed by one DFT matrix: [batch, frames, bins, 2]."""
    signal = required(inputs)
    shape = shape_of(signal)
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise b.fail(f"STFT signal of shape {rules.format_shape(shape)}: expected [batch, N, 1|2]")
    step = _scalar(b, required(inputs, 1), "STFT's frame_step")
    window = optional(inputs, 2)
    frame_length = _scalar(b, optional(inputs, 3), "STFT's frame_length")
    if frame_length is None:
        frame_length = shape[1] if window is None else shape_of(window)[0]
    if window is not None and shape_of(window) != (frame_length,):
        raise b.fail(
            f"STFT window of shape {rules.format_shape(shape_of(window))}: expected "
            f"[{frame_length}] (frame_length)"
        )
    if step is None or step < 1 or not 1 <= frame_length <= shape[1]:
        raise b.fail(
            f"STFT frame_step {step}, frame_length {frame_length} do not fit a signal "
            f"of {shape[1]} samples"
        )
    frames = 1 + (shape[1] - frame_length) // step
    indices = np.arange(frames)[:, None] * step + np.arange(frame_length)[None, :]
    framed = b.op(
        graph.GatherOp,
        [signal, indices.astype(np.int64)],
        [shape[0], frames, frame_length, shape[2]],
        axis=i64_attr(1),
    )
    bins = frame_length // 2 + 1 if attrs.get("onesided", 1) else frame_length
    matrix = _matrix(b, frame_length, shape[2], frame_length, bins, False, False)
    if window is not None and not isinstance(window, SSAValue):
        matrix *= np.repeat(np.asarray(window, np.float64), shape[2])[:, None]
    elif window is not None:
        framed = b.binary(graph.MulOp, framed, b.reshape(window, [frame_length, 1]))
    flat = b.reshape(framed, [shape[0], frames, frame_length * shape[2]])
    return [b.reshape(_apply(b, flat, matrix), [shape[0], frames, bins, 2])]
