"""ONNX DFT and STFT imported as matmuls with constant cos/sin matrices, checked against
NumPy's FFT and onnxruntime; the window functions fold at import."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import check_against_onnxruntime, model

F = TensorProto.FLOAT
node = helper.make_node


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(built: Any, feeds: dict[str, np.ndarray], compile_it: bool = False) -> list[Any]:
    """The interpreter's outputs and, when asked, the compiled module's."""
    module = from_onnx(built)
    arrays = list(feeds.values())
    results = [list(reference.run(module, "main", *arrays))]
    if compile_it:
        got = graphfuse.compile(module)(*arrays)
        results.append(list(got) if isinstance(got, tuple) else [got])
    return results


def _as_pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def _check(built: Any, feeds: dict[str, np.ndarray], want: np.ndarray, compile_it: bool) -> None:
    for outputs in _run(built, feeds, compile_it):
        assert outputs[0].shape == want.shape
        np.testing.assert_allclose(outputs[0], want, rtol=1e-4, atol=1e-4)


def _dft_model(
    x: np.ndarray, out_shape: list[int], opset: int, axis: int, length: int | None, **attrs: Any
) -> Any:
    inits: dict[str, np.ndarray] = {}
    inputs = ["x", ""]
    if length is not None:
        inits["n"] = np.array(length, np.int64)
        inputs[1] = "n"
    if opset >= 20:
        inits["axis"] = np.array(axis, np.int64)
        inputs.append("axis")
    else:
        attrs["axis"] = axis
    while not inputs[-1]:
        inputs.pop()
    dft = node("DFT", inputs, ["y"], **attrs)
    return model([dft], {"x": x}, {"y": (F, out_shape)}, inits, opset=opset)


# (inverse, onesided, complex input, dft_length)
CASES = [
    (0, 0, False, None),
    (0, 0, True, None),
    (0, 1, False, None),
    (0, 0, False, 5),  # shorter: the signal's tail is dropped
    (0, 1, False, 11),  # longer: zero padded
    (1, 0, True, None),
    (1, 0, True, 6),
    (1, 1, True, None),  # irfft to 2 * (bins - 1) samples
    (1, 1, True, 9),  # irfft to an odd length
]


@pytest.mark.parametrize(("inverse", "onesided", "complex_in", "length"), CASES)
@pytest.mark.parametrize(("opset", "axis"), [(17, 2), (20, -2), (20, 1)])
def test_dft_matches_numpy(
    inverse: int, onesided: int, complex_in: bool, length: int | None, opset: int, axis: int
) -> None:
    shape = [2, 3, 8]
    z = _rand(*shape) + (1j * _rand(*shape, seed=1) if complex_in else 0)
    x = _as_pairs(z) if complex_in else z[..., None].astype(np.float32)
    signal_axis = axis % 4
    n = length or (2 * (shape[signal_axis] - 1) if inverse and onesided else shape[signal_axis])
    if inverse and onesided:
        want = np.fft.irfft(z, n=n, axis=signal_axis)[..., None].astype(np.float32)
    elif inverse:
        want = _as_pairs(np.fft.ifft(z, n=n, axis=signal_axis))
    else:
        full = np.fft.fft(z, n=n, axis=signal_axis)
        if onesided:
            full = np.take(full, range(n // 2 + 1), axis=signal_axis)
        want = _as_pairs(full)
    built = _dft_model(x, list(want.shape), opset, axis, length, inverse=inverse, onesided=onesided)
    _check(built, {"x": x}, want, compile_it=False)


def test_dft_compiled_and_equal_to_onnxruntime() -> None:
    x = _rand(2, 16, 3, 2)
    built = _dft_model(x, [2, 16, 3, 2], 20, 1, None)
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_inverse_real_dft_compiled() -> None:
    z = np.fft.rfft(_rand(3, 10), axis=1)
    x = _as_pairs(z)
    built = _dft_model(x, [3, 10, 1], 20, 1, None, inverse=1, onesided=1)
    want = np.fft.irfft(z, n=10, axis=1)[..., None]
    _check(built, {"x": x}, want, compile_it=True)


def test_dft_default_axis_of_a_one_dimensional_signal() -> None:
    x = _rand(2, 6, 1)
    dft = node("DFT", ["x"], ["y"])
    built = model([dft], {"x": x}, {"y": (F, [2, 6, 2])}, opset=20)
    _check(built, {"x": x}, _as_pairs(np.fft.fft(x[..., 0], axis=1)), compile_it=False)


def test_dft_default_axis_of_a_two_dimensional_signal_is_refused() -> None:
    x = _rand(2, 6, 4, 1)
    built = model([node("DFT", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 6, 4, 2])}, opset=20)
    with pytest.raises(ImportFailure, match="the default axis depends on the opset"):
        from_onnx(built)


def test_dft_on_the_channel_axis_is_refused() -> None:
    x = _rand(2, 6, 1)
    built = model(
        [node("DFT", ["x"], ["y"], axis=2)], {"x": x}, {"y": (F, [2, 6, 2])}, opset=17, check=False
    )
    with pytest.raises(ImportFailure, match="DFT axis 2 is the batch or the real/imaginary"):
        from_onnx(built)


def test_dft_too_large_for_a_matrix_is_refused() -> None:
    x = _rand(1, 4096, 2)
    built = _dft_model(x, [1, 4096, 2], 17, 1, None)
    with pytest.raises(ImportFailure, match=r"4096-point DFT .* 8192x8192 matrix \(256 MiB\)"):
        from_onnx(built)


# ---- STFT ------------------------------------------------------------------------------------


def _stft_reference(signal: np.ndarray, step: int, window: np.ndarray, onesided: bool) -> Any:
    z = signal[..., 0] + (1j * signal[..., 1] if signal.shape[-1] == 2 else 0)
    length = window.shape[0]
    frames = 1 + (z.shape[1] - length) // step
    stacked = np.stack([z[:, f * step : f * step + length] * window for f in range(frames)], 1)
    spectrum = np.fft.fft(stacked, axis=-1)
    if onesided:
        spectrum = spectrum[..., : length // 2 + 1]
    return _as_pairs(spectrum)


@pytest.mark.parametrize("window_kind", ["initializer", "input", "none"])
@pytest.mark.parametrize(("channels", "onesided"), [(1, 1), (1, 0), (2, 0)])
def test_stft_matches_numpy(window_kind: str, channels: int, onesided: int) -> None:
    signal = _rand(2, 40, channels)
    window = np.hanning(12).astype(np.float32)
    feeds = {"signal": signal}
    inits = {"step": np.array(5, np.int64), "length": np.array(12, np.int64)}
    inputs = ["signal", "step", "window", "length"]
    if window_kind == "initializer":
        inits["window"] = window
    elif window_kind == "input":
        feeds["window"] = window
    else:
        inputs[2] = ""
        window = np.ones(12, np.float32)
    want = _stft_reference(signal, 5, window, bool(onesided))
    stft = node("STFT", inputs, ["y"], onesided=onesided)
    built = model([stft], feeds, {"y": (F, list(want.shape))}, inits, opset=17)
    _check(built, feeds, want, compile_it=window_kind == "input" and channels == 1)


def test_stft_frame_step_computed_is_refused() -> None:
    signal = _rand(1, 16, 1)
    stft = node("STFT", ["signal", "step", "", "length"], ["y"])
    feeds = {"signal": signal, "step": np.array([4], np.int64)}
    inits = {"length": np.array(8, np.int64)}
    built = model([stft], feeds, {"y": (F, [1, 3, 5, 2])}, inits, opset=17)
    with pytest.raises(ImportFailure, match="frame_step comes from graph input 'step'"):
        from_onnx(built)


# ---- window functions ------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_functions_fold_and_weigh_a_signal(op: str, periodic: int) -> None:
    x = _rand(3, 10)
    nodes = [node(op, ["size"], ["w"], periodic=periodic), node("Mul", ["x", "w"], ["y"])]
    inits = {"size": np.array(10, np.int32)}
    built = model(nodes, {"x": x}, {"y": (F, [3, 10])}, inits, opset=17)
    check_against_onnxruntime(built, {"x": x})
