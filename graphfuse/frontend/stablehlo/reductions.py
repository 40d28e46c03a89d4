"""stablehlo.reduce and stablehlo.reduce_window as graph reductions and pooling.

A reduction's region must apply one op to its two arguments and return it: add, maximum,
minimum or multiply (and/or on i1) become reduce_sum/max/min/prod; any other body (an
argmax's pair of values and indices, a custom combiner) is refused naming the op. An
initial value other than the body's identity is combined with the result afterwards.

A reduce_window moves the dims its window slides over last, folds the others into two
(N, C) and is built by the ONNX front end's MaxPool / AveragePool (strides, padding and
window dilations; 1-D, 2-D and deeper windows): a max window is a max pool, an add window
an average pool counting padding times the window's size. Base dilation is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Attribute, Operation

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import Value, shape_of
from graphfuse.frontend.onnx_ops import CONVERTERS as ONNX_CONVERTERS
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp, is_known
from graphfuse.frontend.stablehlo.contractions import inverse_permutation
from graphfuse.frontend.stablehlo.reading import (
    arguments_of,
    body_of,
    operands_of,
    ops_of,
    results_of,
)
from graphfuse.frontend.stablehlo.table import converts

_REDUCTIONS: dict[str, type[Operation]] = {
    "stablehlo.add": graph.ReduceSumOp,
    "stablehlo.maximum": graph.ReduceMaxOp,
    "stablehlo.minimum": graph.ReduceMinOp,
    "stablehlo.multiply": graph.ReduceProdOp,
    "stablehlo.or": graph.ReduceMaxOp,  # on i1, through i8
    "stablehlo.and": graph.ReduceMinOp,
}
_COMBINE: dict[str, type[Operation]] = {
    "stablehlo.add": graph.AddOp,
    "stablehlo.maximum": graph.MaxOp,
    "stablehlo.minimum": graph.MinOp,
    "stablehlo.multiply": graph.MulOp,
}


def body_op(b: HloBuilder, op: HloOp) -> str:
    """The name of the one op a reduction's region applies to its two arguments."""
    block = body_of(op.op)
    if block is None:
        raise b.fail("expected one region of one block")
    body, arguments = ops_of(block), arguments_of(block)
    names = " and ".join(inner.name for inner in body[:-1]) or "nothing"
    if len(arguments) != 2 or len(body) != 2 or body[1].name != "stablehlo.return":
        raise b.fail(
            f"a reduction body applying {names} is not supported (only one of add, maximum, "
            "minimum, multiply, and, or)"
        )
    inner = body[0]
    operands, returned = operands_of(inner), operands_of(body[1])
    if (
        inner.name not in _REDUCTIONS
        or len(operands) != 2
        or not all(any(v == a for a in arguments) for v in operands)
        or returned != results_of(inner)
    ):
        raise b.fail(
            f"a reduction body applying {inner.name} is not supported (only one of add, "
            "maximum, minimum, multiply, and, or of the two arguments)"
        )
    return inner.name


def _is_identity(kind: str, init: Value) -> bool:
    """Whether the known `init` leaves `kind`'s result unchanged."""
    if not is_known(init):
        return False
    value = np.asarray(init).reshape(-1)[0]
    dtype = np.asarray(init).dtype
    if kind in ("stablehlo.add", "stablehlo.or"):
        return not value
    if kind in ("stablehlo.multiply", "stablehlo.and"):
        return bool(value == 1)
    lowest, highest = (
        (-np.inf, np.inf) if dtype.kind == "f" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    )
    return bool(value == (lowest if kind == "stablehlo.maximum" else highest))


def _combine(b: HloBuilder, kind: str, result: Value, init: Value) -> Value:
    if _is_identity(kind, init):
        return result
    if kind not in _COMBINE:
        raise b.fail(f"a {kind} reduction of i1 must start from its identity")
    return b.binary(_COMBINE[kind], result, b.elementwise_operand(init))


@converts("stablehlo.reduce")
def _reduce(b: HloBuilder, op: HloOp) -> list[Value]:
    if len(op.operands) != 2:
        count = len(op.operands) // 2
        raise b.fail(
            f"a reduction of {count} operands together (an argmax or argmin) is not supported"
        )
    kind = body_op(b, op)
    x, init = op.operands
    element = op.result_element()
    dims = op.ints("dimensions")
    if not dims:
        return [_combine(b, kind, x, init)]
    if element == IntegerType(1):  # any / all: as the max / min of bytes
        if kind not in ("stablehlo.or", "stablehlo.and", "stablehlo.maximum", "stablehlo.minimum"):
            raise b.fail(f"a {kind} reduction of i1 is not supported")
        as_bytes = b.reduce(_REDUCTIONS[kind], b.cast(x, IntegerType(8)), dims, False)
        return [b.cast(as_bytes, element)]
    if kind in ("stablehlo.or", "stablehlo.and"):
        raise b.fail(f"a {kind} reduction of {element} is not supported (only of i1)")
    result = b.reduce(_REDUCTIONS[kind], x, dims, False)
    return [_combine(b, kind, result, init)]


def _folded(others: Sequence[int]) -> list[int]:
    """The dims a window does not slide over, as the two leading dims of a pooling."""
    if not others:
        return [1, 1]
    if len(others) == 1:
        return [1, others[0]]
    return [math.prod(others[:-1]), others[-1]]


@converts("stablehlo.reduce_window")
def _reduce_window(b: HloBuilder, op: HloOp) -> list[Value]:
    if len(op.operands) != 2:
        raise b.fail(f"a window reduction of {len(op.operands) // 2} operands is not supported")
    kind = body_op(b, op)
    x, init = op.operands
    rank = len(shape_of(x))
    window = op.ints("window_dimensions")
    strides = op.ints("window_strides", [1] * rank)
    dilations = op.ints("window_dilations", [1] * rank)
    padding = op.ints("padding", [0] * 2 * rank)
    if any(d != 1 for d in op.ints("base_dilations", [1] * rank)):
        raise b.fail("base_dilations other than 1 are not supported")
    slid = [
        i
        for i in range(rank)
        if (window[i], strides[i], dilations[i], padding[2 * i], padding[2 * i + 1])
        != (1, 1, 1, 0, 0)
    ]
    element = op.result_element()
    if not slid:
        return [_combine(b, kind, x, init)]
    others = [i for i in range(rank) if i not in slid]
    perm = [*others, *slid]
    shape = shape_of(x)
    moved = b.reshape(
        b.transpose(x, perm), [*_folded([shape[i] for i in others]), *(shape[i] for i in slid)]
    )
    attrs = {
        "kernel_shape": [window[i] for i in slid],
        "strides": [strides[i] for i in slid],
        "dilations": [dilations[i] for i in slid],
        "pads": [*(padding[2 * i] for i in slid), *(padding[2 * i + 1] for i in slid)],
    }
    pooled = _pool(b, kind, moved, attrs, init, element)
    out = op.result_shape()
    pooled = b.reshape(pooled, [*(out[i] for i in others), *(out[i] for i in slid)])
    return [b.transpose(pooled, inverse_permutation(perm))]


def _pool(
    b: HloBuilder,
    kind: str,
    x: Value,
    attrs: dict[str, list[int]],
    init: Value,
    element: Attribute,
) -> Value:
    b.outputs = [b.outputs[0] if b.outputs else ""]
    if kind == "stablehlo.maximum":
        (result,) = ONNX_CONVERTERS["MaxPool"](b, [x], dict(attrs))
        return _combine(b, kind, result, init)
    if kind != "stablehlo.add":
        raise b.fail(f"a window reduction applying {kind} is not supported (only add, maximum)")
    if not _is_identity(kind, init):
        raise b.fail("an add window must start from 0")
    if not np.issubdtype(numpy_dtype(element), np.floating):
        raise b.fail(f"an add window over {element} is not supported (only floats)")
    (mean,) = ONNX_CONVERTERS["AveragePool"](b, [x], {**attrs, "count_include_pad": 1})
    size = np.array(float(math.prod(attrs["kernel_shape"])))
    return b.binary(graph.MulOp, mean, size)
