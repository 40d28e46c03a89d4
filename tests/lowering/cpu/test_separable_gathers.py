"""A gathered resize reads its columns from a pass over the rows (lowering/cpu/
separable_gathers.py): compiled linear and cubic Resize match onnxruntime at upsampling,
downsampling and odd sizes, every coordinate transform, on one and two threads, with an
epilogue fused after; the rows pass is made where a part reads two rows or more (not for
nearest)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.lowering.cpu import separable_gathers
from graphfuse.testing.onnx_models import model as onnx_model
from graphfuse.testing.onnx_models import onnxruntime_outputs
from tests.lowering.cpu.recorded import record_returns


def _made(monkeypatch: Any) -> list[int]:
    """The rows buffers separate_gathers makes, per kernel loop-tile-matmul rewrites."""
    return record_returns(monkeypatch, "separate_gathers", separable_gathers.separate_gathers)


def _resize(shape: list[int], sizes: list[int], relu: bool, **attrs: Any) -> Any:
    """Resize of x to `sizes` (then a ReLU when `relu`), as an ONNX model."""
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["r" if relu else "y"], **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["r"], ["y"]))
    inits = {"sizes": np.array(sizes, np.int64)}
    x = np.zeros(shape, np.float32)
    return onnx_model(nodes, {"x": x}, {"y": (TensorProto.FLOAT, sizes)}, inits, 18)


CASES = {
    "linear x2 half_pixel": ([1, 16, 20, 24], [1, 16, 40, 48], "linear", "half_pixel"),
    "linear x1.5 odd, align_corners": ([2, 8, 13, 11], [2, 8, 19, 17], "linear", "align_corners"),
    "linear down, asymmetric": ([1, 8, 32, 30], [1, 8, 15, 13], "linear", "asymmetric"),
    "linear pytorch_half_pixel": ([1, 8, 9, 7], [1, 8, 28, 21], "linear", "pytorch_half_pixel"),
    "cubic x2": ([1, 8, 12, 10], [1, 8, 24, 20], "cubic", "half_pixel"),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_gathered_resize_matches_onnxruntime(case: str, threads: int, monkeypatch: Any) -> None:
    made = _made(monkeypatch)
    shape, sizes, mode, transform = CASES[case]
    built = _resize(shape, sizes, relu=True, mode=mode, coordinate_transformation_mode=transform)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    (want,) = onnxruntime_outputs(built, {"x": x})
    compiled = graphfuse.compile(from_onnx(built), options=CompileOptions(threads=threads))
    np.testing.assert_allclose(compiled(x), want, rtol=1e-5, atol=1e-5)
    assert sum(made) == 1, made


def test_nearest_resize_is_left_alone(monkeypatch: Any) -> None:
    """A nearest resize reads one point per output: nothing to share."""
    made = _made(monkeypatch)
    built = _resize([1, 8, 20, 24], [1, 8, 40, 48], relu=False, mode="nearest")
    x = np.random.default_rng(1).standard_normal([1, 8, 20, 24]).astype(np.float32)
    (want,) = onnxruntime_outputs(built, {"x": x})
    np.testing.assert_allclose(graphfuse.compile(from_onnx(built))(x), want, rtol=0, atol=0)
    assert made and sum(made) == 0


def test_strong_downsampling_keeps_its_gathers(monkeypatch: Any) -> None:
    """40 -> 7 columns: a rows pass would compute 40 parts a row where the nest computes
    2 for each of 7 points; left alone (MAX_COLUMNS_PER_OUTPUT), the result still
    onnxruntime's. 40 -> 15 is taken. (Exact ratios import as strided slices, not
    gathers.)"""
    made = _made(monkeypatch)
    for size, taken in ((7, 0), (15, 1)):
        built = _resize([1, 8, 40, 40], [1, 8, size, size], relu=False, mode="linear")
        x = np.random.default_rng(2).standard_normal([1, 8, 40, 40]).astype(np.float32)
        (want,) = onnxruntime_outputs(built, {"x": x})
        np.testing.assert_allclose(graphfuse.compile(from_onnx(built))(x), want, atol=1e-5)
        assert sum(made) == taken, (size, made)
        made.clear()
