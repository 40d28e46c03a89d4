"""Operand copies in a layout that makes a kernel's reduction contiguous.

Computing `C[m, n] = sum_k A[m, k] B[k, n]` per output point walks B down a column, and a
direct NCHW convolution summing over (c, kh, kw) walks the input H*W elements apart per
channel and tests padding at every tap: neither vectorises. A kernel therefore first copies
such operands once, in a layout whose innermost dimension is the reduced one (a transposed
matmul right-hand side, an NHWC or row-padded convolution input, OHWI weights; see
`_copies_of`), except where loop-tile-matmul packs the operand its own way. Each copy
costs one pass over the operand, small next to the K- or C*KH*KW-fold reuse. Only kernel
inputs and constants are copied: nothing else in the kernel must run first. A GPU build
lowers with the pass option operand-copies=false and copies nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import Float32Type, MemRefType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import tensor_type_of
from graphfuse.dialects.graph.tiling_threshold import worth_tiling
from graphfuse.dialects.loop.emitter import Index


@dataclass(frozen=True)
class OperandCopy:
    """One operand copied into `layout`; `padding` is (top, left, bottom, right),
    `strides` (rows, columns) those of a subsampled copy."""

    value: SSAValue
    layout: str
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    strides: tuple[int, int] = (1, 1)

    @property
    def source_shape(self) -> tuple[int, ...]:
        return tuple(tensor_type_of(self.value).get_shape())

    @property
    def shape(self) -> tuple[int, ...]:
        s = self.source_shape
        if self.layout == "transposed":
            return (*s[:-2], s[-1], s[-2])
        if self.layout == "nhwc_padded":
            top, left, bottom, right = self.padding
            return (s[0], s[2] + top + bottom, s[3] + left + right, s[1])
        if self.layout == "nchw_padded":
            top, left, bottom, right = self.padding
            return (s[0], s[1], s[2] + top + bottom, s[3] + left + right)
        if self.layout == "nchw_subsampled":
            rows, columns = self.strides
            return (s[0], s[1], -(-s[2] // rows), -(-s[3] // columns))
        assert self.layout == "ohwi"
        return (s[0], s[2], s[3], s[1])

    def buffer_type(self) -> MemRefType[Attribute]:
        return MemRefType(tensor_type_of(self.value).get_element_type(), self.shape)

    def source_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        """Where copy element `index` comes from (for the padded layouts, before removing
        the padding offset: the caller subtracts it and guards; for the subsampled one,
        before scaling by the strides: the caller multiplies)."""
        if self.layout == "transposed":
            return (*index[:-2], index[-1], index[-2])
        if self.layout in ("nchw_padded", "nchw_subsampled"):
            return tuple(index)
        n, h, w, c = index
        if self.layout == "nhwc_padded":
            return (n, c, h, w)
        return (n, c, h, w)  # ohwi: (o, kh, kw, i) -> (o, i, kh, kw)


def _is_input(value: SSAValue) -> bool:
    return isinstance(value, BlockArgument) or isinstance(value.owner, graph.ConstantOp)


def _tiled(op: graph.MatmulOp) -> bool:
    """Whether loop-tile-matmul will compute this matmul (it packs B its own way)."""
    result = tensor_type_of(op.result)
    k = tensor_type_of(op.lhs).get_shape()[-1]
    return isinstance(result.get_element_type(), Float32Type) and worth_tiling(
        math.prod(result.get_shape()), k
    )


def _tiled_conv(op: graph.Conv2dOp) -> bool:
    """Whether loop-tile-matmul will compute this convolution as a GEMM (it packs the
    weights its own way, and only once when they are constants)."""
    result = tensor_type_of(op.result)
    _, group_channels, kh, kw = tensor_type_of(op.weight).get_shape()
    return (
        isinstance(result.get_element_type(), Float32Type)
        and op.groups.value.data == 1
        and worth_tiling(math.prod(result.get_shape()), group_channels * kh * kw)
    )


def _unpadded_1x1(op: graph.Conv2dOp) -> bool:
    kh, kw = tensor_type_of(op.weight).get_shape()[2:]
    return (kh, kw) == (1, 1) and not any(op.padding.get_values())


def _pointwise(op: graph.Conv2dOp) -> bool:
    """A 1x1 convolution with stride 1 and no padding: NCHW is already a GEMM operand
    whose columns (y, x) are contiguous."""
    return _unpadded_1x1(op) and set(op.strides.get_values()) == {1}


def _subsampled(op: graph.Conv2dOp) -> bool:
    """A 1x1 convolution with a stride past 1 and no padding (ResNet's downsampling
    shortcut): it reads one input point in stride x stride, and the points it reads,
    copied out, make it a 1x1 convolution at stride 1 (`_pointwise`)."""
    return _unpadded_1x1(op) and set(op.strides.get_values()) != {1}


def _depthwise(op: graph.Conv2dOp) -> bool:
    return op.groups.value.data > 1 and tensor_type_of(op.weight).get_shape()[1] == 1


def _conv_copies(op: graph.Conv2dOp) -> list[OperandCopy]:
    top, left, bottom, right = op.padding.get_values()
    padded = OperandCopy(op.input, "nhwc_padded", (top, left, bottom, right))
    if _depthwise(op):
        # Unpadded, it reads its input as it is, unchecked (accumulator_rules._conv2d).
        rows = OperandCopy(op.input, "nchw_padded", (top, left, bottom, right))
        return [rows] if _is_input(op.input) and any(op.padding.get_values()) else []
    if not _tiled_conv(op):
        if _is_input(op.input) and _is_input(op.weight):
            return [padded, OperandCopy(op.weight, "ohwi")]
        return []
    if _pointwise(op) or not _is_input(op.input):
        return []
    if _subsampled(op):
        rows, columns = op.strides.get_values()
        return [OperandCopy(op.input, "nchw_subsampled", strides=(rows, columns))]
    return [padded]


def _copies_of(op: Operation) -> list[OperandCopy]:
    """The copies `op` reads:

    - matmul right-hand side `[..., K, N]` -> `[..., N, K]` (transposed), for matmuls that
      loop-tile-matmul does not tile (not f32, or tiny): it packs B into panels itself;
    - conv2d input `[N, C, H, W]` -> `[N, H + pad, W + pad, C]` (NHWC with the zero
      padding written out, so the sum needs no bounds test), except for convolutions
      loop-tile-matmul computes that are 1x1, stride 1, unpadded (NCHW packs as well,
      along rows of x), and 1x1 unpadded ones at a larger stride, whose input is copied
      NCHW with only the points they read, `[N, C, ceil(H / s), ceil(W / s)]`
      (nchw_subsampled: a strided 1x1 convolution 256 -> 512 from 56x56 took 498 us
      from the NHWC copy, the same GEMM at stride 1 on 28x28 421 us);
    - conv2d weight `[O, C/g, KH, KW]` -> `[O, KH, KW, C/g]`, for convolutions
      loop-tile-matmul does not compute (grouped, tiny, not f32). It packs the weights of
      the others from their own layout, once per compiled function when they are
      constants; from a copy made per call it would repack them on every call;
    - a depthwise conv2d's input `[N, C, H, W]` -> `[N, C, H + pad, W + pad]` (the padding
      written out, rows copied as they are): its sum is over the taps alone, so it
      vectorises along the output's columns, which read the input's rows (every other
      element at stride 2, which LLVM loads as an interleaved group). Channels innermost
      would make those reads C apart; the NHWC copy itself, a transposition, cost as much
      as the convolution.
    """
    if isinstance(op, graph.MatmulOp):
        k, n = tuple(tensor_type_of(op.rhs).get_shape())[-2:]
        if _is_input(op.rhs) and k > 1 and n > 1 and not _tiled(op):
            return [OperandCopy(op.rhs, "transposed")]
        return []
    if isinstance(op, graph.Conv2dOp):
        return _conv_copies(op)
    return []


OPERAND_COPIES = True
"""Whether kernels copy operands into reduction-contiguous layouts unless told otherwise
(the default of convert-graph-to-loop's `operand_copies` option): right for a CPU core."""


def operand_copies(fused: graph.FusedOp, enabled: bool) -> list[OperandCopy]:
    """The copies a kernel makes before its loops, once per (operand, layout); none
    unless `enabled` (a GPU kernel reads its operands in their own layout)."""
    copies: list[OperandCopy] = []
    if not enabled:
        return copies
    for op in fused.body.block.ops:
        for copy in _copies_of(op):
            # An empty operand has nothing to reorder (and a loop over 0 is no loop).
            if copy not in copies and 0 not in copy.shape:
                copies.append(copy)
    return copies


def copy_for(
    copies: Sequence[OperandCopy],
    value: SSAValue,
    layout: str,
    padding: tuple[int, ...] = (0, 0, 0, 0),
    strides: tuple[int, ...] = (1, 1),
) -> int | None:
    """The position of the copy of `value` in `layout` (padding, strides), if the kernel
    made one."""
    for position, copy in enumerate(copies):
        same = copy.padding == tuple(padding) and copy.strides == tuple(strides)
        if copy.value is value and copy.layout == layout and same:
            return position
    return None
