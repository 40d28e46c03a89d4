"""dot_general, dot and convolution as graph.matmul and graph.conv2d.

dot_general in any layout becomes one batched matmul: each operand is transposed to
[batch..., free..., contracting...] (lhs) or [batch..., contracting..., free...] (rhs),
its free and contracting dims are flattened, and the [batch..., M, N] product is
reshaped to StableHLO's result order (batch, lhs free, rhs free). A convolution is
transposed to NCHW / OIHW (flax writes NHWC / HWIO) and built by the ONNX front end's Conv,
which handles 1-D, 2-D and deeper windows, dilations and groups; lhs dilation (JAX's
transposed convolution) spreads the input with zeros first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Value, shape_of
from graphfuse.frontend.onnx_nn import conv
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp
from graphfuse.frontend.stablehlo.reading import stablehlo
from graphfuse.frontend.stablehlo.shapes import interior_pad, pad_or_crop
from graphfuse.frontend.stablehlo.table import converts


def _flattened(
    b: HloBuilder, x: Value, batch: Sequence[int], first: Sequence[int], last: Sequence[int]
) -> Value:
    """x as [batch..., prod(first dims), prod(last dims)]."""
    shape = shape_of(x)
    x = b.transpose(x, [*batch, *first, *last])
    rows = math.prod(shape[d] for d in first)
    columns = math.prod(shape[d] for d in last)
    return b.reshape(x, [*(shape[d] for d in batch), rows, columns])


def _dot(
    b: HloBuilder,
    op: HloOp,
    batch: tuple[Sequence[int], Sequence[int]],
    contracting: tuple[Sequence[int], Sequence[int]],
) -> list[Value]:
    lhs, rhs = (b.cast(v, op.result_element()) for v in op.operands)
    used = (set(batch[0]) | set(contracting[0]), set(batch[1]) | set(contracting[1]))
    free_lhs = [d for d in range(len(shape_of(lhs))) if d not in used[0]]
    free_rhs = [d for d in range(len(shape_of(rhs))) if d not in used[1]]
    a = _flattened(b, lhs, batch[0], free_lhs, contracting[0])
    c = _flattened(b, rhs, batch[1], contracting[1], free_rhs)
    product = b.op(graph.MatmulOp, [a, c], rules.matmul_shape(shape_of(a), shape_of(c)))
    return [b.reshape(product, op.result_shape())]


@converts("stablehlo.dot_general")
def _dot_general(b: HloBuilder, op: HloOp) -> list[Value]:
    numbers = stablehlo.DotDimensionNumbers(op.attr("dot_dimension_numbers"))
    batch = (numbers.lhs_batching_dimensions, numbers.rhs_batching_dimensions)
    contracting = (numbers.lhs_contracting_dimensions, numbers.rhs_contracting_dimensions)
    return _dot(b, op, batch, contracting)


@converts("stablehlo.dot")
def _dot_op(b: HloBuilder, op: HloOp) -> list[Value]:
    """Vector or matrix product: lhs's last dim with rhs's first."""
    return _dot(b, op, ([], []), ([len(shape_of(op.operands[0])) - 1], [0]))


def inverse_permutation(perm: Sequence[int]) -> list[int]:
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return inverse


@converts("stablehlo.convolution")
def _convolution(b: HloBuilder, op: HloOp) -> list[Value]:
    numbers = stablehlo.ConvDimensionNumbers(op.attr("dimension_numbers"))
    x, w = (b.cast(v, op.result_element()) for v in op.operands)
    spatial = len(numbers.input_spatial_dimensions)
    _check_convolution(b, op, spatial)
    x = b.transpose(
        x,
        [
            numbers.input_batch_dimension,
            numbers.input_feature_dimension,
            *numbers.input_spatial_dimensions,
        ],
    )
    w = b.transpose(
        w,
        [
            numbers.kernel_output_feature_dimension,
            numbers.kernel_input_feature_dimension,
            *numbers.kernel_spatial_dimensions,
        ],
    )
    lhs_dilation = op.ints("lhs_dilation", [1] * spatial)
    x = interior_pad(b, x, [0, 0, *(d - 1 for d in lhs_dilation)], 0.0)
    padding = op.ints("padding", [0] * 2 * spatial)
    low, high = padding[0::2], padding[1::2]
    # Negative padding crops the input; the rest is the convolution's own padding.
    x = pad_or_crop(b, x, [0, 0, *(min(p, 0) for p in low)], [0, 0, *(min(p, 0) for p in high)])
    attrs = {
        "group": op.int("feature_group_count", 1),
        "strides": op.ints("window_strides", [1] * spatial),
        "dilations": op.ints("rhs_dilation", [1] * spatial),
        "pads": [*(max(p, 0) for p in low), *(max(p, 0) for p in high)],
    }
    (result,) = conv(b, [x, w], attrs)
    out = [
        numbers.output_batch_dimension,
        numbers.output_feature_dimension,
        *numbers.output_spatial_dimensions,
    ]
    return [b.transpose(result, inverse_permutation(out))]


def _check_convolution(b: HloBuilder, op: HloOp, spatial: int) -> None:
    if op.int("batch_group_count", 1) != 1:
        raise b.fail("batch_group_count > 1 is not supported")
    if any(op.ints("window_reversal")):
        raise b.fail("window_reversal is not supported")
    if spatial < 1:
        raise b.fail("a convolution without spatial dimensions is not supported")
