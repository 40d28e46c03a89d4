"""ONNX convolution, pooling, Resize and normalization operators equal onnxruntime (reference
interpreter; a few compiled), and the plain 2-D NCHW path keeps its native graph ops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import check_against_onnxruntime, onnxruntime_outputs
from graphfuse.testing.onnx_models import model as unchecked_model

F = TensorProto.FLOAT
I64 = TensorProto.INT64
node = helper.make_node


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def model(
    nodes: list[Any],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, tuple[int, None]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 18,
) -> Any:
    """onnx_models.model with the output shapes onnxruntime computes filled in."""
    draft = unchecked_model(nodes, inputs, outputs, inits, opset, check=False)
    shapes = [r.shape for r in onnxruntime_outputs(draft, inputs)]
    typed = {n: (t, list(s)) for (n, (t, _)), s in zip(outputs.items(), shapes, strict=True)}
    return unchecked_model(nodes, inputs, typed, inits, opset)


def _check(
    op: str,
    x: np.ndarray,
    inits: dict[str, np.ndarray] | None = None,
    compile_it: bool = False,
    outputs: tuple[str, ...] = ("y",),
    opset: int = 18,
    **attrs: Any,
) -> None:
    """One `op` node on input x (and initializers, in order), compared with onnxruntime."""
    names = ["x", *(inits or {})]
    built = model(
        [node(op, names, list(outputs), **attrs)],
        {"x": x},
        {name: (I64 if name == "indices" else F, None) for name in outputs},
        inits,
        opset,
    )
    check_against_onnxruntime(built, {"x": x}, compile_it=compile_it)


def _ops(built: Any) -> set[str]:
    module = from_onnx(built)
    return {op.name for op in module.walk()}


# ---- convolution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"strides": [2], "pads": [1, 2], "dilations": [2]},
        {"auto_pad": "SAME_LOWER", "strides": [3]},
        {"group": 2, "auto_pad": "SAME_UPPER"},
    ],
)
def test_conv_1d(attrs: dict[str, Any]) -> None:
    groups = attrs.get("group", 1)
    x, w, bias = _rand(2, 4, 11), _rand(6, 4 // groups, 3, seed=1), _rand(6, seed=2)
    _check("Conv", x, {"w": w, "b": bias}, **attrs)


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 2, 1], "dilations": [2, 1, 1]},
        {"auto_pad": "SAME_UPPER", "group": 2},
        {"auto_pad": "SAME_LOWER", "strides": [2, 2, 1]},
        {"pads": [0, 2, 1, 1, 0, 1], "dilations": [1, 2, 1]},
    ],
)
def test_conv_3d(attrs: dict[str, Any]) -> None:
    groups = attrs.get("group", 1)
    x, w, bias = _rand(2, 4, 6, 7, 5), _rand(6, 4 // groups, 3, 2, 3, seed=1), _rand(6, seed=2)
    _check("Conv", x, {"w": w, "b": bias}, **attrs)


def test_conv_1d_and_3d_compiled() -> None:
    x1, w1 = _rand(1, 3, 16), _rand(4, 3, 3, seed=1)
    x3, w3 = _rand(1, 2, 5, 6, 6), _rand(3, 2, 3, 3, 3, seed=2)
    nodes = [
        node("Conv", ["x1", "w1"], ["y1"], pads=[1, 1], strides=[2]),
        node("Conv", ["x3", "w3"], ["y3"], pads=[1, 0, 1, 1, 0, 1]),
    ]
    inputs = {"x1": x1, "x3": x3}
    built = model(nodes, inputs, {"y1": (F, None), "y3": (F, None)}, {"w1": w1, "w3": w3})
    check_against_onnxruntime(built, inputs, compile_it=True)


def test_conv_2d_keeps_one_conv2d_and_native_pooling() -> None:
    """The plain NCHW path real CNNs take: one graph.conv2d, native pools, no slices."""
    x, w = _rand(1, 3, 8, 8), _rand(4, 3, 3, 3, seed=1)
    nodes = [
        node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        node("AveragePool", ["c"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("MaxPool", ["c"], ["mc"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    ]
    outputs = {name: (F, None) for name in ("m", "a", "mc")}
    ops = _ops(model(nodes, {"x": x}, outputs, {"w": w}))
    assert {"graph.conv2d", "graph.max_pool2d", "graph.avg_pool2d"} <= ops
    assert "graph.slice" not in ops and "graph.pad" not in ops


def test_conv_3d_is_one_conv2d() -> None:
    x, w = _rand(1, 2, 4, 5, 5), _rand(3, 2, 3, 3, 3, seed=1)
    built = model([node("Conv", ["x", "w"], ["y"])], {"x": x}, {"y": (F, None)}, {"w": w})
    module = from_onnx(built)
    assert [op.name for op in module.walk()].count("graph.conv2d") == 1


# ---- ConvTranspose -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"strides": [3, 2], "output_padding": [1, 1]},
        {"strides": [2, 2], "pads": [1, 2, 0, 1]},
        {"strides": [3, 2], "output_shape": [10, 8]},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [2, 3], "auto_pad": "SAME_LOWER"},
        {"dilations": [2, 2], "pads": [3, 3, 3, 3]},
        {"group": 2, "strides": [2, 1]},
    ],
)
def test_conv_transpose_2d(attrs: dict[str, Any]) -> None:
    groups = attrs.get("group", 1)
    x, w, bias = _rand(2, 4, 3, 4), _rand(4, 6 // groups, 3, 3, seed=1), _rand(6, seed=2)
    _check("ConvTranspose", x, {"w": w, "b": bias}, **attrs)


def test_conv_transpose_1d_and_3d() -> None:
    _check("ConvTranspose", _rand(1, 2, 5), {"w": _rand(2, 3, 3, seed=1)}, strides=[2], pads=[1, 0])
    x3, w3 = _rand(1, 2, 3, 4, 3), _rand(2, 2, 2, 3, 2, seed=1)
    _check("ConvTranspose", x3, {"w": w3}, strides=[2, 1, 2], output_padding=[1, 0, 0])


def test_conv_transpose_of_a_computed_weight_compiled() -> None:
    """A weight that is a graph input is flipped with graph.gather, not NumPy."""
    x, w = _rand(1, 2, 4, 4), _rand(2, 3, 3, 2, seed=1)
    built = model(
        [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1])],
        {"x": x, "w": w},
        {"y": (F, None)},
    )
    check_against_onnxruntime(built, {"x": x, "w": w}, compile_it=True)


# ---- pooling -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3], "strides": [2], "pads": [1, 1]},
        {"kernel_shape": [3], "strides": [2], "ceil_mode": 1},
        {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 1], "pads": [1, 1, 2, 0]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1]},
        {"kernel_shape": [2, 3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2, 2]},
    ],
)
def test_pooling_nd(op: str, attrs: dict[str, Any]) -> None:
    rank = len(attrs["kernel_shape"])
    x = _rand(2, 3, *[9, 8, 7][:rank])
    if op == "LpPool" and attrs.get("ceil_mode"):
        # onnxruntime's LpPool has no ceil_mode: ONNX's reference evaluator is the oracle.
        from onnx.reference import ReferenceEvaluator

        built = model([node(op, ["x"], ["y"], **attrs)], {"x": x}, {"y": (F, None)}, opset=19)
        expected = ReferenceEvaluator(built).run(None, {"x": x})[0]
        got = reference.run(from_onnx(built), "main", x)[0]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        return
    _check(op, x, opset=19, **attrs)  # AveragePool has dilations from opset 19


@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_average_pool_count_include_pad_with_ceil_mode(ceil_mode: int) -> None:
    """ceil_mode's extra window part is never counted, explicit pads are."""
    x = _rand(1, 2, 8, 7)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}
    _check("AveragePool", x, count_include_pad=1, ceil_mode=ceil_mode, **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order: int) -> None:
    x = _rand(2, 3, 6, 7)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}
    _check("MaxPool", x, outputs=("y", "indices"), storage_order=storage_order, **attrs)


def test_pooling_compiled() -> None:
    """Decomposed pools (-inf padding, count constants, indices) through the native build."""
    x = _rand(1, 2, 5, 6, 5)
    nodes = [
        node("MaxPool", ["x"], ["m"], kernel_shape=[2, 3, 2], pads=[1, 1, 0, 0, 1, 1]),
        node("AveragePool", ["x"], ["a"], kernel_shape=[3, 2, 2], strides=[2, 2, 2], ceil_mode=1),
        node("LpPool", ["x"], ["l"], kernel_shape=[2, 2, 2], p=3),
        node("GlobalLpPool", ["x"], ["g"], p=2),
    ]
    outputs = {name: (F, None) for name in ("m", "a", "l", "g")}
    check_against_onnxruntime(model(nodes, {"x": x}, outputs), {"x": x}, compile_it=True)


def test_max_pool_indices_compiled() -> None:
    x = _rand(1, 2, 5, 5)
    nodes = [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], dilations=[2, 1])]
    built = model(nodes, {"x": x}, {"y": (F, None), "i": (I64, None)})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


def test_global_lp_pool() -> None:
    _check("GlobalLpPool", _rand(2, 3, 4, 5), p=3)
    _check("GlobalLpPool", _rand(2, 3, 7), p=1)


# ---- Resize --------------------------------------------------------------------------------


def _resize(
    x: np.ndarray,
    sizes: list[int] | None = None,
    scales: list[float] | None = None,
    roi: list[float] | None = None,
    compile_it: bool = False,
    **attrs: Any,
) -> None:
    inits = {"roi": np.array(roi or [], np.float32)}
    inits["scales"] = np.array(scales or [], np.float32)
    if sizes is not None:
        inits["sizes"] = np.array(sizes, np.int64)
    _check("Resize", x, inits, compile_it=compile_it, **attrs)


@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
@pytest.mark.parametrize(
    "transform", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
)
def test_resize_nearest(nearest_mode: str, transform: str) -> None:
    x = _rand(1, 2, 4, 5)
    attrs = {"coordinate_transformation_mode": transform, "nearest_mode": nearest_mode}
    _resize(x, sizes=[1, 2, 7, 3], **attrs)
    if transform != "align_corners":  # with scales, ONNX's reference and onnxruntime differ
        _resize(x, scales=[1.0, 1.0, 2.0, 1.5], **attrs)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize(
    "transform",
    ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"],
)
def test_resize_linear_and_cubic(mode: str, transform: str) -> None:
    x = _rand(2, 3, 5, 6)
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    _resize(x, sizes=[2, 3, 9, 4], **attrs)


def test_resize_cubic_a_and_exclude_outside() -> None:
    x = _rand(1, 1, 6, 5)
    attrs = {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}
    _resize(x, scales=[1.0, 1.0, 1.5, 0.6], **attrs)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode: str) -> None:
    _resize(_rand(1, 2, 9, 8), sizes=[1, 2, 4, 3], mode=mode, antialias=1)


def test_resize_axes_and_keep_aspect_ratio() -> None:
    x = _rand(1, 2, 4, 6)
    _resize(x, sizes=[7, 5], axes=[3, 2], keep_aspect_ratio_policy="not_larger")
    _resize(x, sizes=[7, 5], axes=[2, 3], keep_aspect_ratio_policy="not_smaller", mode="linear")


def test_resize_tf_crop_and_resize() -> None:
    x = _rand(1, 1, 5, 6)
    roi = [0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2]
    attrs = {"coordinate_transformation_mode": "tf_crop_and_resize", "mode": "linear"}
    _resize(x, sizes=[1, 1, 4, 7], roi=roi, extrapolation_value=2.5, **attrs)


def test_resize_compiled() -> None:
    x = _rand(1, 2, 4, 5)
    _resize(x, sizes=[1, 2, 8, 3], mode="cubic", compile_it=True)
    _resize(x, scales=[1.0, 1.0, 2.0, 2.0], compile_it=True)


def test_resize_with_computed_scales_is_refused() -> None:
    x = _rand(1, 1, 2, 2)
    nodes = [node("Mul", ["s", "s"], ["s2"]), node("Resize", ["x", "", "s2"], ["y"])]
    built = model(nodes, {"x": x, "s": np.ones(4, np.float32)}, {"y": (F, None)})
    with pytest.raises(ImportFailure, match="scales .*must be"):
        from_onnx(built)


def test_upsample_nearest() -> None:
    x = _rand(1, 2, 3, 3)
    built = model(
        [node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
        {"x": x},
        {"y": (F, None)},
        {"scales": np.array([1, 1, 2, 3], np.float32)},
        opset=9,
    )
    check_against_onnxruntime(built, {"x": x})


# ---- normalization -------------------------------------------------------------------------


def test_instance_normalization() -> None:
    x, scale, bias = _rand(2, 3, 4, 5), _rand(3, seed=1), _rand(3, seed=2)
    _check("InstanceNormalization", x, {"scale": scale, "bias": bias}, epsilon=1e-3)
    _check("InstanceNormalization", _rand(2, 3, 7), {"scale": scale, "bias": bias})


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p: int) -> None:
    _check("LpNormalization", _rand(2, 3, 4), p=p, axis=1)


def test_lrn() -> None:
    _check("LRN", _rand(2, 7, 3, 4), size=3, alpha=0.01, beta=0.6, bias=1.5)
    _check("LRN", _rand(2, 7, 3, 4), size=5)


def test_normalizations_compiled() -> None:
    x, scale, bias = _rand(2, 3, 4, 5), _rand(3, seed=1), _rand(3, seed=2)
    nodes = [
        node("InstanceNormalization", ["x", "scale", "bias"], ["i"]),
        node("LpNormalization", ["x"], ["l"], p=2),
        node("LRN", ["x"], ["r"], size=3),
    ]
    outputs = {name: (F, None) for name in ("i", "l", "r")}
    built = model(nodes, {"x": x}, outputs, {"scale": scale, "bias": bias})
    check_against_onnxruntime(built, {"x": x}, compile_it=True)


# ---- Col2Im and GridSample -----------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [{}, {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}],
)
def test_col2im(attrs: dict[str, Any]) -> None:
    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    strides, pads = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    dilations = attrs.get("dilations", [1, 1])
    blocks = [
        (size + pads[i] + pads[i + 2] - (k - 1) * dilations[i] - 1) // strides[i] + 1
        for i, (size, k) in enumerate(zip(image, block, strict=True))
    ]
    x = _rand(2, 3 * 6, blocks[0] * blocks[1])
    _check("Col2Im", x, {"image": image, "block": block}, **attrs)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample(mode: str, padding_mode: str, align_corners: int) -> None:
    x = _rand(2, 3, 4, 5)
    grid = np.random.default_rng(1).uniform(-1.7, 1.7, (2, 3, 6, 2)).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0.25, -0.5]]  # corners and a half-way tie
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    built = model(
        [node("GridSample", ["x", "grid"], ["y"], **attrs)],
        {"x": x, "grid": grid},
        {"y": (F, None)},
        opset=20,
    )
    check_against_onnxruntime(built, {"x": x, "grid": grid})


def test_grid_sample_and_col2im_compiled() -> None:
    x = _rand(1, 2, 4, 5)
    grid = np.random.default_rng(1).uniform(-1.3, 1.3, (1, 3, 4, 2)).astype(np.float32)
    cols = _rand(1, 2 * 4, 4 * 6)
    nodes = [
        node("GridSample", ["x", "grid"], ["g"], mode="linear", padding_mode="reflection"),
        node("GridSample", ["x", "grid"], ["c"], mode="cubic"),
        node("Col2Im", ["cols", "image", "block"], ["i"], pads=[1, 1, 0, 1]),
    ]
    inputs = {"x": x, "grid": grid, "cols": cols}
    inits = {"image": np.array([4, 5], np.int64), "block": np.array([2, 2], np.int64)}
    outputs = {name: (F, None) for name in ("g", "c", "i")}
    check_against_onnxruntime(model(nodes, inputs, outputs, inits, opset=20), inputs, True)


def test_max_unpool_of_max_pool_indices_compiled() -> None:
    """Indices computed by MaxPool (overlapping windows: some repeat) scattered back."""
    x = _rand(2, 3, 5, 5)
    pool = {"kernel_shape": [3, 3], "strides": [2, 2]}
    nodes = [
        node("MaxPool", ["x"], ["p", "i"], **pool),
        node("MaxUnpool", ["p", "i"], ["y"], **pool),
    ]
    check_against_onnxruntime(model(nodes, {"x": x}, {"y": (F, None)}), {"x": x}, True)


def test_max_unpool_too_large_is_refused() -> None:
    x = _rand(1, 64, 56, 56)
    nodes = [
        node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
        node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    built = unchecked_model(nodes, {"x": x}, {"y": (F, [1, 64, 56, 56])})
    with pytest.raises(ImportFailure, match="MaxUnpool to 56x56 .* too large"):
        from_onnx(built)
