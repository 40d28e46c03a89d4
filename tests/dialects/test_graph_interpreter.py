"""The reference interpreter against NumPy written out independently, op by op.

Each expected value is computed here without the interpreter's helpers: loops for
convolution and pooling, per-element `math` calls for transcendental functions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import GraphfuseError
from tests.conftest import parse, run_text


def _unary(op: str, type_: str) -> str:
    return (
        f"func.func @main(%x: {type_}) -> {type_} {{\n"
        f"  %0 = graph.{op} %x : {type_}\n  func.return %0 : {type_}\n}}"
    )


def _binary(op: str, a: str, b: str, r: str, prefix: str = "") -> str:
    return (
        f"func.func @main(%a: {a}, %b: {b}) -> {r} {{\n"
        f"  %0 = graph.{op} {prefix}%a, %b : ({a}, {b}) -> {r}\n  func.return %0 : {r}\n}}"
    )


def _single(op_text: str, args: str, result: str) -> str:
    return (
        f"func.func @main({args}) -> {result} {{\n  %0 = {op_text}\n  func.return %0 : {result}\n}}"
    )


_UNARY_CASES = {
    "neg": lambda v: -v,
    "abs": abs,
    "relu": lambda v: max(v, 0.0),
    "exp": math.exp,
    "tanh": math.tanh,
    "sigmoid": lambda v: 1 / (1 + math.exp(-v)),
    "erf": math.erf,
    "silu": lambda v: v / (1 + math.exp(-v)),
    "gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))),
}


@pytest.mark.parametrize("op", sorted(_UNARY_CASES))
def test_unary_op_matches_elementwise_math(op, rng):
    x = rng.uniform(-3, 3, (3, 5)).astype(np.float32)
    (out,) = run_text(_unary(op, "tensor<3x5xf32>"), x)
    expected = np.vectorize(_UNARY_CASES[op])(x.astype(np.float64))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(
    ("op", "fn"),
    [("log", math.log), ("sqrt", math.sqrt), ("rsqrt", lambda v: 1 / math.sqrt(v))],
)
def test_unary_positive_domain_ops(op, fn, rng):
    x = rng.uniform(0.1, 4, (7,)).astype(np.float32)
    (out,) = run_text(_unary(op, "tensor<7xf32>"), x)
    np.testing.assert_allclose(out, [fn(float(v)) for v in x], rtol=2e-6)


def test_gelu_tanh_approximation(rng):
    x = rng.uniform(-3, 3, (16,)).astype(np.float32)
    text = _single(
        "graph.gelu %x approximate = tanh : tensor<16xf32>",
        "%x: tensor<16xf32>",
        "tensor<16xf32>",
    )
    (out,) = run_text(text, x)
    expected = [
        0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
        for v in x.astype(float)
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("div", np.divide),
        ("max", np.maximum),
        ("min", np.minimum),
    ],
)
def test_binary_op_broadcasts_like_numpy(op, fn, rng):
    a = rng.uniform(1, 2, (4, 1, 3)).astype(np.float32)
    b = rng.uniform(1, 2, (5, 1)).astype(np.float32)
    text = _binary(op, "tensor<4x1x3xf32>", "tensor<5x1xf32>", "tensor<4x5x3xf32>")
    (out,) = run_text(text, a, b)
    assert out.shape == (4, 5, 3)
    np.testing.assert_allclose(out, fn(a, b), rtol=1e-6)


def test_pow_on_floats(rng):
    a = rng.uniform(0.5, 2, (6,)).astype(np.float32)
    b = rng.uniform(-2, 2, (6,)).astype(np.float32)
    (out,) = run_text(_binary("pow", "tensor<6xf32>", "tensor<6xf32>", "tensor<6xf32>"), a, b)
    np.testing.assert_allclose(
        out, [float(x) ** float(y) for x, y in zip(a, b, strict=False)], rtol=1e-5
    )


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0, 5], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, -5], dtype=np.int32)
    (out,) = run_text(_binary("div", "tensor<6xi32>", "tensor<6xi32>", "tensor<6xi32>"), a, b)
    assert out.dtype == np.int32
    assert out.tolist() == [int(x / y) for x, y in zip(a.tolist(), b.tolist(), strict=False)]


@pytest.mark.parametrize(
    ("pred", "fn"),
    [
        ("eq", np.equal),
        ("ne", np.not_equal),
        ("lt", np.less),
        ("le", np.less_equal),
        ("gt", np.greater),
        ("ge", np.greater_equal),
    ],
)
def test_compare_predicates(pred, fn):
    a = np.array([[1, 2, 3]], dtype=np.int64)
    b = np.array([[2], [2]], dtype=np.int64)
    text = _binary("compare", "tensor<1x3xi64>", "tensor<2x1xi64>", "tensor<2x3xi1>", f"{pred}, ")
    (out,) = run_text(text, a, b)
    assert out.dtype == np.bool_
    assert out.tolist() == fn(a, b).tolist()


def test_select_broadcasts_three_ways(rng):
    c = rng.random((4, 1)) < 0.5
    t = rng.standard_normal((4, 3)).astype(np.float32)
    f = rng.standard_normal((3,)).astype(np.float32)
    text = _single(
        "graph.select %c, %t, %f : (tensor<4x1xi1>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>",
        "%c: tensor<4x1xi1>, %t: tensor<4x3xf32>, %f: tensor<3xf32>",
        "tensor<4x3xf32>",
    )
    (out,) = run_text(text, c, t, f)
    expected = [[t[i, j] if c[i, 0] else f[j] for j in range(3)] for i in range(4)]
    np.testing.assert_array_equal(out, expected)


def test_cast_float_to_int_truncates_and_to_bool_tests_nonzero():
    x = np.array([1.7, -1.7, 0.0, 2.5], dtype=np.float32)
    text = (
        "func.func @main(%x: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xi1>) {\n"
        "  %0 = graph.cast %x : tensor<4xf32> -> tensor<4xi32>\n"
        "  %1 = graph.cast %x : tensor<4xf32> -> tensor<4xi1>\n"
        "  func.return %0, %1 : tensor<4xi32>, tensor<4xi1>\n}"
    )
    ints, bools = run_text(text, x)
    assert ints.tolist() == [1, -1, 0, 2]
    assert bools.tolist() == [True, True, False, True]


def test_shape_ops(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((2, 3, 2)).astype(np.float32)
    text = """
func.func @main(%x: tensor<2x3x4xf32>, %y: tensor<2x3x2xf32>) -> (tensor<5x2x3x4xf32>, tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x2x2xf32>, tensor<2x3x6xf32>, tensor<5x3x8xf32>) {
  %0 = graph.broadcast_to %x : tensor<2x3x4xf32> -> tensor<5x2x3x4xf32>
  %1 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %3 = graph.slice %x starts = [0, 1, 1] strides = [1, 1, 2] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %4 = graph.concat %x, %y axis = -1 : (tensor<2x3x4xf32>, tensor<2x3x2xf32>) -> tensor<2x3x6xf32>
  %5 = graph.pad %4 low = [1, 0, 1] high = [2, 0, 1] value = 1.5 : tensor<2x3x6xf32> -> tensor<5x3x8xf32>
  func.return %0, %1, %2, %3, %4, %5 : tensor<5x2x3x4xf32>, tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x2x2xf32>, tensor<2x3x6xf32>, tensor<5x3x8xf32>
}"""
    bcast, reshaped, transposed, sliced, concat, padded = run_text(text, x, y)
    assert all((bcast[i] == x).all() for i in range(5))
    assert reshaped.tolist() == [list(x[i // 3, i % 3]) for i in range(6)]
    assert all(
        transposed[k, i, j] == x[i, j, k]
        for i, j, k in itertools.product(range(2), range(3), range(4))
    )
    assert all(
        sliced[i, j, k] == x[i, 1 + j, 1 + 2 * k]
        for i, j, k in itertools.product(range(2), range(2), range(2))
    )
    assert (concat[..., :4] == x).all() and (concat[..., 4:] == y).all()
    assert (padded[1:3, :, 1:7] == concat).all()
    border = padded.copy()
    border[1:3, :, 1:7] = 1.5
    assert (border == 1.5).all()


def _type(shape: tuple[int, ...], element: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def _gather_text(data: np.ndarray, indices: np.ndarray, axis: int, element: str) -> str:
    d = _type(data.shape, "f32")
    i = _type(indices.shape, element)
    rank = data.ndim
    a = axis + rank if axis < 0 else axis
    r = _type((*data.shape[:a], *indices.shape, *data.shape[a + 1 :]), "f32")
    op = f"graph.gather %d, %i axis = {axis} : ({d}, {i}) -> {r}"
    return _single(op, f"%d: {d}, %i: {i}", r)


@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((10, 4), [[0, 3, 9, 3, 1], [2, 2, 8, 0, 7]], 0),  # embedding rows, ids [2, 5]
        ((3, 6, 2), [5, 0, 2, 2], 1),
        ((3, 6, 2), [[1, 0], [0, 1]], -1),
        ((5, 3), 4, 0),  # rank-0 indices drop the axis
        ((5, 3), 1, -1),
    ],
)
@pytest.mark.parametrize("element", ["i32", "i64"])
def test_gather_matches_numpy_take(shape, indices, axis, element, rng):
    data = rng.standard_normal(shape).astype(np.float32)
    idx = np.array(indices, dtype=np.int32 if element == "i32" else np.int64)
    (out,) = run_text(_gather_text(data, idx, axis, element), data, idx)
    np.testing.assert_array_equal(out, np.take(data, idx, axis=axis))


def test_gather_negative_indices_count_from_the_end_and_others_clamp(rng):
    data = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([-1, -6, 5, -7, 6, 100, np.iinfo(np.int64).min], dtype=np.int64)
    (out,) = run_text(_gather_text(data, idx, 0, "i64"), data, idx)
    # ONNX: a negative index counts from the end; graphfuse clamps what is still outside.
    rows = [5, 0, 5, 0, 5, 5, 0]
    expected = np.stack([data[r] for r in rows])
    np.testing.assert_array_equal(out, expected)


def test_gather_from_axis_of_extent_zero_with_no_indices():
    data = np.zeros((0, 3), np.float32)
    idx = np.zeros((0,), np.int64)
    (out,) = run_text(_gather_text(data, idx, 0, "i64"), data, idx)
    assert out.shape == (0, 3)


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("reduce_sum", np.sum),
        ("reduce_max", np.max),
        ("reduce_min", np.min),
        ("reduce_mean", np.mean),
    ],
)
@pytest.mark.parametrize(("axes", "keepdims"), [((1,), False), ((-1, 0), True), ((0, 1, 2), False)])
def test_reductions(op, fn, axes, keepdims, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    expected = fn(x.astype(np.float64), axis=axes, keepdims=keepdims)
    shape = "x".join(map(str, expected.shape))
    result = f"tensor<{shape + 'x' if shape else ''}f32>"
    kd = " keepdims" if keepdims else ""
    text = _single(
        f"graph.{op} %x axes = {list(axes)}{kd} : tensor<2x3x4xf32> -> {result}",
        "%x: tensor<2x3x4xf32>",
        result,
    )
    (out,) = run_text(text, x)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_integer_reduce_sum_wraps_to_element_type():
    x = np.array([[1, 2], [3, 4]], dtype=np.int32)
    text = _single(
        "graph.reduce_sum %x axes = [0] : tensor<2x2xi32> -> tensor<2xi32>",
        "%x: tensor<2x2xi32>",
        "tensor<2xi32>",
    )
    (out,) = run_text(text, x)
    assert out.dtype == np.int32 and out.tolist() == [4, 6]


def test_batched_matmul_with_broadcast_batch(rng):
    a = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
    b = rng.standard_normal((5, 4, 6)).astype(np.float32)
    text = _binary("matmul", "tensor<2x1x3x4xf32>", "tensor<5x4x6xf32>", "tensor<2x5x3x6xf32>")
    (out,) = run_text(text, a, b)
    for i, j in itertools.product(range(2), range(5)):
        np.testing.assert_allclose(
            out[i, j], a[i, 0].astype(float) @ b[j].astype(float), rtol=1e-5, atol=1e-5
        )


def _naive_conv2d(x, w, strides, padding, dilations, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + padding[0] + padding[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + padding[1] + padding[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // per_group
        total = 0.0
        for ic, p, q in itertools.product(range(cg), range(kh), range(kw)):
            row = i * strides[0] - padding[0] + p * dilations[0]
            col = j * strides[1] - padding[1] + q * dilations[1]
            if 0 <= row < h and 0 <= col < wd:
                total += x[b, g * cg + ic, row, col] * w[oc, ic, p, q]
        out[b, oc, i, j] = total
    return out


@pytest.mark.parametrize(
    ("strides", "padding", "dilations", "groups"),
    [
        ((1, 1), (0, 0, 0, 0), (1, 1), 1),
        ((2, 1), (1, 2, 0, 1), (1, 1), 1),
        ((1, 2), (1, 1, 1, 1), (2, 1), 2),
        ((1, 1), (1, 1, 1, 1), (1, 1), 4),
    ],
)
def test_conv2d_against_loops(strides, padding, dilations, groups, rng):
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((8, 4 // groups, 3, 2)).astype(np.float32)
    expected = _naive_conv2d(x, w, strides, padding, dilations, groups)
    r = f"tensor<{'x'.join(map(str, expected.shape))}xf32>"
    wt = f"tensor<8x{4 // groups}x3x2xf32>"
    text = _single(
        f"graph.conv2d %x, %w strides = {list(strides)} padding = {list(padding)} dilations = {list(dilations)} groups = {groups} : (tensor<2x4x7x6xf32>, {wt}) -> {r}",
        f"%x: tensor<2x4x7x6xf32>, %w: {wt}",
        r,
    )
    (out,) = run_text(text, x, w)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def _naive_pool(x, kernel, strides, padding, mode, include_pad=False):
    n, c, h, w = x.shape
    oh = (h + padding[0] + padding[2] - kernel[0]) // strides[0] + 1
    ow = (w + padding[1] + padding[3] - kernel[1]) // strides[1] + 1
    out = np.zeros((n, c, oh, ow))
    for b, ch, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        values = []
        for p, q in itertools.product(range(kernel[0]), range(kernel[1])):
            row, col = i * strides[0] - padding[0] + p, j * strides[1] - padding[1] + q
            if 0 <= row < h and 0 <= col < w:
                values.append(x[b, ch, row, col])
        if mode == "max":
            out[b, ch, i, j] = max(values)
        else:
            out[b, ch, i, j] = sum(values) / (kernel[0] * kernel[1] if include_pad else len(values))
    return out


@pytest.mark.parametrize(("mode", "include_pad"), [("max", False), ("avg", False), ("avg", True)])
def test_pooling_against_loops(mode, include_pad, rng):
    x = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    kernel, strides, padding = (3, 2), (2, 2), (1, 0, 1, 1)
    expected = _naive_pool(x, kernel, strides, padding, mode, include_pad)
    r = f"tensor<{'x'.join(map(str, expected.shape))}xf32>"
    flag = " count_include_pad" if include_pad else ""
    text = _single(
        f"graph.{mode}_pool2d %x kernel = [3, 2] strides = [2, 2] padding = [1, 0, 1, 1]{flag} : tensor<1x2x7x8xf32> -> {r}",
        "%x: tensor<1x2x7x8xf32>",
        r,
    )
    (out,) = run_text(text, x)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_softmax_and_log_softmax(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    text = """
func.func @main(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>) {
  %0 = graph.softmax %x axis = 0 : tensor<3x5xf32>
  %1 = graph.log_softmax %x axis = -1 : tensor<3x5xf32>
  func.return %0, %1 : tensor<3x5xf32>, tensor<3x5xf32>
}"""
    soft, log_soft = run_text(text, x)
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(soft, e / e.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(
        log_soft, np.log(e / e.sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-6
    )


def test_layer_norm_over_trailing_dims(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    g = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    text = _single(
        "graph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-03 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>",
        "%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>, %b: tensor<3x4xf32>",
        "tensor<2x3x4xf32>",
    )
    (out,) = run_text(text, x, g, b)
    for i in range(2):
        row = x[i].astype(np.float64)
        expected = (row - row.mean()) / math.sqrt(row.var() + 1e-3) * g + b
        np.testing.assert_allclose(out[i], expected, rtol=1e-5, atol=1e-5)


def test_batch_norm_per_channel(rng):
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    s, b, m = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.5, 2, 3).astype(np.float32)
    t3 = "tensor<3xf32>"
    text = _single(
        f"graph.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-03 : (tensor<2x3x2x2xf32>, {t3}, {t3}, {t3}, {t3}) -> tensor<2x3x2x2xf32>",
        f"%x: tensor<2x3x2x2xf32>, %s: {t3}, %b: {t3}, %m: {t3}, %v: {t3}",
        "tensor<2x3x2x2xf32>",
    )
    (out,) = run_text(text, x, s, b, m, v)
    for c in range(3):
        expected = (x[:, c] - m[c]) / math.sqrt(v[c] + 1e-3) * s[c] + b[c]
        np.testing.assert_allclose(out[:, c], expected, rtol=1e-5, atol=1e-5)


def test_sort_and_top_k():
    x = np.array([[3.0, 1.0, 4.0, 1.0, 5.0], [9.0, 2.0, 6.0, 5.0, 3.0]], dtype=np.float32)
    text = """
func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x3xf32>, tensor<2x3xi64>) {
  %0 = graph.sort %x axis = 1 descending : tensor<2x5xf32>
  %1, %2 = graph.top_k %x k = 3 axis = -1 : (tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  func.return %0, %1, %2 : tensor<2x5xf32>, tensor<2x3xf32>, tensor<2x3xi64>
}"""
    ordered, values, indices = run_text(text, x)
    assert ordered.tolist() == [sorted(r, reverse=True) for r in x.tolist()]
    assert values.tolist() == [[5.0, 4.0, 3.0], [9.0, 6.0, 5.0]]
    assert indices.tolist() == [[4, 2, 0], [0, 2, 3]]


def test_external_kernel_runs_registered_function():
    reference.register_external("twice_plus", lambda a, b: 2 * a + b)
    text = _single(
        'graph.external "twice_plus"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>',
        "%a: tensor<3xf32>, %b: tensor<3xf32>",
        "tensor<3xf32>",
    )
    (out,) = run_text(text, np.ones(3, np.float32), np.arange(3, dtype=np.float32))
    assert out.tolist() == [2.0, 3.0, 4.0]


def test_external_kernel_unregistered_is_a_diagnostic():
    text = _single(
        'graph.external "nobody"(%a) : (tensor<3xf32>) -> tensor<3xf32>',
        "%a: tensor<3xf32>",
        "tensor<3xf32>",
    )
    with pytest.raises(
        GraphfuseError,
        match=r"test.mlir:2:3: 'graph.external' op no implementation of external kernel 'nobody'",
    ):
        run_text(text, np.ones(3, np.float32))


def test_fused_region_matches_unfused_ops(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    fused = """
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %c = graph.constant dense<2.0> : tensor<8xf32>
  %0, %1 = graph.fused "fused_add_relu_reduce_sum" (%x, %c) kind = reduction : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %s = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : tensor<4x8xf32>
    %t = graph.reduce_sum %r axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    graph.yield %r, %t : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %0, %1 : tensor<4x8xf32>, tensor<4xf32>
}"""
    relu, total = run_text(fused, x)
    np.testing.assert_allclose(relu, np.maximum(x + 2, 0))
    np.testing.assert_allclose(total, np.maximum(x + 2, 0).sum(axis=1), rtol=1e-6)


def test_func_call_between_functions(rng):
    text = """
func.func @double(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = graph.add %x, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @double(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = graph.exp %0 : tensor<3xf32>
  func.return %1 : tensor<3xf32>
}"""
    x = rng.standard_normal(3).astype(np.float32)
    (out,) = run_text(text, x)
    np.testing.assert_allclose(out, np.exp(2 * x), rtol=1e-6)


def test_constants_of_every_element_type():
    text = """
func.func @main() -> (tensor<2xf32>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi64>, tensor<2xi1>) {
  %0 = graph.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %1 = graph.constant dense<[1.5, -2.0]> : tensor<2xf16>
  %2 = graph.constant dense<[1.5, -2.0]> : tensor<2xbf16>
  %3 = graph.constant dense<[7, -3]> : tensor<2xi32>
  %4 = graph.constant dense<[8000000000, -1]> : tensor<2xi64>
  %5 = graph.constant dense<[true, false]> : tensor<2xi1>
  func.return %0, %1, %2, %3, %4, %5 : tensor<2xf32>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi32>, tensor<2xi64>, tensor<2xi1>
}"""
    values = run_text(text)
    assert [v.dtype for v in values] == [
        np.float32,
        np.float16,
        np.float32,
        np.int32,
        np.int64,
        np.bool_,
    ]
    assert [v.tolist() for v in values] == [
        [1.5, -2.0],
        [1.5, -2.0],
        [1.5, -2.0],
        [7, -3],
        [8000000000, -1],
        [True, False],
    ]


def test_round_to_bf16_ties_to_even():
    one = 1.0
    ulp = 2.0**-7  # bf16 keeps 7 mantissa bits
    x = np.array(
        [one + ulp / 2, one + 3 * ulp / 2, one + ulp / 4, np.inf, np.nan], dtype=np.float32
    )
    rounded = reference.round_to_bf16(x)
    assert rounded[:4].tolist() == [1.0, one + 2 * ulp, 1.0, np.inf]
    assert np.isnan(rounded[4])


def test_half_precision_computes_in_f32_and_rounds(rng):
    x = rng.uniform(-2, 2, 16).astype(np.float32)
    (bf,) = run_text(_unary("exp", "tensor<16xbf16>"), reference.round_to_bf16(x))
    expected = reference.round_to_bf16(np.exp(reference.round_to_bf16(x)))
    assert (bf == expected).all()
    (half,) = run_text(_unary("tanh", "tensor<16xf16>"), x.astype(np.float16))
    assert half.dtype == np.float16
    assert (half == np.tanh(x.astype(np.float16).astype(np.float32)).astype(np.float16)).all()


def test_arguments_are_checked():
    module = parse(_unary("exp", "tensor<2x3xf32>"))
    with pytest.raises(GraphfuseError, match="argument #0 has shape 3x2, expected 2x3"):
        reference.run(module, "main", np.zeros((3, 2), np.float32))
    with pytest.raises(GraphfuseError, match="takes 1 arguments, got 2"):
        reference.run(module, "main", np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(GraphfuseError, match="has dtype bool, expected float32"):
        reference.run(module, "main", np.zeros((2, 3), bool))
    with pytest.raises(GraphfuseError, match=r"no function @other \(functions: @main\)"):
        reference.run(module, "other")


def test_float64_arguments_convert_to_f32():
    module = parse(_unary("neg", "tensor<2xf32>"))
    (out,) = reference.run(module, "main", np.array([1.0, 2.0]))
    assert out.dtype == np.float32 and out.tolist() == [-1.0, -2.0]


def test_non_graph_op_is_a_diagnostic():
    text = _single("arith.addf %x, %x : tensor<2xf32>", "%x: tensor<2xf32>", "tensor<2xf32>")
    with pytest.raises(GraphfuseError, match="cannot interpret"):
        run_text(text, np.zeros(2, np.float32))


def test_f32_as_f64_keeps_what_f32_rounds_away() -> None:
    """(x + 1) - 1 rounds x = 1e-8 away in f32 but not in float64; casts to f32 stay wide
    too, other element types are unchanged."""
    module = parse(
        "func.func @main(%x: tensor<2xf32>, %i: tensor<2xi32>) -> (tensor<2xf32>, tensor<2xi32>) {\n"
        "  %one = graph.constant dense<1.0> : tensor<2xf32>\n"
        "  %a = graph.add %x, %one : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
        "  %b = graph.sub %a, %one : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
        "  %c = graph.cast %b : tensor<2xf32> -> tensor<2xf32>\n"
        "  %j = graph.add %i, %i : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>\n"
        "  func.return %c, %j : tensor<2xf32>, tensor<2xi32>\n}"
    )
    x = np.array([1e-8, 0.5], np.float32)
    i = np.array([3, -4], np.int32)
    narrow, ints = reference.run(module, "main", x, i)
    wide, wide_ints = reference.run(module, "main", x, i, f32_as_f64=True)
    assert narrow.dtype == np.float32 and narrow[0] == 0.0
    assert wide.dtype == np.float64
    np.testing.assert_allclose(wide, x.astype(np.float64), rtol=1e-7)
    assert wide_ints.dtype == np.int32
    np.testing.assert_array_equal(wide_ints, ints)
    # The flag does not leak into later runs.
    assert reference.run(module, "main", x, i)[0].dtype == np.float32


def test_interpreter_old_import_path_still_works() -> None:
    """`from graphfuse import reference` (before the dialect packages) still gives the
    interpreter, with a DeprecationWarning naming the new module."""
    import graphfuse
    from graphfuse.dialects.graph import interpreter

    with pytest.warns(DeprecationWarning, match="graphfuse.dialects.graph.interpreter"):
        from graphfuse import reference
    assert reference is interpreter
    with pytest.raises(AttributeError, match="no attribute 'referenc'"):
        graphfuse.referenc  # noqa: B018
