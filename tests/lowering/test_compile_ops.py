"""Compiled ops on the cases the lit fusion cases and random 4x8 graphs do not reach.

Window ops with strides, asymmetric padding, dilation and groups; data movement with
non-trivial index maps; reductions over leading and several axes; batch-broadcast matmul;
rank-0 tensors; f16, bf16, i32, i64 and i1; integer division's guards; casts; NaN, inf and
the tanh/erf approximations; functions returning arguments, repeats and several shapes;
odd sizes. Each module below holds several functions and is built once (builds are cached
by the lowered module text); each test compiles one entry and compares it with the reference
interpreter, or with explicit values where the reference is not the point. A function that
cannot be built breaks its whole module, so those (the xfail bug reports) sit apart.
"""

from __future__ import annotations

import ctypes
import math
import os
from functools import cache
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import graphfuse
from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.parsing import GraphfuseError, parse_text
from graphfuse.runtime import CompiledFunction
from graphfuse.runtime.build import build_shared_library
from graphfuse.testing.compare import compile_and_compare
from tests.conftest import parse

INT32_MIN = np.iinfo(np.int32).min
INT64_MIN = np.iinfo(np.int64).min
NAN = np.nan
INF = np.inf


@cache
def _module(text: str) -> ModuleOp:
    return parse(text)


def _compile(text: str, name: str) -> CompiledFunction:
    return graphfuse.compile(_module(text), entry=name)


def _check(text: str, name: str, inputs: Any = None, rtol: float = 1e-5) -> None:
    compile_and_compare(_module(text), name, seed=3, rtol=rtol, inputs=inputs)


def _f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


# ---------------------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------------------

CONV = """
func.func @stride2(%x: tensor<1x3x9x9xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %0 = graph.conv2d %x, %w strides = [2, 2] : (tensor<1x3x9x9xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return %0 : tensor<1x4x4x4xf32>
}
func.func @asymmetric_padding(%x: tensor<2x3x7x6xf32>, %w: tensor<5x3x3x2xf32>) -> tensor<2x5x8x6xf32> {
  %0 = graph.conv2d %x, %w padding = [1, 0, 2, 1] : (tensor<2x3x7x6xf32>, tensor<5x3x3x2xf32>) -> tensor<2x5x8x6xf32>
  func.return %0 : tensor<2x5x8x6xf32>
}
func.func @dilation2(%x: tensor<1x2x9x8xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x5x4xf32> {
  %0 = graph.conv2d %x, %w dilations = [2, 2] : (tensor<1x2x9x8xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x5x4xf32>
  func.return %0 : tensor<1x3x5x4xf32>
}
func.func @groups2(%x: tensor<1x4x6x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32> {
  %0 = graph.conv2d %x, %w groups = 2 : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  func.return %0 : tensor<1x6x4x4xf32>
}
func.func @depthwise(%x: tensor<1x3x5x5xf32>, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x5x5xf32> {
  %0 = graph.conv2d %x, %w padding = [1, 1, 1, 1] groups = 3 : (tensor<1x3x5x5xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x5x5xf32>
  func.return %0 : tensor<1x3x5x5xf32>
}
func.func @depthwise_multiplier(%x: tensor<1x3x5x5xf32>, %w: tensor<6x1x3x3xf32>) -> tensor<1x6x3x3xf32> {
  %0 = graph.conv2d %x, %w groups = 3 : (tensor<1x3x5x5xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x3x3xf32>
  func.return %0 : tensor<1x6x3x3xf32>
}
func.func @all_params(%x: tensor<1x4x8x7xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<1x6x4x8xf32> {
  %0 = graph.conv2d %x, %w strides = [2, 1] padding = [0, 2, 1, 1] dilations = [1, 2] groups = 2 : (tensor<1x4x8x7xf32>, tensor<6x2x3x2xf32>) -> tensor<1x6x4x8xf32>
  func.return %0 : tensor<1x6x4x8xf32>
}
func.func @bias_relu(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<1x4x4x4xf32> {
  %0 = graph.conv2d %x, %w strides = [2, 2] padding = [1, 1, 0, 0] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  %1 = graph.add %0, %b : (tensor<1x4x4x4xf32>, tensor<4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %2 = graph.relu %1 : tensor<1x4x4x4xf32>
  func.return %2 : tensor<1x4x4x4xf32>
}
func.func @computed_operands(%x: tensor<1x2x6x5xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %0 = graph.fused "fused_mul_neg_conv2d"(%x, %w) kind = out_elemwise_fusable : (tensor<1x2x6x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32> {
  ^bb0(%a: tensor<1x2x6x5xf32>, %b: tensor<4x1x3x3xf32>):
    %a2 = graph.mul %a, %a : (tensor<1x2x6x5xf32>, tensor<1x2x6x5xf32>) -> tensor<1x2x6x5xf32>
    %b2 = graph.neg %b : tensor<4x1x3x3xf32>
    %c = graph.conv2d %a2, %b2 strides = [2, 2] padding = [1, 2, 0, 1] groups = 2 : (tensor<1x2x6x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32>
    graph.yield %c : tensor<1x4x3x3xf32>
  }
  func.return %0 : tensor<1x4x3x3xf32>
}
func.func @int32(%x: tensor<1x2x5x5xi32>, %w: tensor<3x2x3x3xi32>) -> tensor<1x3x3x3xi32> {
  %0 = graph.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] : (tensor<1x2x5x5xi32>, tensor<3x2x3x3xi32>) -> tensor<1x3x3x3xi32>
  func.return %0 : tensor<1x3x3x3xi32>
}
"""


def test_conv2d_stride2() -> None:
    _check(CONV, "stride2")


def test_conv2d_asymmetric_padding() -> None:
    _check(CONV, "asymmetric_padding")


def test_conv2d_dilation2() -> None:
    _check(CONV, "dilation2")


def test_conv2d_groups() -> None:
    _check(CONV, "groups2")


def test_conv2d_depthwise() -> None:
    _check(CONV, "depthwise")


def test_conv2d_depthwise_channel_multiplier() -> None:
    _check(CONV, "depthwise_multiplier")


def test_conv2d_stride_padding_dilation_groups_together() -> None:
    _check(CONV, "all_params")


NO_CHANNELS = """
func.func @no_channels(%x: tensor<2x0x5x5xf32>, %w: tensor<3x0x3x3xf32>) -> tensor<2x3x5x5xf32> {
  %0 = graph.conv2d %x, %w padding = [1, 1, 1, 1] : (tensor<2x0x5x5xf32>, tensor<3x0x3x3xf32>) -> tensor<2x3x5x5xf32>
  func.return %0 : tensor<2x3x5x5xf32>
}
"""


def test_conv2d_over_zero_channels_is_refused() -> None:
    """An op on an empty tensor is refused at the door, naming the op and operand, rather
    than compiled (an empty argument alone is fine: ONNX models fold what reads one)."""
    with pytest.raises(
        GraphfuseError, match=r"graph.conv2d. op operand #0 is empty \(tensor<2x0x5x5xf32>\)"
    ):
        graphfuse.compile(parse_text(NO_CHANNELS), entry="no_channels")


def test_conv2d_bias_relu_epilogue_is_one_kernel() -> None:
    assert _compile(CONV, "bias_relu").kernel_count == 1
    _check(CONV, "bias_relu")


def test_conv2d_operands_computed_in_kernel() -> None:
    """Operands computed inside the kernel get no NHWC copy: padding is tested per tap.
    (The partitioner never fuses producers into a conv, so the kernel is written fused.)"""
    assert _compile(CONV, "computed_operands").kernel_count == 1
    _check(CONV, "computed_operands")


def test_conv2d_int32() -> None:
    _check(CONV, "int32")


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------

POOL = """
func.func @max_padding(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> {
  %0 = graph.max_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x2x7x7xf32> -> tensor<1x2x4x4xf32>
  func.return %0 : tensor<1x2x4x4xf32>
}
func.func @max_asymmetric(%x: tensor<1x2x6x5xf32>) -> tensor<1x2x3x5xf32> {
  %0 = graph.max_pool2d %x kernel = [2, 3] strides = [2, 1] padding = [1, 0, 0, 2] : tensor<1x2x6x5xf32> -> tensor<1x2x3x5xf32>
  func.return %0 : tensor<1x2x3x5xf32>
}
func.func @max_i32(%x: tensor<1x1x4x4xi32>) -> tensor<1x1x3x3xi32> {
  %0 = graph.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x1x4x4xi32> -> tensor<1x1x3x3xi32>
  func.return %0 : tensor<1x1x3x3xi32>
}
func.func @avg_exclude_pad(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> {
  %0 = graph.avg_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x2x7x7xf32> -> tensor<1x2x4x4xf32>
  func.return %0 : tensor<1x2x4x4xf32>
}
func.func @avg_include_pad(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> {
  %0 = graph.avg_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] count_include_pad : tensor<1x2x7x7xf32> -> tensor<1x2x4x4xf32>
  func.return %0 : tensor<1x2x4x4xf32>
}
func.func @avg_asymmetric_exclude_pad(%x: tensor<2x3x5x6xf32>) -> tensor<2x3x5x3xf32> {
  %0 = graph.avg_pool2d %x kernel = [3, 2] strides = [1, 2] padding = [0, 1, 2, 0] : tensor<2x3x5x6xf32> -> tensor<2x3x5x3xf32>
  func.return %0 : tensor<2x3x5x3xf32>
}
func.func @avg_asymmetric_include_pad(%x: tensor<2x3x5x6xf32>) -> tensor<2x3x5x3xf32> {
  %0 = graph.avg_pool2d %x kernel = [3, 2] strides = [1, 2] padding = [0, 1, 2, 0] count_include_pad : tensor<2x3x5x6xf32> -> tensor<2x3x5x3xf32>
  func.return %0 : tensor<2x3x5x3xf32>
}
func.func @max_nan(%x: tensor<1x1x2x4xf32>) -> tensor<1x1x1x2xf32> {
  %0 = graph.max_pool2d %x kernel = [2, 2] strides = [2, 2] : tensor<1x1x2x4xf32> -> tensor<1x1x1x2xf32>
  func.return %0 : tensor<1x1x1x2xf32>
}
"""


def _negative(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Values below zero everywhere, so a padded zero would win a max if it were counted."""
    rng = np.random.default_rng(7)
    return (-1 - rng.integers(0, 50, size=shape)).astype(dtype)


def test_max_pool2d_padding_never_wins() -> None:
    _check(POOL, "max_padding", [_negative((1, 2, 7, 7))])


def test_max_pool2d_asymmetric_padding() -> None:
    _check(POOL, "max_asymmetric", [_negative((1, 2, 6, 5))])


def test_max_pool2d_int32_padding_never_wins() -> None:
    _check(POOL, "max_i32", [_negative((1, 1, 4, 4), np.int32)])


def test_max_pool2d_nan_propagates() -> None:
    x = _f32(NAN, 1, 2, 3, 4, 5, 6, NAN).reshape(1, 1, 2, 4)
    _check(POOL, "max_nan", [x])


def test_avg_pool2d_padding_excluded_from_divisor() -> None:
    _check(POOL, "avg_exclude_pad")


def test_avg_pool2d_padding_included_in_divisor() -> None:
    _check(POOL, "avg_include_pad")


def test_avg_pool2d_asymmetric_padding_excluded() -> None:
    _check(POOL, "avg_asymmetric_exclude_pad")


def test_avg_pool2d_asymmetric_padding_included() -> None:
    _check(POOL, "avg_asymmetric_include_pad")


# ---------------------------------------------------------------------------------------
# data movement
# ---------------------------------------------------------------------------------------

MOVE = """
func.func @pad_value(%x: tensor<3x4xf32>) -> tensor<6x7xf32> {
  %0 = graph.pad %x low = [1, 0] high = [2, 3] value = -2.5 : tensor<3x4xf32> -> tensor<6x7xf32>
  func.return %0 : tensor<6x7xf32>
}
func.func @pad_fused(%x: tensor<2x3x4xf32>) -> tensor<3x3x7xf32> {
  %0 = graph.pad %x low = [0, 0, 2] high = [1, 0, 1] value = 1.0 : tensor<2x3x4xf32> -> tensor<3x3x7xf32>
  %1 = graph.exp %0 : tensor<3x3x7xf32>
  func.return %1 : tensor<3x3x7xf32>
}
func.func @pad_i32(%x: tensor<3x4xi32>) -> tensor<4x6xi32> {
  %0 = graph.pad %x low = [0, 2] high = [1, 0] value = 7.0 : tensor<3x4xi32> -> tensor<4x6xi32>
  func.return %0 : tensor<4x6xi32>
}
func.func @slice_strided(%x: tensor<5x9x4xf32>) -> tensor<2x3x2xf32> {
  %0 = graph.slice %x starts = [1, 0, 1] strides = [2, 3, 2] : tensor<5x9x4xf32> -> tensor<2x3x2xf32>
  %1 = graph.neg %0 : tensor<2x3x2xf32>
  func.return %1 : tensor<2x3x2xf32>
}
func.func @concat3_middle(%a: tensor<2x1x4xf32>, %b: tensor<2x3x4xf32>, %c: tensor<2x2x4xf32>) -> tensor<2x6x4xf32> {
  %0 = graph.concat %a, %b, %c axis = 1 : (tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x6x4xf32>
  func.return %0 : tensor<2x6x4xf32>
}
func.func @concat3_middle_fused(%a: tensor<2x1x4xf32>, %b: tensor<2x3x4xf32>, %c: tensor<2x2x4xf32>) -> tensor<2x6x4xf32> {
  %e = graph.exp %b : tensor<2x3x4xf32>
  %0 = graph.concat %a, %e, %c axis = -2 : (tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x6x4xf32>
  %1 = graph.mul %0, %0 : (tensor<2x6x4xf32>, tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  func.return %1 : tensor<2x6x4xf32>
}
func.func @reshape_split_merge(%x: tensor<6x4xf32>, %y: tensor<3xf32>) -> tensor<8x3xf32> {
  %0 = graph.reshape %x : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %1 = graph.neg %0 : tensor<2x3x4xf32>
  %2 = graph.reshape %1 : tensor<2x3x4xf32> -> tensor<8x3xf32>
  %3 = graph.add %2, %y : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  func.return %3 : tensor<8x3xf32>
}
func.func @transpose3d(%x: tensor<2x3x4xf32>, %y: tensor<4x1x3xf32>) -> tensor<4x2x3xf32> {
  %0 = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = graph.add %0, %y : (tensor<4x2x3xf32>, tensor<4x1x3xf32>) -> tensor<4x2x3xf32>
  func.return %1 : tensor<4x2x3xf32>
}
func.func @transpose3d_alone(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = graph.transpose %x perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  func.return %0 : tensor<3x4x2xf32>
}
"""


def test_pad_nonzero_value() -> None:
    _check(MOVE, "pad_value")


def test_pad_fused_with_elementwise() -> None:
    _check(MOVE, "pad_fused")


def test_pad_int32_value() -> None:
    _check(MOVE, "pad_i32")


def test_slice_strided() -> None:
    _check(MOVE, "slice_strided")


def test_concat_three_inputs_middle_axis() -> None:
    _check(MOVE, "concat3_middle")


def test_concat_three_inputs_middle_axis_fused() -> None:
    _check(MOVE, "concat3_middle_fused")


def test_reshape_split_then_merge() -> None:
    _check(MOVE, "reshape_split_merge")


def test_transpose_3d_with_broadcast_add() -> None:
    _check(MOVE, "transpose3d")


def test_transpose_3d_alone() -> None:
    _check(MOVE, "transpose3d_alone")


# ---------------------------------------------------------------------------------------
# gather
# ---------------------------------------------------------------------------------------


def _dense(array: np.ndarray) -> str:
    return f"dense<{array.tolist()}>"


_WORDS = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) * 0.25 - 7.0
"""An embedding table above SMALL_CONSTANT_ELEMENTS: the kernel reads it as an input."""
_SMALL_TABLE = np.arange(10 * 4, dtype=np.float32).reshape(10, 4) * -0.5 + 3.0
"""A table small enough to be cloned into the kernel (a module-level global)."""

GATHER = f"""
func.func @embedding(%ids: tensor<2x5xi64>) -> tensor<2x5x8xf32> {{
  %table = graph.constant {_dense(_WORDS)} : tensor<16x8xf32>
  %0 = graph.gather %table, %ids axis = 0 : (tensor<16x8xf32>, tensor<2x5xi64>) -> tensor<2x5x8xf32>
  func.return %0 : tensor<2x5x8xf32>
}}
func.func @small_table(%ids: tensor<3xi32>) -> tensor<3x4xf32> {{
  %table = graph.constant {_dense(_SMALL_TABLE)} : tensor<10x4xf32>
  %0 = graph.gather %table, %ids axis = 0 : (tensor<10x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}}
func.func @axis1(%x: tensor<3x6x2xf32>, %i: tensor<2x2xi32>) -> tensor<3x2x2x2xf32> {{
  %0 = graph.gather %x, %i axis = 1 : (tensor<3x6x2xf32>, tensor<2x2xi32>) -> tensor<3x2x2x2xf32>
  func.return %0 : tensor<3x2x2x2xf32>
}}
func.func @rank0(%x: tensor<5x3xf32>, %i: tensor<i64>) -> (tensor<3xf32>, tensor<5xf32>) {{
  %0 = graph.gather %x, %i axis = 0 : (tensor<5x3xf32>, tensor<i64>) -> tensor<3xf32>
  %1 = graph.gather %x, %i axis = -1 : (tensor<5x3xf32>, tensor<i64>) -> tensor<5xf32>
  func.return %0, %1 : tensor<3xf32>, tensor<5xf32>
}}
func.func @wrap_and_clamp(%x: tensor<6x3xf32>, %i: tensor<2x4xi64>) -> tensor<2x4x3xf32> {{
  %0 = graph.gather %x, %i axis = 0 : (tensor<6x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  func.return %0 : tensor<2x4x3xf32>
}}
func.func @constant_indices(%x: tensor<4x5xf32>) -> (tensor<4x2x3xf32>, tensor<4xf32>, tensor<5xf32>) {{
  %i = graph.constant dense<[[2, -1, 7], [0, -9, 4]]> : tensor<2x3xi64>
  %0 = graph.gather %x, %i axis = 1 : (tensor<4x5xf32>, tensor<2x3xi64>) -> tensor<4x2x3xf32>
  %last = graph.constant dense<-1> : tensor<i32>
  %1 = graph.gather %x, %last axis = 1 : (tensor<4x5xf32>, tensor<i32>) -> tensor<4xf32>
  %2 = graph.gather %x, %last axis = 0 : (tensor<4x5xf32>, tensor<i32>) -> tensor<5xf32>
  func.return %0, %1, %2 : tensor<4x2x3xf32>, tensor<4xf32>, tensor<5xf32>
}}
func.func @add_relu(%ids: tensor<2x5xi64>, %bias: tensor<8xf32>) -> tensor<2x5x8xf32> {{
  %table = graph.constant {_dense(_WORDS)} : tensor<16x8xf32>
  %0 = graph.gather %table, %ids axis = 0 : (tensor<16x8xf32>, tensor<2x5xi64>) -> tensor<2x5x8xf32>
  %1 = graph.add %0, %bias : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %2 = graph.relu %1 : tensor<2x5x8xf32>
  func.return %2 : tensor<2x5x8xf32>
}}
func.func @computed_operands(%x: tensor<6x4xf32>, %f: tensor<3xf32>) -> tensor<3x4xf32> {{
  %e = graph.exp %x : tensor<6x4xf32>
  %s = graph.mul %f, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %i = graph.cast %s : tensor<3xf32> -> tensor<3xi32>
  %0 = graph.gather %e, %i axis = 0 : (tensor<6x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  %1 = graph.neg %0 : tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}}
func.func @int64_data(%x: tensor<4x3xi64>, %i: tensor<5xi32>) -> tensor<4x5xi64> {{
  %0 = graph.gather %x, %i axis = 1 : (tensor<4x3xi64>, tensor<5xi32>) -> tensor<4x5xi64>
  func.return %0 : tensor<4x5xi64>
}}
"""


def _ids(values: list[Any], dtype: Any = np.int64) -> np.ndarray:
    return np.array(values, dtype=dtype)


def test_gather_embedding_rows_of_constant_table() -> None:
    """BERT's word embeddings: i64 token ids [batch, sequence] into a [vocab, hidden] table."""
    ids = _ids([[0, 3, 15, 7, 7], [1, 2, 14, 0, 9]])
    got = _compile(GATHER, "embedding")(ids)
    np.testing.assert_array_equal(got, _WORDS[ids])
    _check(GATHER, "embedding", inputs=[ids])


def test_gather_from_small_constant_table() -> None:
    _check(GATHER, "small_table", inputs=[_ids([9, 0, 4], np.int32)])


def test_gather_axis1_with_rank2_indices() -> None:
    x = np.arange(36, dtype=np.float32).reshape(3, 6, 2)
    i = _ids([[5, 0], [2, 2]], np.int32)
    got = _compile(GATHER, "axis1")(x, i)
    np.testing.assert_array_equal(got, np.take(x, i, axis=1))


def test_gather_rank0_indices_drop_the_axis() -> None:
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    rows, columns = _compile(GATHER, "rank0")(x, np.array(2, np.int64))
    np.testing.assert_array_equal(rows, x[2])
    np.testing.assert_array_equal(columns, x[:, 2])


def test_gather_negative_indices_wrap_and_out_of_range_clamp() -> None:
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    i = _ids([[-1, -6, 0, 5], [-7, 6, 100, INT64_MIN]])
    got = _compile(GATHER, "wrap_and_clamp")(x, i)
    rows = [[5, 0, 0, 5], [0, 5, 5, 0]]
    np.testing.assert_array_equal(got, x[rows])
    _check(GATHER, "wrap_and_clamp", inputs=[x, i])


def test_gather_constant_indices_in_kernel() -> None:
    """Constant indices: a table read in the loop, and a scalar folded (wrapped) at
    compile time."""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    table, column, row = _compile(GATHER, "constant_indices")(x)
    np.testing.assert_array_equal(table, x[:, [[2, 4, 4], [0, 0, 4]]])
    np.testing.assert_array_equal(column, x[:, -1])
    np.testing.assert_array_equal(row, x[-1])


def test_gather_add_relu_is_one_kernel() -> None:
    compiled = _compile(GATHER, "add_relu")
    assert compiled.kernel_count == 1
    ids = _ids([[4, -1, 15, 0, -2], [3, 3, 8, -16, 2]])
    bias = np.linspace(-2, 2, 8, dtype=np.float32)
    np.testing.assert_array_equal(compiled(ids, bias), np.maximum(_WORDS[ids % 16] + bias, 0))
    _check(GATHER, "add_relu", inputs=[ids, bias])


def test_gather_data_and_indices_computed_in_kernel() -> None:
    """exp(x) read at indices cast from f*f: both operands computed inside one kernel."""
    assert _compile(GATHER, "computed_operands").kernel_count == 1
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
    f = _f32(2.2, -1.1, 1.9)  # squares 4.84, 1.21, 3.61: rows 4, 1, 3
    _check(GATHER, "computed_operands", inputs=[x, f])


def test_gather_int64_data_int32_indices() -> None:
    x = np.arange(12, dtype=np.int64).reshape(4, 3) * 1_000_000_007
    _check(GATHER, "int64_data", inputs=[x, _ids([2, -3, 1, 3, -4], np.int32)])


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------

REDUCE = """
func.func @sum_axis0(%x: tensor<5x3x7xf32>) -> tensor<3x7xf32> {
  %0 = graph.reduce_sum %x axes = [0] : tensor<5x3x7xf32> -> tensor<3x7xf32>
  func.return %0 : tensor<3x7xf32>
}
func.func @sum_axes02(%x: tensor<5x3x7xf32>) -> tensor<3xf32> {
  %0 = graph.reduce_sum %x axes = [0, 2] : tensor<5x3x7xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func @sum_axes02_keepdims(%x: tensor<5x3x7xf32>) -> tensor<1x3x1xf32> {
  %0 = graph.reduce_sum %x axes = [0, 2] keepdims : tensor<5x3x7xf32> -> tensor<1x3x1xf32>
  func.return %0 : tensor<1x3x1xf32>
}
func.func @mean_axis1_keepdims(%x: tensor<5x3x7xf32>) -> tensor<5x1x7xf32> {
  %0 = graph.reduce_mean %x axes = [-2] keepdims : tensor<5x3x7xf32> -> tensor<5x1x7xf32>
  func.return %0 : tensor<5x1x7xf32>
}
func.func @max_axes12(%x: tensor<5x3x7xf32>) -> tensor<5xf32> {
  %0 = graph.reduce_max %x axes = [1, 2] : tensor<5x3x7xf32> -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
func.func @min_axis0_keepdims(%x: tensor<5x3x7xf32>) -> tensor<1x3x7xf32> {
  %0 = graph.reduce_min %x axes = [0] keepdims : tensor<5x3x7xf32> -> tensor<1x3x7xf32>
  func.return %0 : tensor<1x3x7xf32>
}
func.func @mean_all(%x: tensor<5x3x7xf32>) -> tensor<f32> {
  %0 = graph.reduce_mean %x axes = [0, 1, 2] : tensor<5x3x7xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}
func.func @center_axis0(%x: tensor<5x3x7xf32>) -> tensor<5x3x7xf32> {
  %0 = graph.reduce_max %x axes = [0] keepdims : tensor<5x3x7xf32> -> tensor<1x3x7xf32>
  %1 = graph.sub %x, %0 : (tensor<5x3x7xf32>, tensor<1x3x7xf32>) -> tensor<5x3x7xf32>
  func.return %1 : tensor<5x3x7xf32>
}
func.func @max_i32_axis0(%x: tensor<5x3xi32>) -> tensor<3xi32> {
  %0 = graph.reduce_max %x axes = [0] : tensor<5x3xi32> -> tensor<3xi32>
  func.return %0 : tensor<3xi32>
}
func.func @min_i64_keepdims(%x: tensor<5x3xi64>) -> tensor<1x1xi64> {
  %0 = graph.reduce_min %x axes = [0, 1] keepdims : tensor<5x3xi64> -> tensor<1x1xi64>
  func.return %0 : tensor<1x1xi64>
}
func.func @sum_i32_axis0(%x: tensor<5x3xi32>) -> tensor<3xi32> {
  %0 = graph.reduce_sum %x axes = [0] : tensor<5x3xi32> -> tensor<3xi32>
  func.return %0 : tensor<3xi32>
}
func.func @sum_axes_descending(%x: tensor<4x2xf32>) -> tensor<f32> {
  %0 = graph.reduce_sum %x axes = [1, 0] : tensor<4x2xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}
func.func @max_nan(%x: tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = graph.reduce_max %x axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
  %1 = graph.reduce_min %x axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
  func.return %0, %1 : tensor<2xf32>, tensor<2xf32>
}
func.func @max_of_neg_inf(%x: tensor<3x2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = graph.reduce_max %x axes = [0] : tensor<3x2xf32> -> tensor<2xf32>
  %n = graph.neg %x : tensor<3x2xf32>
  %1 = graph.reduce_min %n axes = [0] : tensor<3x2xf32> -> tensor<2xf32>
  func.return %0, %1 : tensor<2xf32>, tensor<2xf32>
}
"""


def test_reduce_sum_leading_axis() -> None:
    _check(REDUCE, "sum_axis0")


def test_reduce_sum_outer_and_inner_axes() -> None:
    _check(REDUCE, "sum_axes02")


def test_reduce_sum_several_axes_keepdims() -> None:
    _check(REDUCE, "sum_axes02_keepdims")


def test_reduce_mean_middle_axis_keepdims() -> None:
    _check(REDUCE, "mean_axis1_keepdims")


def test_reduce_max_two_trailing_axes() -> None:
    _check(REDUCE, "max_axes12")


def test_reduce_min_leading_axis_keepdims() -> None:
    _check(REDUCE, "min_axis0_keepdims")


def test_reduce_mean_all_axes_to_rank0() -> None:
    _check(REDUCE, "mean_all")


def test_reduce_sum_axes_in_descending_order() -> None:
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    _check(REDUCE, "sum_axes_descending", [x])


def test_reduce_max_leading_axis_broadcast_back() -> None:
    _check(REDUCE, "center_axis0")


def test_reduce_max_int32() -> None:
    _check(REDUCE, "max_i32_axis0")


def test_reduce_min_int64_all_axes_keepdims() -> None:
    _check(REDUCE, "min_i64_keepdims")


def test_reduce_sum_int32_wraps() -> None:
    x = np.full((5, 3), 2**30, dtype=np.int32)
    x[:, 1] = -(2**30)
    _check(REDUCE, "sum_i32_axis0", [x])


def test_reduce_max_min_nan_propagates() -> None:
    x = _f32(1, NAN, 3, 2, -1, -2, -3, -4).reshape(2, 4)
    _check(REDUCE, "max_nan", [x])


def test_reduce_max_min_of_infinities() -> None:
    """The identities are -inf and +inf: an all -inf column gives -inf, not a finite value."""
    x = _f32(-INF, -INF, -INF, 1, -INF, -INF).reshape(3, 2)
    _check(REDUCE, "max_of_neg_inf", [x])


# ---------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------

MATMUL = """
func.func @batch_broadcast(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32> {
  %0 = graph.matmul %a, %b : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
  func.return %0 : tensor<2x5x3x6xf32>
}
func.func @unbatched_lhs(%a: tensor<3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = graph.matmul %a, %b : (tensor<3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  func.return %0 : tensor<2x3x5xf32>
}
func.func @transposed_rhs_epilogue(%a: tensor<2x3x4xf32>, %w: tensor<2x5x4xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %t = graph.transpose %w perm = [0, 2, 1] : tensor<2x5x4xf32> -> tensor<2x4x5xf32>
  %0 = graph.matmul %a, %t : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = graph.add %0, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %2 = graph.tanh %1 : tensor<2x3x5xf32>
  func.return %2 : tensor<2x3x5xf32>
}
func.func @computed_rhs(%a: tensor<1x3x4xf32>, %w: tensor<2x5x4xf32>) -> tensor<2x3x5xf32> {
  %0 = graph.fused "fused_transpose_exp_matmul"(%a, %w) kind = out_elemwise_fusable : (tensor<1x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32> {
  ^bb0(%x: tensor<1x3x4xf32>, %y: tensor<2x5x4xf32>):
    %t = graph.transpose %y perm = [0, 2, 1] : tensor<2x5x4xf32> -> tensor<2x4x5xf32>
    %e = graph.exp %t : tensor<2x4x5xf32>
    %m = graph.matmul %x, %e : (tensor<1x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
    graph.yield %m : tensor<2x3x5xf32>
  }
  func.return %0 : tensor<2x3x5xf32>
}
func.func @outer_product(%a: tensor<3x1xf32>, %b: tensor<1x5xf32>) -> tensor<3x5xf32> {
  %0 = graph.matmul %a, %b : (tensor<3x1xf32>, tensor<1x5xf32>) -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}
func.func @dot_17(%a: tensor<1x17xf32>, %b: tensor<17x1xf32>) -> tensor<1x1xf32> {
  %0 = graph.matmul %a, %b : (tensor<1x17xf32>, tensor<17x1xf32>) -> tensor<1x1xf32>
  func.return %0 : tensor<1x1xf32>
}
func.func @int64(%a: tensor<2x3x4xi64>, %b: tensor<4x3xi64>) -> tensor<2x3x3xi64> {
  %0 = graph.matmul %a, %b : (tensor<2x3x4xi64>, tensor<4x3xi64>) -> tensor<2x3x3xi64>
  func.return %0 : tensor<2x3x3xi64>
}
"""


def test_matmul_batch_broadcast() -> None:
    _check(MATMUL, "batch_broadcast")


def test_matmul_unbatched_lhs_batched_rhs() -> None:
    _check(MATMUL, "unbatched_lhs")


def test_matmul_transposed_rhs_with_epilogue() -> None:
    _check(MATMUL, "transposed_rhs_epilogue")


def test_matmul_rhs_computed_in_kernel() -> None:
    """A right-hand side computed inside the kernel is read in place (no transposed copy)."""
    assert _compile(MATMUL, "computed_rhs").kernel_count == 1
    _check(MATMUL, "computed_rhs")


def test_matmul_contraction_of_one() -> None:
    _check(MATMUL, "outer_product")


def test_matmul_odd_contraction_single_column() -> None:
    _check(MATMUL, "dot_17")


def test_matmul_int64() -> None:
    _check(MATMUL, "int64")


# ---------------------------------------------------------------------------------------
# rank 0
# ---------------------------------------------------------------------------------------

RANK0 = """
func.func @scalar_chain(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = graph.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %1 = graph.exp %0 : tensor<f32>
  func.return %1 : tensor<f32>
}
func.func @scalar_broadcast(%s: tensor<f32>, %x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = graph.mul %s, %x : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
func.func @reduce_plus_scalar(%x: tensor<3x4xf32>, %s: tensor<f32>) -> tensor<f32> {
  %0 = graph.reduce_sum %x axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  %1 = graph.add %0, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %1 : tensor<f32>
}
func.func @scalar_int_cast(%a: tensor<i32>, %b: tensor<i32>) -> (tensor<i32>, tensor<i64>) {
  %0 = graph.div %a, %b : (tensor<i32>, tensor<i32>) -> tensor<i32>
  %1 = graph.cast %0 : tensor<i32> -> tensor<i1>
  %2 = graph.cast %1 : tensor<i1> -> tensor<i64>
  func.return %0, %2 : tensor<i32>, tensor<i64>
}
"""


def test_rank0_elementwise_chain() -> None:
    _check(RANK0, "scalar_chain")


def test_rank0_broadcast_against_matrix() -> None:
    _check(RANK0, "scalar_broadcast")


def test_rank0_reduction_result() -> None:
    _check(RANK0, "reduce_plus_scalar")


def test_rank0_int_and_bool() -> None:
    _check(RANK0, "scalar_int_cast", [np.array(-7, np.int32), np.array(2, np.int32)])


# ---------------------------------------------------------------------------------------
# f16, i32, i64, i1
# ---------------------------------------------------------------------------------------

TYPES = """
func.func @f16_chain(%x: tensor<3x17xf16>, %y: tensor<17xf16>) -> (tensor<3x17xf16>, tensor<3x1xf16>) {
  %0 = graph.mul %x, %y : (tensor<3x17xf16>, tensor<17xf16>) -> tensor<3x17xf16>
  %1 = graph.exp %0 : tensor<3x17xf16>
  %2 = graph.reduce_sum %1 axes = [1] keepdims : tensor<3x17xf16> -> tensor<3x1xf16>
  %3 = graph.div %1, %2 : (tensor<3x17xf16>, tensor<3x1xf16>) -> tensor<3x17xf16>
  func.return %3, %2 : tensor<3x17xf16>, tensor<3x1xf16>
}
func.func @f16_matmul(%a: tensor<3x8xf16>, %b: tensor<8x5xf16>) -> tensor<3x5xf16> {
  %0 = graph.matmul %a, %b : (tensor<3x8xf16>, tensor<8x5xf16>) -> tensor<3x5xf16>
  func.return %0 : tensor<3x5xf16>
}
func.func @f16_tanh_erf(%x: tensor<64xf16>) -> (tensor<64xf16>, tensor<64xf16>) {
  %0 = graph.tanh %x : tensor<64xf16>
  %1 = graph.erf %x : tensor<64xf16>
  func.return %0, %1 : tensor<64xf16>, tensor<64xf16>
}
func.func @i32_arith(%a: tensor<4x5xi32>, %b: tensor<5xi32>) -> tensor<4x5xi32> {
  %0 = graph.mul %a, %b : (tensor<4x5xi32>, tensor<5xi32>) -> tensor<4x5xi32>
  %1 = graph.sub %0, %a : (tensor<4x5xi32>, tensor<4x5xi32>) -> tensor<4x5xi32>
  %2 = graph.abs %1 : tensor<4x5xi32>
  %3 = graph.neg %2 : tensor<4x5xi32>
  %4 = graph.max %3, %b : (tensor<4x5xi32>, tensor<5xi32>) -> tensor<4x5xi32>
  %5 = graph.relu %1 : tensor<4x5xi32>
  %6 = graph.min %4, %5 : (tensor<4x5xi32>, tensor<4x5xi32>) -> tensor<4x5xi32>
  func.return %6 : tensor<4x5xi32>
}
func.func @i64_wrap(%a: tensor<4xi64>, %b: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %0 = graph.add %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %1 = graph.mul %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %0, %1 : tensor<4xi64>, tensor<4xi64>
}
func.func @bool_chain(%x: tensor<3x5xf32>, %y: tensor<5xf32>, %k: tensor<3x1xf32>) -> tensor<3x5xi32> {
  %m = graph.cast %k : tensor<3x1xf32> -> tensor<3x1xi1>
  %lt = graph.compare lt, %x, %y : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xi1>
  %gt = graph.compare gt, %lt, %m : (tensor<3x5xi1>, tensor<3x1xi1>) -> tensor<3x5xi1>
  %ge = graph.compare ge, %x, %k : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xi1>
  %t = graph.cast %y : tensor<5xf32> -> tensor<5xi1>
  %sel = graph.select %gt, %ge, %t : (tensor<3x5xi1>, tensor<3x5xi1>, tensor<5xi1>) -> tensor<3x5xi1>
  %i = graph.cast %sel : tensor<3x5xi1> -> tensor<3x5xi32>
  func.return %i : tensor<3x5xi32>
}
func.func @bool_select_float(%x: tensor<3x5xf32>, %y: tensor<5xf32>) -> tensor<3x5xf32> {
  %ne = graph.compare ne, %x, %y : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xi1>
  %f = graph.cast %ne : tensor<3x5xi1> -> tensor<3x5xf32>
  %le = graph.compare le, %x, %y : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xi1>
  %0 = graph.select %le, %f, %x : (tensor<3x5xi1>, tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}
func.func @bool_pad_transpose(%x: tensor<2x3xf32>) -> tensor<4x3xi32> {
  %m = graph.cast %x : tensor<2x3xf32> -> tensor<2x3xi1>
  %0 = graph.transpose %m perm = [1, 0] : tensor<2x3xi1> -> tensor<3x2xi1>
  %1 = graph.pad %0 low = [1, 0] high = [0, 1] value = 1.0 : tensor<3x2xi1> -> tensor<4x3xi1>
  %2 = graph.cast %1 : tensor<4x3xi1> -> tensor<4x3xi32>
  func.return %2 : tensor<4x3xi32>
}
"""


# The reference rounds every f16 op's result; a fused kernel keeps f32 between its ops and
# rounds what it stores, hence the few-ulp tolerances below.


def test_f16_softmax_like_chain() -> None:
    _check(TYPES, "f16_chain", rtol=4e-3)


def test_f16_matmul() -> None:
    _check(TYPES, "f16_matmul", rtol=4e-3)


def test_f16_tanh_erf() -> None:
    x = np.linspace(-5, 5, 64).astype(np.float16)
    _check(TYPES, "f16_tanh_erf", [x], rtol=2e-3)


def test_i32_elementwise_chain() -> None:
    _check(TYPES, "i32_arith")


def test_i64_add_mul_wrap() -> None:
    big = np.iinfo(np.int64).max
    a = np.array([big, INT64_MIN, 2**40, -3], np.int64)
    b = np.array([1, -1, 2**30, 5], np.int64)
    _check(TYPES, "i64_wrap", [a, b])


def test_i1_compare_select_cast_chain() -> None:
    x = np.random.default_rng(2).integers(-1, 2, size=(3, 5)).astype(np.float32)
    y = _f32(0, 1, -1, 0.5, 0)
    k = _f32(0, 1, -0.5).reshape(3, 1)
    assert _compile(TYPES, "bool_chain").kernel_count == 1
    _check(TYPES, "bool_chain", [x, y, k])


def test_i1_select_between_floats() -> None:
    x = np.random.default_rng(2).integers(-1, 2, size=(3, 5)).astype(np.float32)
    _check(TYPES, "bool_select_float", [x, _f32(0, 1, -1, 0.5, 0)])


def test_i1_transpose_pad() -> None:
    x = _f32(0, 1, -0.0, 2, 0, NAN).reshape(2, 3)
    _check(TYPES, "bool_pad_transpose", [x])


I1_BUFFERS = """
func.func @result(%x: tensor<4xf32>) -> tensor<4xi1> {
  %0 = graph.cast %x : tensor<4xf32> -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}
func.func @argument(%m: tensor<4xi1>) -> tensor<4xf32> {
  %0 = graph.cast %m : tensor<4xi1> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @shared_mask(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %m = graph.compare lt, %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  %a = graph.select %m, %x, %y : (tensor<8xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b = graph.select %m, %y, %x : (tensor<8xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %a, %b : tensor<8xf32>, tensor<8xf32>
}
func.func @constant_mask(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = graph.constant dense<[true, false, true]> : tensor<3xi1>
  %n = graph.neg %x : tensor<3xf32>
  %0 = graph.select %c, %x, %n : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
"""


def test_i1_function_result() -> None:
    _check(I1_BUFFERS, "result", [_f32(0, 1, NAN, -0.0)])


def test_i1_function_argument() -> None:
    _check(I1_BUFFERS, "argument", [np.array([True, False, True, False])])


def test_i1_mask_shared_by_two_kernels() -> None:
    _check(I1_BUFFERS, "shared_mask")


def test_i1_non_splat_constant() -> None:
    _check(I1_BUFFERS, "constant_mask")


# ---------------------------------------------------------------------------------------
# bf16 (kept in its own module: a bf16 module is built with arith-expand)
# ---------------------------------------------------------------------------------------

BF16 = """
func.func @chain(%x: tensor<3x17xbf16>, %y: tensor<17xbf16>) -> (tensor<3x17xbf16>, tensor<3xbf16>) {
  %0 = graph.add %x, %y : (tensor<3x17xbf16>, tensor<17xbf16>) -> tensor<3x17xbf16>
  %1 = graph.tanh %0 : tensor<3x17xbf16>
  %2 = graph.reduce_max %1 axes = [1] : tensor<3x17xbf16> -> tensor<3xbf16>
  func.return %1, %2 : tensor<3x17xbf16>, tensor<3xbf16>
}
func.func @casts(%x: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xi32>, tensor<8xf16>) {
  %0 = graph.cast %x : tensor<8xf32> -> tensor<8xbf16>
  %1 = graph.cast %0 : tensor<8xbf16> -> tensor<8xi32>
  %2 = graph.cast %0 : tensor<8xbf16> -> tensor<8xf16>
  func.return %0, %1, %2 : tensor<8xbf16>, tensor<8xi32>, tensor<8xf16>
}
func.func @max_nan(%a: tensor<6xf32>, %b: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<f32>) {
  %0 = graph.max %a, %b : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %1 = graph.min %a, %b : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %2 = graph.reduce_max %a axes = [0] : tensor<6xf32> -> tensor<f32>
  func.return %0, %1, %2 : tensor<6xf32>, tensor<6xf32>, tensor<f32>
}
"""


def test_bf16_elementwise_and_reduction() -> None:
    _check(BF16, "chain", rtol=1e-2)


def test_bf16_casts_round_to_nearest_even() -> None:
    # 1 + 2^-8 ties to 1, 1 + 3 * 2^-8 ties to 1 + 2^-6, 255.5 ties to 256; -2.75 is exact
    # and truncates to -2; 70000 overflows f16.
    x = _f32(1 + 2**-8, 1 + 3 * 2**-8, 3.5, -2.75, -1e9, -0.0, 255.5, 70000.0)
    _check(BF16, "casts", [x])


def test_bf16_module_max_min_nan() -> None:
    """arith-expand (used for bf16 modules) rewrites maximumf; NaN must still win."""
    a = _f32(NAN, 1, NAN, -0.0, 2, -1)
    b = _f32(1, NAN, NAN, 0.0, 3, -2)
    _check(BF16, "max_nan", [a, b])


BF16_PAD = """
func.func @pad(%x: tensor<2x3xbf16>) -> tensor<3x5xbf16> {
  %0 = graph.pad %x low = [1, 1] high = [0, 1] value = 0.5 : tensor<2x3xbf16> -> tensor<3x5xbf16>
  func.return %0 : tensor<3x5xbf16>
}
"""


def test_pad_bf16_nonzero_value() -> None:
    options = CompileOptions()
    upstream = lower_to(_module(BF16_PAD).clone(), Stage.UPSTREAM, options)
    library = build_shared_library(upstream, options.target)
    # Every symbol resolves when loaded eagerly (before the fix, __truncsfbf2 did not).
    ctypes.CDLL(str(library), mode=os.RTLD_NOW)
    _check(BF16_PAD, "pad")


# ---------------------------------------------------------------------------------------
# integer division
# ---------------------------------------------------------------------------------------

DIV = """
func.func @i32(%a: tensor<9xi32>, %b: tensor<9xi32>) -> tensor<9xi32> {
  %0 = graph.div %a, %b : (tensor<9xi32>, tensor<9xi32>) -> tensor<9xi32>
  func.return %0 : tensor<9xi32>
}
func.func @i64(%a: tensor<9xi64>, %b: tensor<9xi64>) -> tensor<9xi64> {
  %0 = graph.div %a, %b : (tensor<9xi64>, tensor<9xi64>) -> tensor<9xi64>
  func.return %0 : tensor<9xi64>
}
func.func @by_zero_constant(%a: tensor<17xi32>) -> tensor<17xi32> {
  %z = graph.constant dense<0> : tensor<17xi32>
  %0 = graph.div %a, %z : (tensor<17xi32>, tensor<17xi32>) -> tensor<17xi32>
  func.return %0 : tensor<17xi32>
}
func.func @broadcast_divisor(%a: tensor<3x4xi32>, %b: tensor<4xi32>) -> tensor<3x4xi32> {
  %0 = graph.div %a, %b : (tensor<3x4xi32>, tensor<4xi32>) -> tensor<3x4xi32>
  func.return %0 : tensor<3x4xi32>
}
"""

_DIVIDENDS = [7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0, 2**31 - 1]
_DIVISORS = [2, 2, -2, -2, 0, -1, 0, 0, -1]
_QUOTIENTS = [3, -3, -3, 3, 5, INT32_MIN, INT32_MIN, 0, -(2**31 - 1)]
"""Truncating division; x / 0 = x (the reference's definition); INT_MIN / -1 wraps."""


def test_div_i32_by_zero_and_int_min_by_minus_one() -> None:
    a, b = np.array(_DIVIDENDS, np.int32), np.array(_DIVISORS, np.int32)
    np.testing.assert_array_equal(_compile(DIV, "i32")(a, b), np.array(_QUOTIENTS, np.int32))
    _check(DIV, "i32", [a, b])


def test_div_i64_by_zero_and_int_min_by_minus_one() -> None:
    a = np.array([*_DIVIDENDS[:5], INT64_MIN, INT64_MIN, 0, 2**63 - 1], np.int64)
    b = np.array(_DIVISORS, np.int64)
    expected = np.array([*_QUOTIENTS[:5], INT64_MIN, INT64_MIN, 0, -(2**63 - 1)], np.int64)
    np.testing.assert_array_equal(_compile(DIV, "i64")(a, b), expected)
    _check(DIV, "i64", [a, b])


def test_div_by_constant_zero_gives_dividend() -> None:
    a = np.arange(-8, 9, dtype=np.int32)
    np.testing.assert_array_equal(_compile(DIV, "by_zero_constant")(a), a)
    _check(DIV, "by_zero_constant", [a])


def test_div_broadcast_divisor_with_zero() -> None:
    a = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    _check(DIV, "broadcast_divisor", [a, np.array([0, -1, 3, -4], np.int32)])


def test_div_int_min_by_two_compiled() -> None:
    a = np.array([INT32_MIN, INT32_MIN, INT32_MIN + 1, 0, 0, 0, 0, 0, 0], np.int32)
    b = np.array([2, 3, -3, 1, 1, 1, 1, 1, 1], np.int32)
    expected = np.array([-(2**30), -715827882, 715827882, 0, 0, 0, 0, 0, 0], np.int32)
    np.testing.assert_array_equal(_compile(DIV, "i32")(a, b), expected)


def test_div_int_min_by_two_matches_reference() -> None:
    a = np.array([INT32_MIN, INT32_MIN, 0, 0, 0, 0, 0, 0, 0], np.int32)
    b = np.array([2, 3, 1, 1, 1, 1, 1, 1, 1], np.int32)
    _check(DIV, "i32", [a, b])


# ---------------------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------------------

CAST = """
func.func @f32_to_i32(%x: tensor<10xf32>) -> tensor<10xi32> {
  %0 = graph.cast %x : tensor<10xf32> -> tensor<10xi32>
  func.return %0 : tensor<10xi32>
}
func.func @f32_to_i64(%x: tensor<10xf32>) -> tensor<10xi64> {
  %0 = graph.cast %x : tensor<10xf32> -> tensor<10xi64>
  func.return %0 : tensor<10xi64>
}
func.func @i32_to_f32(%x: tensor<6xi32>) -> (tensor<6xf32>, tensor<6xf16>) {
  %0 = graph.cast %x : tensor<6xi32> -> tensor<6xf32>
  %1 = graph.cast %x : tensor<6xi32> -> tensor<6xf16>
  func.return %0, %1 : tensor<6xf32>, tensor<6xf16>
}
func.func @to_i1(%x: tensor<7xf32>, %i: tensor<7xi64>) -> (tensor<7xi32>, tensor<7xi32>) {
  %0 = graph.cast %x : tensor<7xf32> -> tensor<7xi1>
  %1 = graph.cast %i : tensor<7xi64> -> tensor<7xi1>
  %2 = graph.cast %0 : tensor<7xi1> -> tensor<7xi32>
  %3 = graph.cast %1 : tensor<7xi1> -> tensor<7xi32>
  func.return %2, %3 : tensor<7xi32>, tensor<7xi32>
}
func.func @from_i1(%a: tensor<4xi32>, %b: tensor<4xi32>, %c: tensor<4xi32>, %d: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>, tensor<4xi64>, tensor<4xf16>) {
  %ma = graph.cast %a : tensor<4xi32> -> tensor<4xi1>
  %mb = graph.cast %b : tensor<4xi32> -> tensor<4xi1>
  %mc = graph.cast %c : tensor<4xi32> -> tensor<4xi1>
  %md = graph.cast %d : tensor<4xi32> -> tensor<4xi1>
  %0 = graph.cast %ma : tensor<4xi1> -> tensor<4xf32>
  %1 = graph.cast %mb : tensor<4xi1> -> tensor<4xi32>
  %2 = graph.cast %mc : tensor<4xi1> -> tensor<4xi64>
  %3 = graph.cast %md : tensor<4xi1> -> tensor<4xf16>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xi32>, tensor<4xi64>, tensor<4xf16>
}
func.func @int_widths(%a: tensor<5xi64>, %b: tensor<5xi32>) -> (tensor<5xi32>, tensor<5xi64>) {
  %0 = graph.cast %a : tensor<5xi64> -> tensor<5xi32>
  %1 = graph.cast %b : tensor<5xi32> -> tensor<5xi64>
  func.return %0, %1 : tensor<5xi32>, tensor<5xi64>
}
func.func @f32_to_f16(%x: tensor<6xf32>) -> (tensor<6xf16>, tensor<6xi32>) {
  %0 = graph.cast %x : tensor<6xf32> -> tensor<6xf16>
  %1 = graph.cast %0 : tensor<6xf16> -> tensor<6xi32>
  func.return %0, %1 : tensor<6xf16>, tensor<6xi32>
}
func.func @i1_round_trip(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = graph.cast %x : tensor<3x4xf32> -> tensor<3x4xi1>
  %1 = graph.cast %0 : tensor<3x4xi1> -> tensor<3x4xi32>
  %2 = graph.cast %1 : tensor<3x4xi32> -> tensor<3x4xf32>
  %3 = graph.add %2, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %3 : tensor<3x4xf32>
}
"""

_TRUNCATED = _f32(-2.7, -2.5, -0.5, -0.0, 0.5, 2.5, 2.7, 1e9, -1e9, 123456.9)


def test_cast_f32_to_i32_truncates() -> None:
    expected = np.array([-2, -2, 0, 0, 0, 2, 2, 1000000000, -1000000000, 123456], np.int32)
    np.testing.assert_array_equal(_compile(CAST, "f32_to_i32")(_TRUNCATED), expected)
    _check(CAST, "f32_to_i32", [_TRUNCATED])


def test_cast_f32_to_i64_truncates() -> None:
    x = _TRUNCATED.copy()
    x[-1] = -3e12
    _check(CAST, "f32_to_i64", [x])


def test_cast_i32_to_float_rounds() -> None:
    x = np.array([16777217, -16777217, 2**31 - 1, INT32_MIN, 65519, 70000], np.int32)
    _check(CAST, "i32_to_f32", [x])


def test_cast_to_i1_is_nonzero() -> None:
    x = _f32(NAN, -0.0, 0.0, 1e-45, -INF, 0.25, -3)
    i = np.array([0, 1, -1, 2**32, INT64_MIN, 0, 3], np.int64)
    f_mask, i_mask = _compile(CAST, "to_i1")(x, i)
    # i1 -> i32 gives 1 for true (zero extension, not sign extension).
    np.testing.assert_array_equal(f_mask, [1, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(i_mask, [0, 1, 1, 1, 1, 0, 1])
    _check(CAST, "to_i1", [x, i])


def test_cast_from_i1_gives_one() -> None:
    masks = [
        np.array(m, np.int32)
        for m in ([5, 0, -1, 0], [0, 7, INT32_MIN, 1], [1, 1, 0, -3], [0, 0, 2, 9])
    ]
    _check(CAST, "from_i1", masks)


def test_cast_integer_widths_wrap_and_sign_extend() -> None:
    a = np.array([2**32 + 5, 2**31, -(2**31) - 1, -1, 123], np.int64)
    b = np.array([-1, INT32_MIN, 2**31 - 1, 0, -5], np.int32)
    _check(CAST, "int_widths", [a, b])


def test_cast_f32_to_f16_rounds_and_overflows() -> None:
    x = _f32(70000.0, -70000.0, 1e-8, 1 + 2**-11, 2049.0, -3.75)
    _check(CAST, "f32_to_f16", [x])


def test_cast_through_i1_and_back() -> None:
    x = np.random.default_rng(5).integers(-1, 2, size=(3, 4)).astype(np.float32)
    _check(CAST, "i1_round_trip", [x])


# ---------------------------------------------------------------------------------------
# NaN, inf and the math functions
# ---------------------------------------------------------------------------------------

SPECIAL = """
func.func @compare_nan(%a: tensor<5xf32>, %b: tensor<5xf32>) -> (tensor<5xi32>, tensor<5xi32>, tensor<5xi32>, tensor<5xi32>) {
  %0 = graph.compare ne, %a, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
  %1 = graph.compare eq, %a, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
  %2 = graph.compare lt, %a, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
  %3 = graph.compare ge, %a, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
  %4 = graph.cast %0 : tensor<5xi1> -> tensor<5xi32>
  %5 = graph.cast %1 : tensor<5xi1> -> tensor<5xi32>
  %6 = graph.cast %2 : tensor<5xi1> -> tensor<5xi32>
  %7 = graph.cast %3 : tensor<5xi1> -> tensor<5xi32>
  func.return %4, %5, %6, %7 : tensor<5xi32>, tensor<5xi32>, tensor<5xi32>, tensor<5xi32>
}
func.func @max_nan(%a: tensor<5xf32>, %b: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %0 = graph.max %a, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %1 = graph.min %b, %a : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %2 = graph.relu %a : tensor<5xf32>
  func.return %0, %1, %2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}
func.func @clip_nan(%x: tensor<40xf32>) -> tensor<40xf32> {
  %lo = graph.constant dense<0.0> : tensor<f32>
  %hi = graph.constant dense<6.0> : tensor<f32>
  %0 = graph.max %x, %lo : (tensor<40xf32>, tensor<f32>) -> tensor<40xf32>
  %1 = graph.min %0, %hi : (tensor<40xf32>, tensor<f32>) -> tensor<40xf32>
  func.return %1 : tensor<40xf32>
}
func.func @sort_asc(%x: tensor<2x7xf32>) -> tensor<2x7xf32> {
  %0 = graph.sort %x axis = 1 : tensor<2x7xf32>
  func.return %0 : tensor<2x7xf32>
}
func.func @sort_desc(%x: tensor<2x7xf32>) -> tensor<2x7xf32> {
  %0 = graph.sort %x axis = -1 descending : tensor<2x7xf32>
  func.return %0 : tensor<2x7xf32>
}
func.func @sort_axis0(%x: tensor<7x2xf32>) -> tensor<7x2xf32> {
  %0 = graph.sort %x axis = 0 descending : tensor<7x2xf32>
  func.return %0 : tensor<7x2xf32>
}
func.func @top_k(%x: tensor<2x7xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>) {
  %0, %1 = graph.top_k %x k = 5 axis = 1 : (tensor<2x7xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
  func.return %0, %1 : tensor<2x5xf32>, tensor<2x5xi64>
}
func.func @top_k_i32(%x: tensor<9xi32>) -> (tensor<4xi32>, tensor<4xi64>) {
  %0, %1 = graph.top_k %x k = 4 axis = 0 : (tensor<9xi32>) -> (tensor<4xi32>, tensor<4xi64>)
  func.return %0, %1 : tensor<4xi32>, tensor<4xi64>
}
func.func @exp_log(%x: tensor<24xf32>) -> (tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>) {
  %0 = graph.exp %x : tensor<24xf32>
  %1 = graph.log %x : tensor<24xf32>
  %2 = graph.sqrt %x : tensor<24xf32>
  %3 = graph.rsqrt %x : tensor<24xf32>
  func.return %0, %1, %2, %3 : tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>
}
func.func @sigmoid_extremes(%x: tensor<24xf32>) -> tensor<24xf32> {
  %0 = graph.sigmoid %x : tensor<24xf32>
  func.return %0 : tensor<24xf32>
}
"""


def test_compare_with_nan() -> None:
    a = _f32(NAN, 1, NAN, 2, -0.0)
    b = _f32(1, NAN, NAN, 2, 0.0)
    ne, eq, lt, ge = _compile(SPECIAL, "compare_nan")(a, b)
    np.testing.assert_array_equal(ne, [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(eq, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(lt, [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(ge, [0, 0, 0, 1, 1])
    _check(SPECIAL, "compare_nan", [a, b])


def test_max_min_relu_with_nan() -> None:
    a = _f32(NAN, 1, NAN, -2, 3)
    b = _f32(1, NAN, NAN, -1, -INF)
    _check(SPECIAL, "max_nan", [a, b])


def test_clip_by_constants_propagates_nan() -> None:
    # Max and min carry `nsz`: against a constant bound, the NaN must still come through
    # (vector lanes and the scalar tail alike).
    x = np.linspace(-3, 9, 40).astype(np.float32)
    x[[0, 7, 16, 33, 39]] = NAN
    got = _compile(SPECIAL, "clip_nan")(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    _check(SPECIAL, "clip_nan", [x])


_WITH_NAN = _f32(3, NAN, -1, 3, -INF, 0.5, NAN, 2, 2, NAN, -0.0, INF, 0.0, 2).reshape(2, 7)


def test_sort_ascending_nan_last() -> None:
    _check(SPECIAL, "sort_asc", [_WITH_NAN])


def test_sort_descending_nan_first() -> None:
    _check(SPECIAL, "sort_desc", [_WITH_NAN])


def test_sort_descending_leading_axis() -> None:
    _check(SPECIAL, "sort_axis0", [_WITH_NAN.T.copy()])


def test_top_k_ties_lower_index_first_nan_after_numbers() -> None:
    values, indices = _compile(SPECIAL, "top_k")(_WITH_NAN)
    # Row 0: 3 (0), 3 (3), 0.5 (5), -1 (2), -inf (4), both NaN left out; row 1: inf (4),
    # 2 (0), 2 (1), 2 (6), then -0.0 (3) before the equal 0.0 (5).
    np.testing.assert_array_equal(indices, [[0, 3, 5, 2, 4], [4, 0, 1, 6, 3]])
    _check(SPECIAL, "top_k", [_WITH_NAN])


def test_top_k_ties_with_nan_kept_when_k_exceeds_numbers() -> None:
    x = _f32(NAN, 1, NAN, 1, NAN, NAN, 0, NAN, 5, NAN, NAN, NAN, NAN, NAN).reshape(2, 7)
    _check(SPECIAL, "top_k", [x])


def test_top_k_int32_ties() -> None:
    x = np.array([4, -1, 4, 7, INT32_MIN, 7, 2**31 - 1, 4, 0], np.int32)
    _check(SPECIAL, "top_k_i32", [x])


_EXP_LOG = _f32(
    100, 89, 88.7, 88.72, -200, -104, -87.5, INF, -INF, NAN, 0.0, -0.0,
    -1, -1e-30, 1e-45, 1e-38, 1e-30, 1, 2.5, 3.4e38, -3.4e38, 1e10, 0.5, 20,
)  # fmt: skip


def test_exp_overflow_log_sqrt_of_zero_and_negatives() -> None:
    exp, log, _, rsqrt = _compile(SPECIAL, "exp_log")(_EXP_LOG)
    assert np.isposinf(exp[[0, 1, 7]]).all() and (exp[[4, 8]] == 0).all()
    assert np.isneginf(log[[10, 11]]).all() and np.isnan(log[[12, 13]]).all()
    assert np.isposinf(rsqrt[10]) and np.isneginf(rsqrt[11])
    _check(SPECIAL, "exp_log", [_EXP_LOG])


def test_sigmoid_extremes() -> None:
    _check(SPECIAL, "sigmoid_extremes", [_EXP_LOG])


GRID_SIZE = 100_000
APPROX = f"""
func.func @tanh(%x: tensor<{GRID_SIZE + 16}xf32>) -> tensor<{GRID_SIZE + 16}xf32> {{
  %0 = graph.tanh %x : tensor<{GRID_SIZE + 16}xf32>
  func.return %0 : tensor<{GRID_SIZE + 16}xf32>
}}
func.func @erf(%x: tensor<{GRID_SIZE + 16}xf32>) -> tensor<{GRID_SIZE + 16}xf32> {{
  %0 = graph.erf %x : tensor<{GRID_SIZE + 16}xf32>
  func.return %0 : tensor<{GRID_SIZE + 16}xf32>
}}
func.func @exp(%x: tensor<{GRID_SIZE + 16}xf32>) -> tensor<{GRID_SIZE + 16}xf32> {{
  %0 = graph.exp %x : tensor<{GRID_SIZE + 16}xf32>
  func.return %0 : tensor<{GRID_SIZE + 16}xf32>
}}
"""
_SPECIALS = (0.0, -0.0, 1e-30, -1e-30, 1e-38, -1e-40, 1e-45, 0.625, -0.625, 4.0)
_LARGE = (30.0, -30.0, 1e6, -1e6, 3.4e38, -3.4e38)


def _grid() -> np.ndarray:
    dense = np.linspace(-10, 10, GRID_SIZE, dtype=np.float32)
    return np.concatenate([dense, _f32(*_SPECIALS, *_LARGE)])


def _max_error(got: np.ndarray, want: np.ndarray) -> float:
    """Relative error; below 1e-30 (where subnormal inputs lose digits in x * P(x^2)),
    absolute error scaled by 1e30."""
    scale = np.maximum(np.abs(want), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want) / scale))


def test_tanh_approximation_dense_grid() -> None:
    x = _grid()
    got = _compile(APPROX, "tanh")(x)
    assert _max_error(got, np.tanh(x.astype(np.float64))) < 6e-7


def test_tanh_approximation_keeps_sign_of_zero() -> None:
    x = np.zeros(GRID_SIZE + 16, np.float32)
    x[0] = -0.0
    got = _compile(APPROX, "tanh")(x)
    assert np.signbit(got[0]) and not np.signbit(got[1])


def test_tanh_approximation_inf_nan() -> None:
    """Exactly +-1 from |x| = 9 on (the saturation select), NaN kept."""
    x = np.zeros(GRID_SIZE + 16, np.float32)
    x[:9] = _f32(INF, -INF, NAN, 9, -9, 9.5, -30, 3e38, -3e38)
    got = _compile(APPROX, "tanh")(x)
    np.testing.assert_array_equal(got[:9], _f32(1, -1, NAN, 1, -1, 1, -1, 1, -1))


def test_erf_approximation_dense_grid() -> None:
    x = _grid()
    got = _compile(APPROX, "erf")(x)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert _max_error(got, want) < 2e-6


def test_erf_approximation_keeps_sign_of_zero() -> None:
    x = np.zeros(GRID_SIZE + 16, np.float32)
    x[0] = -0.0
    got = _compile(APPROX, "erf")(x)
    assert np.signbit(got[0]) and not np.signbit(got[1])


def test_erf_approximation_inf_nan() -> None:
    x = np.zeros(GRID_SIZE + 16, np.float32)
    x[:3] = _f32(INF, -INF, NAN)
    got = _compile(APPROX, "erf")(x)
    np.testing.assert_array_equal(got[:3], _f32(1, -1, NAN))


def test_exp_approximation_dense_grid() -> None:
    """Over the whole range where exp(x) is a normal f32 (but the flushed bottom 0.35):
    within 2 ulp of float64 exp; at the rounding trick's boundaries (n = -125, 0, 128) too."""
    x = np.concatenate(
        [
            np.linspace(-86.98, 88.72, GRID_SIZE, dtype=np.float32),
            _f32(*(0.3466 * k for k in range(-8, 8))),
        ]
    )
    got = _compile(APPROX, "exp")(x)
    assert _max_error(got, np.exp(x.astype(np.float64))) < 2e-7


def test_exp_approximation_ends() -> None:
    x = np.zeros(GRID_SIZE + 16, np.float32)
    # Either side of the clamp at 89 (n = 128 up to 89.07) overflows in the scaling; at
    # and below the clamp at -126 ln2 = -87.3365 (n = -126) the scale and the result are 0.
    ends = _f32(INF, -INF, NAN, 88.73, 1e30, -87.0, -1e30, 0.0, -0.0, 88.9, 89.0, 89.1, 3e38)
    low = _f32(-86.99, -87.3365478515625, -87.3365, -87.34, -87.5, -88.0, -100.0, -3.4e38)
    x[: len(ends) + len(low)] = np.concatenate([ends, low])
    got = _compile(APPROX, "exp")(x)
    want = _f32(INF, 0, NAN, INF, INF, 0, 0, 1, 1, INF, INF, INF, INF)
    np.testing.assert_array_equal(got[: len(ends)], want)
    np.testing.assert_array_equal(got[len(ends) : len(ends) + len(low)], np.zeros_like(low))
    # The lowest results kept are normal and accurate: n = -125 just above -125.5 ln2.
    top = _f32(-86.98, -86.9)
    x[: len(top)] = top
    got = _compile(APPROX, "exp")(x)
    assert _max_error(got[: len(top)], np.exp(top.astype(np.float64))) < 2.4e-7


SOFTMAX_ROWS = """
func.func @softmax(%x: tensor<6x37xf32>) -> tensor<6x37xf32> {
  %0 = graph.softmax %x axis = -1 : tensor<6x37xf32>
  func.return %0 : tensor<6x37xf32>
}
"""


def test_softmax_extreme_rows() -> None:
    """Softmax's exp runs without the clamp at 89 (its argument x - max(x) is at most 0):
    rows of huge values, spreads beyond exp's range, -inf masks, an all -inf row (NaN, as
    NumPy) and a NaN, each against NumPy."""
    x = np.random.default_rng(5).uniform(-3, 3, (6, 37)).astype(np.float32)
    x[0] += 3e38 / 2
    x[1, ::2] = -1e30
    x[2, 5:] = -INF
    x[3] = -INF
    x[4, 7] = NAN
    x[5] *= 1000
    got = _compile(SOFTMAX_ROWS, "softmax")(x)
    with np.errstate(invalid="ignore"):
        shifted = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        want = shifted / shifted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    assert (got[2, 5:] == 0).all()


# ---------------------------------------------------------------------------------------
# function structure
# ---------------------------------------------------------------------------------------

STRUCTURE = """
func.func @identity(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  func.return %x : tensor<3x5xf32>
}
func.func @same_twice(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>) {
  %0 = graph.exp %x : tensor<3x5xf32>
  func.return %0, %0 : tensor<3x5xf32>, tensor<3x5xf32>
}
func.func @argument_between(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>) {
  %0 = graph.neg %x : tensor<3x5xf32>
  func.return %x, %0, %x : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
}
func.func @shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>) {
  %0 = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.relu %0 : tensor<4x8xf32>
  %2 = graph.reduce_sum %1 axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %3 = graph.reduce_max %1 axes = [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
  %4 = graph.reduce_min %1 axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  func.return %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>
}
func.func @one_kernel(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4xf32>) {
  %0, %1, %2, %3, %4, %5 = graph.fused "fused_add_relu_reductions"(%x, %b) kind = reduction : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %s = graph.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : tensor<4x8xf32>
    %t = graph.reduce_sum %r axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %m = graph.reduce_max %r axes = [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
    %n = graph.reduce_min %s axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %e = graph.exp %s : tensor<4x8xf32>
    graph.yield %r, %t, %m, %n, %e, %t : tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4xf32>, tensor<1x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4xf32>
}
"""


def test_function_returns_its_argument() -> None:
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    got = _compile(STRUCTURE, "identity")(x)
    np.testing.assert_array_equal(got, x)
    assert not np.shares_memory(got, x)


def test_function_returns_one_value_twice() -> None:
    first, second = _compile(STRUCTURE, "same_twice")(np.ones((3, 5), np.float32))
    assert not np.shares_memory(first, second)
    _check(STRUCTURE, "same_twice")


def test_function_returns_argument_around_computed_value() -> None:
    _check(STRUCTURE, "argument_between")


def test_function_results_of_different_shapes() -> None:
    _check(STRUCTURE, "shapes")


def test_kernel_with_results_of_different_shapes() -> None:
    """A hand-fused kernel yielding six results of four shapes (one value twice)."""
    assert _compile(STRUCTURE, "one_kernel").kernel_count == 1
    _check(STRUCTURE, "one_kernel")


# ---------------------------------------------------------------------------------------
# odd sizes
# ---------------------------------------------------------------------------------------

ODD = """
func.func @broadcast_1x17x3(%x: tensor<1x17x3xf32>, %y: tensor<17x1xf32>) -> (tensor<1x17x3xf32>, tensor<1x3xf32>) {
  %0 = graph.mul %x, %y : (tensor<1x17x3xf32>, tensor<17x1xf32>) -> tensor<1x17x3xf32>
  %1 = graph.sigmoid %0 : tensor<1x17x3xf32>
  %2 = graph.reduce_sum %1 axes = [1] : tensor<1x17x3xf32> -> tensor<1x3xf32>
  func.return %1, %2 : tensor<1x17x3xf32>, tensor<1x3xf32>
}
func.func @softmax_17(%x: tensor<3x17xf32>) -> tensor<3x17xf32> {
  %0 = graph.softmax %x axis = -1 : tensor<3x17xf32>
  func.return %0 : tensor<3x17xf32>
}
func.func @single_element(%x: tensor<1x1xf32>, %y: tensor<1xf32>) -> tensor<1x1xf32> {
  %0 = graph.sub %x, %y : (tensor<1x1xf32>, tensor<1xf32>) -> tensor<1x1xf32>
  %1 = graph.tanh %0 : tensor<1x1xf32>
  func.return %1 : tensor<1x1xf32>
}
func.func @layer_norm_17(%x: tensor<3x17xf32>, %g: tensor<17xf32>, %b: tensor<17xf32>) -> tensor<3x17xf32> {
  %0 = graph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : (tensor<3x17xf32>, tensor<17xf32>, tensor<17xf32>) -> tensor<3x17xf32>
  func.return %0 : tensor<3x17xf32>
}
func.func @pool_17x3(%x: tensor<1x1x17x3xf32>) -> tensor<1x1x9x2xf32> {
  %0 = graph.avg_pool2d %x kernel = [3, 2] strides = [2, 1] padding = [1, 0, 1, 0] : tensor<1x1x17x3xf32> -> tensor<1x1x9x2xf32>
  func.return %0 : tensor<1x1x9x2xf32>
}
"""


def test_odd_sizes_broadcast_and_reduce() -> None:
    _check(ODD, "broadcast_1x17x3")


def test_odd_sizes_softmax_17() -> None:
    _check(ODD, "softmax_17")


def test_odd_sizes_single_element() -> None:
    _check(ODD, "single_element")


def test_odd_sizes_layer_norm_17() -> None:
    _check(ODD, "layer_norm_17")


def test_odd_sizes_pool_17x3() -> None:
    _check(ODD, "pool_17x3")


POWERS = """
func.func @powers(%x: tensor<12xf32>) -> (tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %three = graph.constant dense<3.0> : tensor<f32>
  %four = graph.constant dense<4.0> : tensor<f32>
  %half = graph.constant dense<2.5> : tensor<f32>
  %0 = graph.pow %x, %two : (tensor<12xf32>, tensor<f32>) -> tensor<12xf32>
  %1 = graph.pow %x, %three : (tensor<12xf32>, tensor<f32>) -> tensor<12xf32>
  %2 = graph.pow %x, %four : (tensor<12xf32>, tensor<f32>) -> tensor<12xf32>
  %3 = graph.pow %x, %half : (tensor<12xf32>, tensor<f32>) -> tensor<12xf32>
  func.return %0, %1, %2, %3 : tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>
}
"""


def test_small_constant_powers_are_products() -> None:
    """x^2, x^3 and x^4 by constants become multiplies (no powf left), x^2.5 stays a
    powf; against NumPy on signs, zeros, infinities, NaN and overflow."""
    loops = lower_to(_module(POWERS).clone(), Stage.LOOP)
    assert loops.count("math.powf") == 1
    x = _f32(-2.0, -0.0, 0.0, 1.5, -1.5, INF, -INF, NAN, 1e13, -1e13, 3e-20, 7.0)
    got = _compile(POWERS, "powers")(x)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        for result, exponent in zip(got, (2.0, 3.0, 4.0, 2.5), strict=True):
            want = np.power(x, np.float32(exponent))
            np.testing.assert_allclose(result, want, rtol=3e-7, atol=0)
            np.testing.assert_array_equal(np.signbit(result), np.signbit(want))


def _depthwise_relu(channels: int, size: int, batch: int) -> str:
    x = f"tensor<{batch}x{channels}x{size}x{size}xf32>"
    w = f"tensor<{channels}x1x3x3xf32>"
    return f"""func.func @main(%x: {x}, %w: {w}) -> {x} {{
  %0 = graph.conv2d %x, %w padding = [1, 1, 1, 1] groups = {channels} : ({x}, {w}) -> {x}
  %1 = graph.relu %0 : {x}
  func.return %1 : {x}
}}
"""


@pytest.mark.parametrize(("channels", "size", "batch"), [(24, 14, 1), (40, 7, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_short_rows_vectorise_with_masked_tails(
    channels: int, size: int, batch: int, threads: int
) -> None:
    """scf-predicate-short-loops annotates a depthwise convolution's rows of 14 and 7
    columns for predicated vectorisation (what LLVM makes of that is its business, not
    pinned here), and the results are the reference's."""
    text = _depthwise_relu(channels, size, batch)
    options = CompileOptions(threads=threads, lanes=8)
    upstream = lower_to(parse_text(text, "t"), Stage.UPSTREAM, options)
    assert "predicateEnable = true, width = 8 : i32" in upstream
    compile_and_compare(_module(text), "main", seed=5, options=options)
