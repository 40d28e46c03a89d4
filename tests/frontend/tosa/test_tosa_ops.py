"""TOSA ops one by one against NumPy: two programs compiled for the CPU (softmax-like
reductions with the elementwise ops; data movement), the rest in the reference interpreter."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.tosa import from_tosa
from tests.frontend.tosa import tosa_text as t

F = "tensor<2x8xf32>"
ROW = "tensor<2x1xf32>"


def _un(name: str, op: str, x: str = "%arg0", typ: str = F) -> str:
    return f"%{name} = tosa.{op} {x} : ({typ}) -> {typ}"


def _bin(name: str, op: str, a: str, b: str, typ: str = F, out: str | None = None) -> str:
    return f"%{name} = tosa.{op} {a}, {b} : ({typ}, {typ}) -> {out or typ}"


def softmax_text() -> str:
    """Softmax along the last axis as torch-mlir writes it, and one more result holding
    the other elementwise ops."""
    body = [
        f"%m = tosa.reduce_max %arg0 {{axis = 1 : i32}} : ({F}) -> {ROW}",
        f"%d = tosa.sub %arg0, %m : ({F}, {ROW}) -> {F}",
        _un("e", "exp", "%d"),
        f"%s = tosa.reduce_sum %e {{axis = 1 : i32}} : ({F}) -> {ROW}",
        f"%r = tosa.reciprocal %s : ({ROW}) -> {ROW}",
        '%shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>',
        f"%y = tosa.mul %e, %r, %shift : ({F}, {ROW}, tensor<1xi8>) -> {F}",
        t.zero(),
        _un("a", "abs"),
        _un("l", "log", "%a"),
        _un("th", "tanh"),
        _un("sg", "sigmoid"),
        _un("rs", "rsqrt", "%a"),
        _un("er", "erf"),
        _bin("pw", "pow", "%a", "%sg"),
        f"%ng = tosa.negate %l, %zp, %zp : ({F}, tensor<1xf32>, tensor<1xf32>) -> {F}",
        _bin("mx", "maximum", "%ng", "%th"),
        _bin("mn", "minimum", "%mx", "%rs"),
        f"%cl = tosa.clamp %mn {{max_val = 1.500000e+00 : f32, min_val = -5.000000e-01 : f32}}"
        f" : ({F}) -> {F}",
        _bin("s1", "add", "%cl", "%er"),
        _bin("s2", "add", "%s1", "%pw"),
        f"%pr = tosa.reduce_product %sg {{axis = 0 : i32}} : ({F}) -> tensor<1x8xf32>",
        f"%mi = tosa.reduce_min %s2 {{axis = 0 : i32}} : ({F}) -> tensor<1x8xf32>",
        _bin("z", "sub", "%mi", "%pr", "tensor<1x8xf32>"),
    ]
    return t.function("main", [F], [F, "tensor<1x8xf32>"], body, "%y, %z")


def _softmax_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    softmax = e / e.sum(axis=1, keepdims=True)
    a = np.abs(x)
    tanh, sigmoid = np.tanh(x), 1 / (1 + np.exp(-x))
    erf = np.vectorize(math.erf)(x)
    clamped = np.clip(np.minimum(np.maximum(-np.log(a), tanh), 1 / np.sqrt(a)), -0.5, 1.5)
    total = clamped + erf + a**sigmoid
    return softmax, total.min(axis=0, keepdims=True) - sigmoid.prod(axis=0, keepdims=True)


def test_tosa_softmax_and_elementwise_ops_compiled_match_numpy(tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    path = tmp_path / "softmax.tosa.mlir"
    path.write_text(softmax_text())
    got = graphfuse.compile(path)(x)
    for actual, expected in zip(got, _softmax_reference(x), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=2e-4, atol=2e-5)


def movement_text(indices: np.ndarray) -> str:
    x, y = "tensor<2x3x4xf32>", "tensor<3x2xf32>"
    body = [
        t.const_shape("s0", [6, 4]),
        f"%r = tosa.reshape %arg0, %s0 : ({x}, !tosa.shape<2>) -> tensor<6x4xf32>",
        "%tr = tosa.transpose %r {perms = array<i32: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>",
        t.const_shape("st", [1, 2]),
        t.const_shape("sz", [2, 3]),
        "%sl = tosa.slice %tr, %st, %sz : (tensor<4x6xf32>, !tosa.shape<2>, !tosa.shape<2>) "
        "-> tensor<2x3xf32>",
        t.const_shape("pads", [1, 0, 0, 2]),
        '%pv = "tosa.const"() <{values = dense<-1.000000e+00> : tensor<1xf32>}> : () -> '
        "tensor<1xf32>",
        "%pd = tosa.pad %sl, %pads, %pv : (tensor<2x3xf32>, !tosa.shape<4>, tensor<1xf32>) -> "
        "tensor<3x5xf32>",
        "%rv = tosa.reverse %pd {axis = 1 : i32} : (tensor<3x5xf32>) -> tensor<3x5xf32>",
        t.const_shape("mul", [2, 1]),
        "%tl = tosa.tile %rv, %mul : (tensor<3x5xf32>, !tosa.shape<2>) -> tensor<6x5xf32>",
        f"%tr1 = tosa.transpose %arg1 {{perms = array<i32: 1, 0>}} : ({y}) -> tensor<2x3xf32>",
        t.const_shape("s1", [6, 1]),
        "%b = tosa.reshape %tr1, %s1 : (tensor<2x3xf32>, !tosa.shape<2>) -> tensor<6x1xf32>",
        "%cc = tosa.concat %tl, %b {axis = 1 : i32} : (tensor<6x5xf32>, tensor<6x1xf32>) -> "
        "tensor<6x6xf32>",
        t.const_shape("s2", [2, 3, 6]),
        "%v = tosa.reshape %cc, %s2 : (tensor<6x6xf32>, !tosa.shape<3>) -> tensor<2x3x6xf32>",
        t.const("idx", indices),
        "%g = tosa.gather %v, %idx : (tensor<2x3x6xf32>, tensor<2x4xi32>) -> tensor<2x4x6xf32>",
        "%am = tosa.argmax %g {axis = 2 : i32} : (tensor<2x4x6xf32>) -> tensor<2x4xi32>",
        "%gz = tosa.greater %g, %arg2 : (tensor<2x4x6xf32>, tensor<1x1x6xf32>) -> tensor<2x4x6xi1>",
        "%se = tosa.select %gz, %g, %arg2 : (tensor<2x4x6xi1>, tensor<2x4x6xf32>, "
        "tensor<1x1x6xf32>) -> tensor<2x4x6xf32>",
        "%ci = tosa.cast %se : (tensor<2x4x6xf32>) -> tensor<2x4x6xi32>",
        "%cf = tosa.cast %am : (tensor<2x4xi32>) -> tensor<2x4xf32>",
    ]
    args = [x, y, "tensor<1x1x6xf32>"]
    results = ["tensor<2x4x6xi32>", "tensor<2x4xf32>"]
    return t.function("main", args, results, body, "%ci, %cf")


def _movement_reference(x, y, z, indices):
    sl = x.reshape(6, 4).T[1:3, 2:5]
    rv = np.pad(sl, ((1, 0), (0, 2)), constant_values=-1)[:, ::-1]
    cc = np.concatenate([np.tile(rv, (2, 1)), y.T.reshape(6, 1)], axis=1).reshape(2, 3, 6)
    g = np.stack([cc[n, indices[n]] for n in range(2)])
    selected = np.where(g > z, g, z)
    return np.round(selected * 4).astype(np.int32), g.argmax(axis=2).astype(np.float32)


def test_tosa_data_movement_compiled_matches_numpy(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    z = rng.standard_normal((1, 1, 6)).astype(np.float32)
    indices = np.array([[0, 2, 1, 2], [1, 1, 0, 2]], np.int32)
    text = movement_text(indices).replace(
        "%ci = tosa.cast %se",
        "%se4 = tosa.add %se, %se : (tensor<2x4x6xf32>, "
        "tensor<2x4x6xf32>) -> tensor<2x4x6xf32>\n  %se8 = tosa.add %se4, %se4 : "
        "(tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>\n  %ci = tosa.cast %se8",
    )
    path = tmp_path / "movement.tosa.mlir"
    path.write_text(text)
    got = graphfuse.compile(path)(x, y, z)
    expected = _movement_reference(x, y, z, indices)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def _run(body: list[str], args: list[str], result: str, *arrays: np.ndarray) -> np.ndarray:
    module = from_tosa(t.function("main", args, [result], body, "%y"), "ops.tosa.mlir")
    return reference.run(module, "main", *arrays)[0]


def test_tosa_cast_rounds_halves_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6], np.float32)
    typ = "tensor<8xf32>"
    got = _run([f"%y = tosa.cast %arg0 : ({typ}) -> tensor<8xi32>"], [typ], "tensor<8xi32>", x)
    np.testing.assert_array_equal(got, [-2, -2, 0, 0, 2, 2, 3, -3])


_INF, _NAN = float("inf"), float("nan")
# (source, target, NaN's result): tosa-to-linalg's three float -> integer lowerings.
# Exact range (clamp, fptosi: NaN is poison there, 0 here); `uge 2^(n-1)` select (NaN is
# the maximum); f16 -> i32, +-inf selects (NaN is the minimum).
_SATURATING = [("f32", "i8", 0), ("f32", "i32", 2**31 - 1), ("f16", "i32", -(2**31))]


def _saturated(x: np.ndarray, dtype: type[np.signedinteger], nan: int) -> np.ndarray:
    info = np.iinfo(dtype)
    wide = np.clip(np.rint(x.astype(np.float64)), info.min, info.max)
    return np.where(np.isnan(wide), nan, wide).astype(dtype)


def test_tosa_cast_float_to_int_saturates_like_tosa_to_linalg(tmp_path: Path) -> None:
    """Out-of-range values clamp to the integer range (no wrap-around), after rounding
    halves to even; checked compiled and in the reference interpreter."""
    values = [200.0, -200.0, 127.4, -128.6, 3e9, -3e9, 6e4, 2.5, _INF, -_INF, _NAN]
    n = len(values)
    body = [
        f"%y{i} = tosa.cast %arg{i} : (tensor<{n}x{s}>) -> tensor<{n}x{d}>"
        for i, (s, d, _) in enumerate(_SATURATING)
    ]
    args = [f"tensor<{n}x{s}>" for s, _, _ in _SATURATING]
    results = [f"tensor<{n}x{d}>" for _, d, _ in _SATURATING]
    text = t.function("main", args, results, body, "%y0, %y1, %y2")
    x32 = np.array(values, np.float32)
    with np.errstate(over="ignore"):  # +-3e9 are +-inf in f16
        arrays = [x32, x32, x32.astype(np.float16)]
    dtypes = [np.int8, np.int32, np.int32]
    pairs = zip(arrays, dtypes, _SATURATING, strict=True)
    expected = [_saturated(a, d, case[2]) for a, d, case in pairs]
    assert expected[0][0] == 127 and expected[1][4] == 2**31 - 1  # not -56, not wrapped
    path = tmp_path / "cast.tosa.mlir"
    path.write_text(text)
    compiled = graphfuse.compile(path)(*arrays)
    interpreted = reference.run(from_tosa(text, "cast.tosa.mlir"), "main", *arrays)
    for got in (compiled, interpreted):
        for actual, want in zip(got, expected, strict=True):
            assert actual.dtype == want.dtype
            np.testing.assert_array_equal(actual, want)


def test_tosa_cast_to_bool_is_nonzero() -> None:
    x = np.array([0.0, 0.25, -3.0, 0.0], np.float32)
    typ = "tensor<4xf32>"
    got = _run([f"%y = tosa.cast %arg0 : ({typ}) -> tensor<4xi1>"], [typ], "tensor<4xi1>", x)
    np.testing.assert_array_equal(got, [False, True, True, False])


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("intdiv", lambda a, b: np.trunc(a / b).astype(np.int32)),
        ("bitwise_and", np.bitwise_and),
        ("bitwise_xor", np.bitwise_xor),
        ("maximum", np.maximum),
    ],
)
def test_tosa_integer_binary_ops(op: str, expected) -> None:
    a = np.array([7, -7, 9, 100, -3, 4], np.int32)
    b = np.array([2, 2, -4, 7, 5, 1], np.int32)
    typ = "tensor<6xi32>"
    got = _run([_bin("y", op, "%arg0", "%arg1", typ)], [typ, typ], typ, a, b)
    np.testing.assert_array_equal(got, expected(a, b))


def test_tosa_integer_clamp_and_mul() -> None:
    a = np.array([-300, -5, 0, 5, 300], np.int32)
    typ = "tensor<5xi32>"
    body = [
        f"%c = tosa.clamp %arg0 {{max_val = 100 : i32, min_val = -10 : i32}} : ({typ}) -> {typ}",
        '%sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>',
        f"%y = tosa.mul %c, %arg0, %sh : ({typ}, {typ}, tensor<1xi8>) -> {typ}",
    ]
    np.testing.assert_array_equal(_run(body, [typ], typ, a), np.clip(a, -10, 100) * a)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("logical_and", np.logical_and),
        ("logical_or", np.logical_or),
        ("logical_xor", np.logical_xor),
    ],
)
def test_tosa_logical_ops(op: str, expected) -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    typ = "tensor<4xi1>"
    got = _run([_bin("y", op, "%arg0", "%arg1", typ)], [typ, typ], typ, a, b)
    np.testing.assert_array_equal(got, expected(a, b))
    not_a = _run([_un("y", "logical_not", typ=typ)], [typ], typ, a)
    np.testing.assert_array_equal(not_a, ~a)


def test_tosa_batched_matmul_and_equal_select() -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 2, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 4)).astype(np.float32)
    out = "tensor<3x2x4xf32>"
    body = [
        t.zero(),
        f"%m = tosa.matmul %arg0, %arg1, %zp, %zp : (tensor<3x2x5xf32>, tensor<3x5x4xf32>, "
        f"tensor<1xf32>, tensor<1xf32>) -> {out}",
        f"%eq = tosa.equal %m, %m : ({out}, {out}) -> tensor<3x2x4xi1>",
        f"%ge = tosa.greater_equal %m, %m : ({out}, {out}) -> tensor<3x2x4xi1>",
        f"%n = tosa.select %eq, %m, %m : (tensor<3x2x4xi1>, {out}, {out}) -> {out}",
        f"%y = tosa.select %ge, %n, %m : (tensor<3x2x4xi1>, {out}, {out}) -> {out}",
    ]
    got = _run(body, ["tensor<3x2x5xf32>", "tensor<3x5x4xf32>"], out, a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)


def test_tosa_identity_and_constant_results() -> None:
    """A function may return a tosa.const, or its argument through tosa.identity."""
    value = np.array([1.5, -2.0], np.float32)
    body = [t.const("c", value), "%y = tosa.identity %c : (tensor<2xf32>) -> tensor<2xf32>"]
    got = _run(body, ["tensor<2xf32>"], "tensor<2xf32>", np.zeros(2, np.float32))
    np.testing.assert_array_equal(got, value)
