"""Constants holding -0.0 compile with their signs, fused or one op per kernel.

-0.0 == 0.0, so a splat test or a constant table comparing values takes zeros of both
signs for one splat (of the first) and a -0.0 for a +0.0 met before: x / c then gives +inf
where -inf is due. Each test compares the compiled results with the reference bit for bit
in sign (np.signbit), where `assert_allclose` alone would pass +0.0 for -0.0.
"""

from __future__ import annotations

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from tests.conftest import parse, run_text

_PLAIN_AND_FUSED = pytest.mark.parametrize("fuse", [False, True], ids=["plain", "fused"])


def _zeros(signs: list[bool]) -> str:
    """Zeros with the sign bit set where `signs` says, as a hex blob literal (the text
    `dense<[0.0, -0.0]>` would also do; the blob is what graph.constant prints)."""
    values = np.where(signs, np.float32(-0.0), np.float32(0.0)).astype(np.float32)
    return f'dense<"0x{values.tobytes().hex().upper()}">'


def _assert_same_signs(text: str, fuse: bool, *arrays: np.ndarray) -> None:
    expected = run_text(text, *arrays)
    compiled = graphfuse.compile(parse(text), options=CompileOptions(fuse=fuse))
    got = compiled(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    for value, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(value, want)
        np.testing.assert_array_equal(np.signbit(value), np.signbit(want))


def _divide(constant: str, shape: str, result: str) -> str:
    return f"""
func.func @main(%x: tensor<{result}xf32>) -> tensor<{result}xf32> {{
  %c = graph.constant {constant} : tensor<{shape}xf32>
  %0 = graph.div %x, %c : (tensor<{result}xf32>, tensor<{shape}xf32>) -> tensor<{result}xf32>
  func.return %0 : tensor<{result}xf32>
}}
"""


@_PLAIN_AND_FUSED
def test_zeros_of_both_signs_keep_their_signs(fuse: bool) -> None:
    text = _divide(_zeros([False, True]), "2", "2")
    assert text.count('"0x0000000000000080"') == 1
    _assert_same_signs(text, fuse, np.ones(2, np.float32))


@_PLAIN_AND_FUSED
def test_zeros_of_both_signs_broadcast(fuse: bool) -> None:
    x = np.array([[1, -2], [3, 4], [-5, 6]], np.float32)
    _assert_same_signs(_divide(_zeros([True, False]), "2", "3x2"), fuse, x)


@_PLAIN_AND_FUSED
def test_large_zeros_of_both_signs_keep_their_signs(fuse: bool) -> None:
    # 128 elements: too many to clone into the kernel, a global of the function instead.
    signs = [i % 3 == 1 for i in range(128)]
    _assert_same_signs(_divide(_zeros(signs), "128", "128"), fuse, np.ones(128, np.float32))


@_PLAIN_AND_FUSED
def test_negative_zero_splat_stays_negative(fuse: bool) -> None:
    x = np.array([[1, -2], [3, 4]], np.float32)
    _assert_same_signs(_divide("dense<-0.0>", "2x2", "2x2"), fuse, x)


@_PLAIN_AND_FUSED
def test_scalar_negative_zero_multiply(fuse: bool) -> None:
    text = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = graph.constant dense<-0.0> : tensor<f32>
  %0 = graph.mul %x, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
"""
    _assert_same_signs(text, fuse, np.array([[1, -2, 0], [-0.0, 5, -6]], np.float32))


@_PLAIN_AND_FUSED
def test_zero_and_negative_zero_in_one_kernel(fuse: bool) -> None:
    # x / 0.0 - x / -0.0 is +inf for x > 0; a -0.0 read as the +0.0 made first gives NaN.
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = graph.constant dense<0.0> : tensor<f32>
  %n = graph.constant dense<-0.0> : tensor<f32>
  %a = graph.div %x, %p : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = graph.div %x, %n : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %0 = graph.sub %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""
    _assert_same_signs(text, fuse, np.array([1, 2, 3, 4], np.float32))


def test_folded_zeros_of_both_signs_keep_their_signs() -> None:
    # [-1, 2] * 0 folds to [-0.0, 0.0], which x then is divided by.
    text = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[-1.0, 2.0]> : tensor<2xf32>
  %z = graph.constant dense<0.0> : tensor<f32>
  %m = graph.mul %c, %z : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %0 = graph.div %x, %m : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
"""
    _assert_same_signs(text, True, np.ones(2, np.float32))
