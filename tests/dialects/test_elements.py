"""Dense attributes to and from arrays, and the splat test on bits."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType, f32

from graphfuse.dialects.graph.elements import dense_to_numpy, numpy_to_dense, same_bits


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.0, 0.0], True),
        ([-0.0, -0.0], True),
        ([0.0, -0.0], False),
        ([-0.0, 0.0, 0.0], False),
        ([np.nan, np.nan], True),
        ([1.5], True),
        ([], False),
    ],
)
def test_same_bits_compares_bits_not_values(values: list[float], expected: bool) -> None:
    assert same_bits(np.array(values, np.float32)) == expected


def test_same_bits_of_integers_and_broadcast_views() -> None:
    assert same_bits(np.broadcast_to(np.int64(7), (3, 4)))
    assert not same_bits(np.array([[1, 1], [1, 2]], np.int32))


def test_numpy_to_dense_keeps_zeros_of_both_signs() -> None:
    values = np.array([0.0, -0.0, -0.0], np.float32)
    attr = numpy_to_dense(values, TensorType(f32, [3]))
    np.testing.assert_array_equal(np.signbit(dense_to_numpy(attr)), [False, True, True])
