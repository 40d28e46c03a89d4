"""Shape rules on their own: each returns NumPy's shape or names the broken rule."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import DYNAMIC_INDEX, TensorType, f32
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects.graph import shape_rules as rules


@pytest.mark.parametrize(
    "shapes",
    [((4, 1), (8,)), ((2, 1, 3), (5, 1)), ((), (3, 4)), ((1,), (1, 1, 7)), ((3,), (3,))],
)
def test_broadcast_shapes_matches_numpy(shapes):
    assert rules.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_format_shape_dynamic_dimension():
    """xDSL holds `?` as a negative size; messages print it as MLIR writes it."""
    assert rules.format_shape((DYNAMIC_INDEX, 8)) == "?x8"
    assert rules.format_shape(()) == "scalar"


def test_check_static_names_the_dimension():
    typ = TensorType(f32, (4, DYNAMIC_INDEX))
    with pytest.raises(
        VerifyException,
        match=r"^operand #1 has a dynamic dimension \(#1 of "
        r"tensor<4x\?xf32>\): dynamic dimensions are not supported yet$",
    ):
        rules.check_static(typ, "operand #1")
    rules.check_static(TensorType(f32, (4, 8)), "operand #0")


def test_broadcast_shapes_incompatible():
    with pytest.raises(VerifyException, match="sizes 3 and 4 meet at result dimension #1"):
        rules.broadcast_shapes((2, 3), (4,))


def test_check_broadcastable_to_rejects_shrinking_rank():
    with pytest.raises(VerifyException, match="cannot be broadcast to 4"):
        rules.check_broadcastable_to((3, 4), (4,))


def test_matmul_shape_batched_broadcast():
    a, b = np.zeros((2, 1, 3, 4)), np.zeros((5, 4, 6))
    assert rules.matmul_shape(a.shape, b.shape) == np.matmul(a, b).shape


def test_matmul_shape_contraction_mismatch():
    with pytest.raises(VerifyException, match="K=4, rhs 5x6 has K=5"):
        rules.matmul_shape((3, 4), (5, 6))


@pytest.mark.parametrize(
    ("axes", "keepdims", "expected"),
    [([1], False, (2, 4)), ([-1, 0], True, (1, 3, 1)), ([0, 1, 2], False, ())],
)
def test_reduce_shape(axes, keepdims, expected):
    assert rules.reduce_shape((2, 3, 4), axes, keepdims) == expected


def test_reduce_shape_repeated_axis():
    with pytest.raises(VerifyException, match="repeated axis"):
        rules.reduce_shape((2, 3), [1, -1], False)


def test_conv2d_shape_stride_padding_dilation_groups():
    # (9 + 1 + 1 - (2*(3-1)+1)) // 2 + 1 = 4 along W with dilation 2; 5 along H.
    shape = rules.conv2d_shape((1, 4, 9, 9), (8, 2, 3, 3), (2, 2), (1, 1, 1, 1), (1, 2), 2)
    assert shape == (1, 8, 5, 4)


def test_conv2d_shape_channels_per_group():
    with pytest.raises(VerifyException, match="weight has 4 input channels per group"):
        rules.conv2d_shape((1, 4, 9, 9), (8, 4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 2)


def test_pool2d_shape_and_padding_limit():
    assert rules.pool2d_shape((1, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1)) == (1, 3, 5, 5)
    with pytest.raises(VerifyException, match="smaller than the kernel"):
        rules.pool2d_shape((1, 3, 9, 9), (2, 2), (1, 1), (2, 0, 0, 0))


def test_concat_and_pad_shapes():
    assert rules.concat_shape([(2, 3), (2, 5)], -1) == (2, 8)
    assert rules.pad_shape((2, 3), (1, 0), (2, 4)) == (5, 7)


@pytest.mark.parametrize(
    ("data", "indices", "axis"),
    [((10, 4), (2, 5), 0), ((3, 6, 2), (4,), 1), ((3, 6, 2), (), -1), ((5,), (2, 2, 2), 0)],
)
def test_gather_shape_matches_numpy_take(data, indices, axis):
    expected = np.take(np.zeros(data), np.zeros(indices, np.int64), axis=axis).shape
    assert rules.gather_shape(data, indices, axis) == expected


def test_gather_shape_errors():
    with pytest.raises(VerifyException, match="axis -3 is out of range for rank 2"):
        rules.gather_shape((10, 4), (3,), -3)
    with pytest.raises(VerifyException, match="data must have rank at least 1"):
        rules.gather_shape((), (3,), 0)
    with pytest.raises(VerifyException, match="from axis 1 of extent 0"):
        rules.gather_shape((2, 0), (1,), 1)
    assert rules.gather_shape((2, 0), (0,), 1) == (2, 0)


def test_slice_reads_past_end():
    rules.slice_shape((10,), (1,), (3,), (4,))  # reads 1, 5, 9
    with pytest.raises(VerifyException, match="reads past the input extent 10"):
        rules.slice_shape((10,), (2,), (3,), (4,))  # would read 10


def test_normalize_axis_range():
    assert rules.normalize_axis(-1, 3) == 2
    with pytest.raises(VerifyException, match="axis 3 is out of range for rank 3"):
        rules.normalize_axis(3, 3)
