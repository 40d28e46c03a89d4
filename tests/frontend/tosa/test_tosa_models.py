"""Small models written as TOSA text in mlir-opt 22's pretty form, imported, compiled with
graphfuse.compile for the CPU, run, and compared with NumPy references of TOSA's rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions, fuse, load
from graphfuse.frontend.tosa import from_tosa
from tests.frontend.tosa import tosa_text as t


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(26)


def _weights(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def _compile_and_run(tmp_path: Path, text: str, entry: str, *inputs: np.ndarray):
    path = tmp_path / "model.tosa.mlir"
    path.write_text(text)
    compiled = graphfuse.compile(path, entry)
    return compiled(*inputs)


def mlp_text(w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> str:
    """Two nn.Linear layers and a ReLU as torch-mlir lowers them to TOSA: weights [out,
    in] transposed, a 3-D tosa.matmul between reshapes, the bias added after, ReLU a
    clamp to [0, FLT_MAX]; the function is @forward."""
    body = [
        t.const("w1", w1),
        t.const("b1", b1),
        t.const("w2", w2),
        t.const("b2", b2),
        t.zero(),
        "%w1t = tosa.transpose %w1 {perms = array<i32: 1, 0>} : (tensor<32x16xf32>) -> "
        "tensor<16x32xf32>",
        t.const_shape("s0", [1, 4, 16]),
        "%x3 = tosa.reshape %arg0, %s0 : (tensor<4x16xf32>, !tosa.shape<3>) -> tensor<1x4x16xf32>",
        t.const_shape("s1", [1, 16, 32]),
        "%w13 = tosa.reshape %w1t, %s1 : (tensor<16x32xf32>, !tosa.shape<3>) -> "
        "tensor<1x16x32xf32>",
        "%h0 = tosa.matmul %x3, %w13, %zp, %zp : (tensor<1x4x16xf32>, tensor<1x16x32xf32>, "
        "tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x32xf32>",
        t.const_shape("s2", [4, 32]),
        "%h1 = tosa.reshape %h0, %s2 : (tensor<1x4x32xf32>, !tosa.shape<2>) -> tensor<4x32xf32>",
        t.const_shape("s3", [1, 32]),
        "%b1r = tosa.reshape %b1, %s3 : (tensor<32xf32>, !tosa.shape<2>) -> tensor<1x32xf32>",
        "%h2 = tosa.add %h1, %b1r : (tensor<4x32xf32>, tensor<1x32xf32>) -> tensor<4x32xf32>",
        "%h3 = tosa.clamp %h2 {max_val = 3.40282347E+38 : f32, min_val = 0.000000e+00 : f32} "
        ": (tensor<4x32xf32>) -> tensor<4x32xf32>",
        "%w2t = tosa.transpose %w2 {perms = array<i32: 1, 0>} : (tensor<10x32xf32>) -> "
        "tensor<32x10xf32>",
        t.const_shape("s4", [1, 4, 32]),
        "%h4 = tosa.reshape %h3, %s4 : (tensor<4x32xf32>, !tosa.shape<3>) -> tensor<1x4x32xf32>",
        t.const_shape("s5", [1, 32, 10]),
        "%w23 = tosa.reshape %w2t, %s5 : (tensor<32x10xf32>, !tosa.shape<3>) -> "
        "tensor<1x32x10xf32>",
        "%h5 = tosa.matmul %h4, %w23, %zp, %zp : (tensor<1x4x32xf32>, tensor<1x32x10xf32>, "
        "tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x10xf32>",
        t.const_shape("s6", [4, 10]),
        "%h6 = tosa.reshape %h5, %s6 : (tensor<1x4x10xf32>, !tosa.shape<2>) -> tensor<4x10xf32>",
        t.const_shape("s7", [1, 10]),
        "%b2r = tosa.reshape %b2, %s7 : (tensor<10xf32>, !tosa.shape<2>) -> tensor<1x10xf32>",
        "%y = tosa.add %h6, %b2r : (tensor<4x10xf32>, tensor<1x10xf32>) -> tensor<4x10xf32>",
    ]
    function = t.function("forward", ["tensor<4x16xf32>"], ["tensor<4x10xf32>"], body, "%y")
    return 'module attributes {torch.debug_module_name = "MLP"} {\n' + function + "}\n"


def test_tosa_mlp_torch_mlir_form_matches_numpy(tmp_path: Path, rng: np.random.Generator) -> None:
    w1, b1 = _weights(rng, 32, 16), _weights(rng, 32)
    w2, b2 = _weights(rng, 10, 32), _weights(rng, 10)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    got = _compile_and_run(tmp_path, mlp_text(w1, b1, w2, b2), "forward", x)
    expected = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def cnn_text(w1, b1, w2, b2, fc) -> str:
    """conv 3x3 (pad 1) + bias + ReLU6, max_pool 2x2, conv 3x3 stride 2 + ReLU, avg_pool
    (pad 1), flatten, matmul: NHWC as TFLite's TOSA legalisation writes it (@main with
    ml_program identifiers on its arguments and results)."""
    body = [
        t.const("w1", w1),
        t.const("b1", b1),
        t.const("w2", w2),
        t.const("b2", b2),
        t.const("fc", fc),
        t.zero(),
        "%c1 = tosa.conv2d %arg0, %w1, %b1, %zp, %zp {acc_type = f32, dilation = array<i64: 1, "
        "1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x12x12x3xf32>, "
        "tensor<8x3x3x3xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> "
        "tensor<1x12x12x8xf32>",
        "%r1 = tosa.clamp %c1 {max_val = 6.000000e+00 : f32, min_val = 0.000000e+00 : f32} : "
        "(tensor<1x12x12x8xf32>) -> tensor<1x12x12x8xf32>",
        "%p1 = tosa.max_pool2d %r1 {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, "
        "stride = array<i64: 2, 2>} : (tensor<1x12x12x8xf32>) -> tensor<1x6x6x8xf32>",
        "%c2 = tosa.conv2d %p1, %w2, %b2, %zp, %zp {acc_type = f32, dilation = array<i64: 1, "
        "1>, pad = array<i64: 0, 1, 0, 1>, stride = array<i64: 2, 2>} : (tensor<1x6x6x8xf32>, "
        "tensor<16x3x3x8xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> "
        "tensor<1x3x3x16xf32>",
        "%r2 = tosa.clamp %c2 {max_val = 3.40282347E+38 : f32, min_val = 0.000000e+00 : f32} "
        ": (tensor<1x3x3x16xf32>) -> tensor<1x3x3x16xf32>",
        "%p2 = tosa.avg_pool2d %r2, %zp, %zp {acc_type = f32, kernel = array<i64: 2, 2>, "
        "pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>} : (tensor<1x3x3x16xf32>, "
        "tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x2x16xf32>",
        t.const_shape("s0", [1, 1, 64]),
        "%f = tosa.reshape %p2, %s0 : (tensor<1x2x2x16xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>",
        "%l = tosa.matmul %f, %fc, %zp, %zp : (tensor<1x1x64xf32>, tensor<1x64x10xf32>, "
        "tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x10xf32>",
        t.const_shape("s1", [1, 10]),
        "%y = tosa.reshape %l, %s1 : (tensor<1x1x10xf32>, !tosa.shape<2>) -> tensor<1x10xf32>",
    ]
    text = t.function("main", ["tensor<1x12x12x3xf32>"], ["tensor<1x10xf32>"], body, "%y")
    text = text.replace(
        "%arg0: tensor<1x12x12x3xf32>",
        '%arg0: tensor<1x12x12x3xf32> {ml_program.identifier = "serving_default_x:0"}',
    )
    return "module attributes {tfl.schema_version = 3 : i32} {\n" + text + "}\n"


def test_tosa_cnn_nhwc_tflite_form_matches_numpy(tmp_path: Path, rng: np.random.Generator) -> None:
    w1, b1 = _weights(rng, 8, 3, 3, 3), _weights(rng, 8)
    w2, b2 = _weights(rng, 16, 3, 3, 8), _weights(rng, 16)
    fc = _weights(rng, 1, 64, 10)
    x = rng.standard_normal((1, 12, 12, 3)).astype(np.float32)
    got = _compile_and_run(tmp_path, cnn_text(w1, b1, w2, b2, fc), "main", x)
    h = np.clip(t.conv2d(x, w1, b1, (1, 1, 1, 1), (1, 1), (1, 1)), 0, 6)
    h = t.max_pool2d(h, (2, 2), (2, 2), (0, 0, 0, 0))
    h = np.maximum(t.conv2d(h, w2, b2, (0, 1, 0, 1), (2, 2), (1, 1)), 0)
    h = t.avg_pool2d(h, (2, 2), (2, 2), (1, 0, 1, 0))
    expected = h.reshape(1, 64) @ fc[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_tosa_cnn_fuses_bias_and_activation_into_the_convolution(
    rng: np.random.Generator,
) -> None:
    """The importer leaves no transpose between a convolution and its ReLU: the two
    convolutions' kernels hold their bias and activation."""
    text = cnn_text(
        _weights(rng, 8, 3, 3, 3),
        _weights(rng, 8),
        _weights(rng, 16, 3, 3, 8),
        _weights(rng, 16),
        _weights(rng, 1, 64, 10),
    )
    module = load(from_tosa(text, "cnn.tosa.mlir"))
    fuse(module, CompileOptions())
    kernels = [op.sym_name.data for op in module.walk() if op.name == "graph.fused"]
    convs = [name for name in kernels if "conv2d" in name]
    assert len(convs) == 2, kernels
    assert convs[0].endswith("conv2d_add_min_max") and convs[1].endswith("add_relu"), kernels


@pytest.mark.parametrize(
    ("multiplier", "stride", "dilation", "pad"),
    [
        (2, (1, 1), (1, 1), (1, 1, 1, 1)),
        (1, (2, 2), (1, 1), (0, 2, 1, 1)),
        (1, (1, 1), (2, 2), (2, 2, 2, 2)),
    ],
)
def test_tosa_depthwise_conv2d_matches_numpy(
    tmp_path: Path, rng: np.random.Generator, multiplier, stride, dilation, pad
) -> None:
    c, m = 6, multiplier
    w, b = _weights(rng, 3, 3, c, m), _weights(rng, c * m)
    x = rng.standard_normal((2, 9, 9, c)).astype(np.float32)
    expected = t.depthwise_conv2d(x, w, b, pad, stride, dilation)
    out = t.ttype(expected.shape)
    attrs = (
        f"{{acc_type = f32, dilation = array<i64: {dilation[0]}, {dilation[1]}>, pad = "
        f"array<i64: {', '.join(map(str, pad))}>, stride = array<i64: {stride[0]}, {stride[1]}>}}"
    )
    body = [
        t.const("w", w),
        t.const("b", b),
        t.zero(),
        f"%y = tosa.depthwise_conv2d %arg0, %w, %b, %zp, %zp {attrs} : ({t.ttype_of(x)}, "
        f"{t.ttype_of(w)}, {t.ttype_of(b)}, tensor<1xf32>, tensor<1xf32>) -> {out}",
    ]
    text = t.function("main", [t.ttype_of(x)], [out], body, "%y")
    got = _compile_and_run(tmp_path, text, "main", x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
