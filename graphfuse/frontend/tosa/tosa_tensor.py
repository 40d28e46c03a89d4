"""TOSA constants, data movement and reductions as graph-dialect ops.

`tosa.const` and `tosa.const_shape` become NumPy arrays known at import, their data written
inline or, as torch-mlir writes weights, behind a `dense_resource` handle
(graphfuse.resources): shapes, paddings and slice starts are read from them, and reshapes
and transposes of known weights are done in NumPy. The graph dialect has no tile, reverse
or argmax op: tile is a broadcast between two reshapes, reverse a gather of reversed
indices, and argmax the least index holding the maximum (reduce_max, compare, select,
reduce_min), all of which fuse.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    IndexType,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import dense_to_numpy, numpy_dtype
from graphfuse.frontend.onnx_builder import Value, f64_attr, i64_array, i64_attr, shape_of
from graphfuse.frontend.tosa.tosa_builder import TosaOp
from graphfuse.frontend.tosa.tosa_elementwise import Converter
from graphfuse.parsing import GraphfuseError
from graphfuse.resources import resolve


def _const(op: TosaOp) -> list[Value]:
    values = op.attr("values")
    if isinstance(values, DenseResourceAttr):  # torch-mlir's weights, kept by xDSL's parser
        try:
            values = resolve(values, op.op)
        except GraphfuseError as error:
            raise op.fail(str(error)) from None
    if not isa(values, DenseIntOrFPElementsAttr):
        raise op.fail(f"values {type(values).__name__} are not a dense elements attribute")
    typ: TensorType[Attribute] = graph.tensor_type_of(values.get_type())
    element = typ.get_element_type()
    if isinstance(element, IndexType):  # const_shape
        return [np.frombuffer(values.data.data, np.int64).reshape(typ.get_shape()).copy()]
    array = dense_to_numpy(values)
    if isinstance(element, BFloat16Type):  # no NumPy dtype says bf16: a constant now
        return [op.builder.tensor(array, element)]
    return [array]


def _reshape(op: TosaOp) -> list[Value]:
    return [op.builder.reshape(op.operands[0], op.result_shape())]


def _transpose(op: TosaOp) -> list[Value]:
    return [op.builder.known_transpose(op.operands[0], op.ints("perms"))]


def _slice(op: TosaOp) -> list[Value]:
    x = op.operands[0]
    starts = op.known_ints(1, "start")
    if isinstance(x, np.ndarray):
        return [x[tuple(slice(s, s + n) for s, n in zip(starts, op.result_shape(), strict=True))]]
    shape = op.result_shape()
    strides = i64_array([1] * len(shape))
    return [op.builder.op(graph.SliceOp, [x], shape, starts=i64_array(starts), strides=strides)]


def _pad(op: TosaOp) -> list[Value]:
    """padding is [before_0, after_0, before_1, after_1, ...]; pad_const a scalar tensor."""
    x = op.operands[0]
    padding = op.known_ints(1, "padding")
    value = float(op.known(2, "pad_const").reshape(-1)[0]) if len(op.operands) > 2 else 0.0
    low, high = padding[0::2], padding[1::2]
    shape = rules.pad_shape(shape_of(x), low, high)
    return [
        op.builder.op(
            graph.PadOp, [x], shape, low=i64_array(low), high=i64_array(high), value=f64_attr(value)
        )
    ]


def _concat(op: TosaOp) -> list[Value]:
    axis = op.int("axis")
    inputs = [op.builder.tensor(v) for v in op.operands]
    if len(inputs) == 1:
        return [inputs[0]]
    shape = rules.concat_shape([shape_of(v) for v in inputs], axis)
    return [op.builder.op(graph.ConcatOp, inputs, shape, axis=i64_attr(axis))]


def _gather(op: TosaOp) -> list[Value]:
    """values [N, K, C], indices [N, W] -> [N, W, C]: one gather along axis 0 of values
    seen as [N*K, C], each batch's indices offset by n*K."""
    b = op.builder
    values, indices = op.operands[0], op.operands[1]
    n, k, c = shape_of(values)
    offsets = (np.arange(n) * k).reshape(n, 1)
    if isinstance(indices, np.ndarray):
        indices = (indices + offsets).astype(indices.dtype)
    elif n > 1:
        indices = b.binary(graph.AddOp, indices, offsets)
    data = b.reshape(values, [n * k, c])
    shape = rules.gather_shape([n * k, c], shape_of(indices), 0)
    return [b.op(graph.GatherOp, [data, indices], shape, axis=i64_attr(0))]


def _tile(op: TosaOp) -> list[Value]:
    """Each dimension d repeated m times is [m, d] flattened: reshape x to [1, d0, 1, d1,
    ...], broadcast to [m0, d0, m1, d1, ...], reshape to [m0*d0, m1*d1, ...]."""
    b, x = op.builder, op.operands[0]
    multiples = op.known_ints(1, "multiples")
    if isinstance(x, np.ndarray):
        return [np.tile(x, multiples)]
    shape = shape_of(x)
    spread = [size for d in shape for size in (1, d)]
    repeated = [size for m, d in zip(multiples, shape, strict=True) for size in (m, d)]
    broadcast = b.op(graph.BroadcastToOp, [b.reshape(x, spread)], repeated)
    return [b.reshape(broadcast, op.result_shape())]


def _reverse(op: TosaOp) -> list[Value]:
    x = op.operands[0]
    shape = shape_of(x)
    axis = rules.normalize_axis(op.int("axis"), len(shape))
    if isinstance(x, np.ndarray):
        return [np.flip(x, axis).copy()]
    indices = np.arange(shape[axis] - 1, -1, -1, dtype=np.int32)
    return [op.builder.op(graph.GatherOp, [x, indices], shape, axis=i64_attr(axis))]


_REDUCE: dict[str, type[graph.ReduceOp]] = {
    "tosa.reduce_sum": graph.ReduceSumOp,
    "tosa.reduce_max": graph.ReduceMaxOp,
    "tosa.reduce_min": graph.ReduceMinOp,
    "tosa.reduce_product": graph.ReduceProdOp,
}


def _reduce(op: TosaOp) -> list[Value]:
    """TOSA reduces one axis and keeps it as size 1."""
    return [op.builder.reduce(_REDUCE[op.name], op.operands[0], [op.int("axis")], True)]


def _argmax(op: TosaOp) -> list[Value]:
    """The least index along `axis` whose value equals the maximum; the axis is dropped."""
    b, x = op.builder, op.operands[0]
    shape = shape_of(x)
    axis = rules.normalize_axis(op.int("axis"), len(shape))
    element = op.result_element()
    if not isa(element, IntegerType):
        raise op.fail(f"result element type {element} is not an integer")
    dtype = numpy_dtype(element)
    maximum = b.reduce(graph.ReduceMaxOp, x, [axis], True)
    is_max = b.compare("eq", x, maximum)
    positions = np.arange(shape[axis], dtype=dtype).reshape(
        [d if i == axis else 1 for i, d in enumerate(shape)]
    )
    past_end = np.full((1,) * len(shape), shape[axis], dtype=dtype)
    candidates = b.op(graph.SelectOp, [is_max, positions, past_end], shape, element)
    return [b.reduce(graph.ReduceMinOp, candidates, [axis], False)]


CONVERTERS: dict[str, Converter] = {
    "tosa.const": _const,
    "tosa.const_shape": _const,
    "tosa.reshape": _reshape,
    "tosa.transpose": _transpose,
    "tosa.slice": _slice,
    "tosa.pad": _pad,
    "tosa.concat": _concat,
    "tosa.gather": _gather,
    "tosa.tile": _tile,
    "tosa.reverse": _reverse,
    **dict.fromkeys(_REDUCE, _reduce),
    "tosa.argmax": _argmax,
}
