"""Shape inference rules shared by the graph dialect's verifiers and its users.

Each rule takes static shapes and op parameters and returns the result shape the op must
have, or raises `VerifyException` saying which rule failed with expected and actual values.
The verifiers compare these shapes with the declared result types; the reference interpreter,
builders and later passes call the same functions, so there is one definition of every shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

Shape = tuple[int, ...]


DYNAMIC_DIMENSIONS = "dynamic dimensions are not supported yet"
"""What every diagnostic about a `?` dimension ends with: the shape rules compute with sizes."""


def format_shape(shape: Sequence[int]) -> str:
    """Print a shape as MLIR does inside a tensor type: `4x8`, `?x8` (xDSL holds a dynamic
    dimension as a negative size), or `scalar` for rank 0."""
    return "x".join("?" if d < 0 else str(d) for d in shape) if shape else "scalar"


def check_static(typ: TensorType[Attribute], what: str) -> None:
    """`typ` has no dynamic dimension; `what` names the value (`operand #1`). Checked
    before any shape rule, which would otherwise compute with the placeholder size."""
    for dim, size in enumerate(typ.get_shape()):
        if size < 0:
            raise VerifyException(
                f"{what} has a dynamic dimension (#{dim} of {typ}): {DYNAMIC_DIMENSIONS}"
            )


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into [0, rank), as NumPy and ONNX do."""
    if not -rank <= axis < rank:
        raise VerifyException(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Normalise reduction axes; they must be distinct and in range."""
    normalized = tuple(normalize_axis(a, rank) for a in axes)
    if len(set(normalized)) != len(normalized):
        raise VerifyException(f"axes {list(axes)} contain a repeated axis")
    return normalized


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting: align trailing dimensions; each pair is equal or has a 1."""
    rank = max(len(s) for s in shapes)
    result: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            pretty = " and ".join(format_shape(s) for s in shapes)
            sizes = " and ".join(str(d) for d in sorted(dims))
            raise VerifyException(
                f"operand shapes {pretty} are not broadcast-compatible "
                f"(sizes {sizes} meet at result dimension #{i})"
            )
        result.append(dims.pop() if dims else 1)
    return tuple(result)


def check_broadcastable_to(shape: Sequence[int], target: Sequence[int]) -> None:
    """`shape` broadcasts to exactly `target` (NumPy `broadcast_to`)."""
    if len(shape) > len(target) or broadcast_shapes(shape, target) != tuple(target):
        raise VerifyException(
            f"input shape {format_shape(shape)} cannot be broadcast to {format_shape(target)}"
        )


def transpose_shape(shape: Sequence[int], perm: Sequence[int]) -> Shape:
    """Result shape of a transpose; `perm` must be a permutation of the dimensions."""
    if sorted(perm) != list(range(len(shape))):
        raise VerifyException(
            f"perm {list(perm)} is not a permutation of the {len(shape)} input dimensions"
        )
    return tuple(shape[p] for p in perm)


def reshape_check(shape: Sequence[int], target: Sequence[int]) -> None:
    """A reshape keeps the number of elements."""
    if _count(shape) != _count(target):
        raise VerifyException(
            f"reshape from {format_shape(shape)} ({_count(shape)} elements) to "
            f"{format_shape(target)} ({_count(target)} elements) changes the element count"
        )


def reshape_kept_dims(shape: Sequence[int], target: Sequence[int]) -> tuple[int, int]:
    """How many leading and trailing dims a reshape keeps unchanged: the dims between are
    all it regroups (its index map reads the kept ones directly, without div/mod)."""
    head = 0
    while head < min(len(shape), len(target)) and shape[head] == target[head]:
        head += 1
    tail = 0
    while tail < min(len(shape), len(target)) - head and shape[-1 - tail] == target[-1 - tail]:
        tail += 1
    return head, tail


def reduce_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> Shape:
    """Result shape of a reduction over `axes`."""
    reduced = set(normalize_axes(axes, len(shape)))
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


def matmul_shape(lhs: Sequence[int], rhs: Sequence[int]) -> Shape:
    """Batched matmul as NumPy: [..., M, K] x [..., K, N] -> [broadcast(...), M, N]."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise VerifyException(
            f"matmul operands must have rank >= 2, got {format_shape(lhs)} and {format_shape(rhs)}"
        )
    if lhs[-1] != rhs[-2]:
        raise VerifyException(
            f"contraction dimensions differ: lhs {format_shape(lhs)} has K={lhs[-1]}, "
            f"rhs {format_shape(rhs)} has K={rhs[-2]}"
        )
    batch = broadcast_shapes(lhs[:-2], rhs[:-2])
    return (*batch, lhs[-2], rhs[-1])


def window_output_size(
    size: int, kernel: int, stride: int, pad_total: int, dilation: int = 1
) -> int:
    """Output extent of a sliding window (conv, pooling), floor mode."""
    span = dilation * (kernel - 1) + 1
    if size + pad_total < span:
        raise VerifyException(
            f"window of extent {span} does not fit in input extent {size} with padding {pad_total}"
        )
    return (size + pad_total - span) // stride + 1


def check_window_params(
    strides: Sequence[int], padding: Sequence[int], dilations: Sequence[int]
) -> None:
    """Strides and dilations are two positive numbers, padding four non-negative ones."""
    if len(strides) != 2 or min(strides) < 1:
        raise VerifyException(f"strides must be two positive integers, got {list(strides)}")
    if len(dilations) != 2 or min(dilations) < 1:
        raise VerifyException(f"dilations must be two positive integers, got {list(dilations)}")
    if len(padding) != 4 or min(padding) < 0:
        raise VerifyException(
            "padding must be four non-negative integers [top, left, bottom, right], "
            f"got {list(padding)}"
        )


def conv2d_shape(
    x: Sequence[int],
    w: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> Shape:
    """NCHW input, OIHW weight with I = C / groups; padding is [top, left, bottom, right]."""
    if len(x) != 4 or len(w) != 4:
        raise VerifyException(
            f"conv2d expects a rank-4 NCHW input and OIHW weight, got {format_shape(x)} "
            f"and {format_shape(w)}"
        )
    check_window_params(strides, padding, dilations)
    if groups < 1 or x[1] % groups or w[0] % groups:
        raise VerifyException(
            f"groups={groups} must divide input channels {x[1]} and output channels {w[0]}"
        )
    if w[1] * groups != x[1]:
        raise VerifyException(
            f"weight has {w[1]} input channels per group, expected {x[1] // groups} "
            f"(input channels {x[1]} / groups {groups})"
        )
    oh = window_output_size(x[2], w[2], strides[0], padding[0] + padding[2], dilations[0])
    ow = window_output_size(x[3], w[3], strides[1], padding[1] + padding[3], dilations[1])
    return (x[0], w[0], oh, ow)


def pool2d_shape(
    x: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[int],
) -> Shape:
    """NCHW pooling; padding is [top, left, bottom, right] and smaller than the window."""
    if len(x) != 4:
        raise VerifyException(f"pooling expects a rank-4 NCHW input, got {format_shape(x)}")
    if len(kernel) != 2 or min(kernel) < 1:
        raise VerifyException(f"kernel must be two positive integers, got {list(kernel)}")
    check_window_params(strides, padding, (1, 1))
    if max(padding[0], padding[2]) >= kernel[0] or max(padding[1], padding[3]) >= kernel[1]:
        raise VerifyException(
            f"padding {list(padding)} must be smaller than the kernel {list(kernel)}"
        )
    oh = window_output_size(x[2], kernel[0], strides[0], padding[0] + padding[2])
    ow = window_output_size(x[3], kernel[1], strides[1], padding[1] + padding[3])
    return (x[0], x[1], oh, ow)


def slice_shape(
    shape: Sequence[int],
    starts: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
) -> None:
    """A strided slice of `sizes` elements from `starts` stays inside the input."""
    rank = len(shape)
    if len(starts) != rank or len(strides) != rank:
        raise VerifyException(
            f"starts and strides need {rank} entries (the input rank), got "
            f"{len(starts)} and {len(strides)}"
        )
    for i, (dim, start, size, stride) in enumerate(
        zip(shape, starts, sizes, strides, strict=False)
    ):
        if start < 0:
            raise VerifyException(f"dimension #{i}: start {start} is negative")
        if stride < 1:
            raise VerifyException(f"dimension #{i}: stride {stride} is not positive")
        if size > 0 and start + (size - 1) * stride >= dim:
            raise VerifyException(
                f"dimension #{i}: slice of {size} from {start} with stride {stride} "
                f"reads past the input extent {dim}"
            )


def concat_shape(shapes: Sequence[Sequence[int]], axis: int) -> Shape:
    """Concatenation along `axis`; all other dimensions agree."""
    first = shapes[0]
    axis = normalize_axis(axis, len(first))
    for index, shape in enumerate(shapes):
        others_differ = any(
            a != b for i, (a, b) in enumerate(zip(shape, first, strict=False)) if i != axis
        )
        if len(shape) != len(first) or others_differ:
            raise VerifyException(
                f"input #{index} has shape {format_shape(shape)}, expected "
                f"{format_shape(first)} outside axis {axis}"
            )
    total = sum(s[axis] for s in shapes)
    return tuple(total if i == axis else d for i, d in enumerate(first))


def gather_shape(data: Sequence[int], indices: Sequence[int], axis: int) -> Shape:
    """numpy.take along `axis`: data.shape[:axis] + indices.shape + data.shape[axis + 1:].

    Gathered indices are clamped into the axis, so an axis of extent 0 can only be read
    with no indices at all."""
    if not data:
        raise VerifyException("data must have rank at least 1, got a scalar")
    axis = normalize_axis(axis, len(data))
    if data[axis] == 0 and _count(indices) > 0:
        raise VerifyException(
            f"cannot gather {format_shape(indices)} indices from axis {axis} of extent 0 "
            f"(data {format_shape(data)})"
        )
    return (*data[:axis], *indices, *data[axis + 1 :])


def pad_shape(shape: Sequence[int], low: Sequence[int], high: Sequence[int]) -> Shape:
    """Constant padding adds `low[i]` before and `high[i]` after dimension i."""
    if len(low) != len(shape) or len(high) != len(shape):
        raise VerifyException(
            f"low and high need {len(shape)} entries (the input rank), got "
            f"{len(low)} and {len(high)}"
        )
    if min((*low, *high), default=0) < 0:
        raise VerifyException(f"padding must be non-negative, got {list(low)}, {list(high)}")
    return tuple(d + lo + hi for d, lo, hi in zip(shape, low, high, strict=False))


def _count(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count
