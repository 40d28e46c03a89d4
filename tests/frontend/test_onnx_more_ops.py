"""TensorScatter, Det, BatchNormalization in training mode, RoiAlign and DeformConv,
checked against NumPy, onnxruntime or ONNX's reference evaluator (where onnxruntime lacks
the op or the opset)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import graphfuse
from graphfuse.frontend.onnx_builder import ImportFailure
from tests.frontend.test_onnx_quantization import build, check, graphfuse_outputs

node = helper.make_node
F32 = np.dtype(np.float32)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_each_batch_at_its_index(mode: str) -> None:
    cache, update = _rand(3, 2, 6, 4), _rand(3, 2, 3, 4, seed=1)
    write = np.array([0, 2, 5 if mode == "circular" else 3], np.int64)
    nodes = [node("TensorScatter", ["cache", "update", "write"], ["out"], mode=mode)]
    inputs = {"cache": cache, "update": update, "write": write}
    built = build(nodes, inputs, {"out": (F32, [3, 2, 6, 4])}, opset=24)
    check(built, inputs, against="reference", compile_it=mode == "circular")


@pytest.mark.parametrize("n", [1, 3, 5])
def test_det_matches_numpy_compiled(n: int) -> None:
    x = _rand(4, n, n, seed=n)
    x[1] = 0.0  # a zero matrix
    if n > 1:
        x[2, :, 0] = 0.0  # a zero first column: a singular matrix met early
        x[3, 0, 0] = 1e-6  # a tiny first pivot: rows must be swapped
    nodes = [node("Det", ["x"], ["d"])]
    built = build(nodes, {"x": x}, {"d": (F32, [4])})
    want = np.linalg.det(x.astype(np.float64))
    for run in graphfuse_outputs(built, {"x": x}, compile_it=n == 5):
        np.testing.assert_allclose(run[0], want, rtol=1e-4, atol=1e-5)


def test_det_past_the_limit_is_refused_in_one_line() -> None:
    x = _rand(17, 17)
    built = build([node("Det", ["x"], ["d"])], {"x": x}, {"d": (F32, [])})
    with pytest.raises(ImportFailure, match="at most 16x16") as error:
        graphfuse.from_onnx(built)
    assert "\n" not in str(error.value)


def test_batch_norm_training_mode_outputs_running_statistics() -> None:
    x = _rand(2, 3, 4, 5)
    scale, bias = _rand(3, seed=1), _rand(3, seed=2)
    mean, var = _rand(3, seed=3), np.abs(_rand(3, seed=4)) + 0.5
    names = ["x", "scale", "bias", "mean", "var"]
    nodes = [
        node("BatchNormalization", names, ["y", "rm", "rv"], training_mode=1, momentum=0.7),
    ]
    inputs = dict(zip(names, [x, scale, bias, mean, var], strict=True))
    outputs = {"y": (F32, [2, 3, 4, 5]), "rm": (F32, [3]), "rv": (F32, [3])}
    built = build(nodes, inputs, outputs, opset=15)
    batch_mean, batch_var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    shaped = [a.reshape(1, 3, 1, 1) for a in (scale, bias, batch_mean, batch_var)]
    want_y = shaped[0] * (x - shaped[2]) / np.sqrt(shaped[3] + 1e-5) + shaped[1]
    want = [want_y, mean * 0.7 + batch_mean * 0.3, var * 0.7 + batch_var * 0.3]
    for run in graphfuse_outputs(built, inputs, compile_it=True):
        for got, expected in zip(run, want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("mode", "transform"),
    [("avg", "half_pixel"), ("max", "output_half_pixel"), ("avg", "output_half_pixel")],
)
def test_roi_align_matches_the_reference(mode: str, transform: str) -> None:
    x = _rand(2, 3, 8, 7)
    # Regions inside, across the border and past it, on both images.
    rois = np.array(
        [[0.5, 1.0, 6.0, 7.5], [-2.0, -1.0, 3.0, 2.0], [4.0, 5.0, 9.5, 11.0], [2, 2, 2.5, 2.5]],
        np.float32,
    )
    batch = np.array([0, 1, 1, 0], np.int64)
    nodes = [
        node(
            "RoiAlign",
            ["x", "rois", "batch"],
            ["y"],
            mode=mode,
            coordinate_transformation_mode=transform,
            output_height=3,
            output_width=2,
            sampling_ratio=2,
            spatial_scale=0.75,
        )
    ]
    inputs = {"x": x, "rois": rois, "batch": batch}
    built = build(nodes, inputs, {"y": (F32, [4, 3, 3, 2])}, opset=16)
    check(built, inputs, against="reference", compile_it=mode == "max")


def test_roi_align_adaptive_sampling_is_refused_in_one_line() -> None:
    x, rois, batch = _rand(1, 1, 4, 4), np.zeros((1, 4), np.float32), np.zeros(1, np.int64)
    nodes = [node("RoiAlign", ["x", "rois", "batch"], ["y"], sampling_ratio=0)]
    built = build(nodes, {"x": x, "rois": rois, "batch": batch}, {"y": (F32, [1, 1, 1, 1])})
    with pytest.raises(ImportFailure, match="sampling_ratio 0") as error:
        graphfuse.from_onnx(built)
    assert "\n" not in str(error.value)


def test_deform_conv_groups_offset_groups_mask_and_bias() -> None:
    x, w = _rand(2, 4, 5, 6), _rand(6, 2, 2, 3, seed=1)
    # Offsets of a few pixels move taps across the border (zero padding) and between.
    offset = 2.0 * _rand(2, 2 * 6 * 2, 3, 2, seed=2)
    mask, bias = np.abs(_rand(2, 2 * 6, 3, 2, seed=3)), _rand(6, seed=4)
    attrs = {"group": 2, "offset_group": 2, "pads": [1, 0, 0, 1], "strides": [2, 2]}
    attrs["dilations"] = [1, 2]
    nodes = [node("DeformConv", ["x", "w", "offset", "bias", "mask"], ["y"], **attrs)]
    inputs = {"x": x, "w": w, "offset": offset, "bias": bias, "mask": mask}
    built = build(nodes, inputs, {"y": (F32, [2, 6, 3, 2])}, opset=19)
    check(built, inputs, against="reference", compile_it=True)
