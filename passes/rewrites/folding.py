"""Front-end rewrites that compute new constants: conv-batch-norm folding, constant
folding, and composing transposes. Each is one pattern, guard-first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from graphfuse.dialects import graph
from graphfuse.dialects.graph import elements

Array = NDArray[Any]

FOLD_LIMIT = 1 << 16
"""Constant folding never materialises a result of more elements than this."""


def constant_value(value: SSAValue) -> Array | None:
    """The contents of a value computed by `graph.constant`, else None."""
    if is_constant(value):
        assert isinstance(value, OpResult) and isinstance(value.op, graph.ConstantOp)
        return elements.dense_to_numpy(value.op.value)
    return None


def is_constant(value: SSAValue) -> bool:
    """`value` is computed by `graph.constant`: known without reading its data (a weight
    held as a `dense_resource` handle is read only when its contents are asked for)."""
    return isinstance(value, OpResult) and isinstance(value.op, graph.ConstantOp)


def make_constant(array: Array, tensor_type: TensorType[Attribute]) -> graph.ConstantOp:
    return graph.ConstantOp(elements.numpy_to_dense(array, tensor_type))


def _single_use_producer(value: SSAValue, op_type: type[Operation]) -> Operation | None:
    if not isinstance(value, OpResult) or not isinstance(value.op, op_type):
        return None
    return value.op if value.has_one_use() else None


def channel_bias(bias: Array, output_shape: Sequence[int]) -> Array | None:
    """`bias` as a [C] vector when adding it to an NCHW tensor of `output_shape` adds
    bias[c] to every element of channel c, else None.

    NumPy broadcasting aligns trailing dims, so a bias of C elements is per channel only if
    its C sits on output axis 1 ([C, 1, 1], [1, C, 1, 1]); a [C] vector would broadcast
    along W instead. A one-element bias adds the same number to every channel. Dims beyond
    the output's rank are not looked at here (they change the sum's type, checked apart).
    """
    rank = len(output_shape)
    aligned = (1,) * (rank - bias.ndim) + bias.shape[max(0, bias.ndim - rank) :]
    channels = output_shape[1]
    if any(size != 1 for axis, size in enumerate(aligned) if axis != 1):
        return None
    if aligned[1] not in (1, channels):
        return None
    return np.broadcast_to(bias.reshape(-1), (channels,))


def _conv_and_bias(value: SSAValue) -> tuple[graph.Conv2dOp, Array | None] | None:
    """`value` is conv2d(x, W) or conv2d(x, W) + b with W, b constant and b per output
    channel (see `channel_bias`); each used once. The sum must have the conv's type: a
    bias that broadcasts the sum to a larger shape cannot be folded into the conv."""
    if (conv := _single_use_producer(value, graph.Conv2dOp)) is not None:
        assert isinstance(conv, graph.Conv2dOp)
        return conv, None
    add = _single_use_producer(value, graph.AddOp)
    if add is None:
        return None
    conv = _single_use_producer(add.operands[0], graph.Conv2dOp)
    bias = constant_value(add.operands[1])
    if conv is None or bias is None or add.results[0].type != conv.results[0].type:
        return None
    assert isinstance(conv, graph.Conv2dOp)
    per_channel = channel_bias(bias, graph.tensor_type_of(conv.result).get_shape())
    return None if per_channel is None else (conv, per_channel)


class FoldConvBatchNorm(RewritePattern):
    """batch_norm(conv2d(x, W) [+ b]) with constant W, b, gamma, beta, mean, var
    -> conv2d(x, W') + b', where k = gamma / sqrt(var + eps), W' = W * k per output
    channel and b' = (b - mean) * k + beta."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BatchNormOp, rewriter: PatternRewriter) -> None:
        params = [constant_value(v) for v in op.operands[1:]]
        found = _conv_and_bias(op.input)
        if found is None or any(p is None for p in params):
            return
        conv, bias = found
        weight = constant_value(conv.weight)
        if weight is None:
            return
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
        k = gamma / np.sqrt(var + op.epsilon.value.data)
        new_weight = weight.astype(np.float64) * k.reshape(-1, 1, 1, 1)
        new_bias = ((0.0 if bias is None else bias.astype(np.float64)) - mean) * k + beta
        result_type = graph.tensor_type_of(op.result)
        rank = len(result_type.get_shape())
        bias_shape = (1, k.size) + (1,) * (rank - 2)
        element = result_type.get_element_type()
        weight_op = make_constant(new_weight, graph.tensor_type_of(conv.weight))
        bias_op = make_constant(new_bias, TensorType(element, bias_shape))
        new_conv = conv.clone()
        new_conv.operands = [conv.input, weight_op.result]
        add = graph.AddOp(new_conv.result, bias_op.result)
        base = op.result.name_hint or "bn"
        weight_op.result.name_hint, bias_op.result.name_hint = f"{base}_weight", f"{base}_bias"
        add.result.name_hint = op.result.name_hint
        rewriter.replace(op, [weight_op, new_conv, bias_op, add], [add.result])


class FoldConstants(RewritePattern):
    """A graph op whose operands are all constants -> one constant of its result.

    Skips results larger than FOLD_LIMIT elements or larger than every operand (folding a
    broadcast would only bloat the IR), ops without a NumPy definition, and opaque ops.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() != "graph" or not op.operands or len(op.results) != 1:
            return
        if isinstance(op, graph.ConstantOp | graph.FusedOp | graph.ExternalOp):
            return
        if not all(is_constant(v) for v in op.operands):
            return
        result_type = graph.tensor_type_of(op.results[0])
        size = _elements(result_type.get_shape())
        largest = max(_elements(graph.tensor_type_of(v).get_shape()) for v in op.operands)
        if size > FOLD_LIMIT or size > largest:
            return
        arrays = [constant_value(v) for v in op.operands]
        # Imported here: the interpreter pulls in xDSL's interpreter framework, which a
        # module with nothing to fold (and `graphfuse --help`) need not load.
        from graphfuse.dialects.graph.interpreter import evaluate

        results = evaluate(op, [a for a in arrays if a is not None])
        if results is None:
            return
        rewriter.replace(op, make_constant(results[0], result_type))


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


class ComposeTransposes(RewritePattern):
    """transpose(transpose(x, p), q) -> transpose(x, p[q]), or x when that is the identity."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, graph.TransposeOp):
            return
        first, second = inner.perm.get_values(), op.perm.get_values()
        composed = [first[i] for i in second]
        if composed == list(range(len(composed))):
            rewriter.replace(op, [], [inner.input])
            return
        rewriter.replace(op, graph.TransposeOp(inner.input, composed))
