"""Op recipes for the ONNX generator: each adds one operator (with its guards) to a builder.

A recipe picks operands from the values built so far and plausible attributes; ONNX's
shape inference (GraphBuilder.node) has the last word, so a recipe returns quietly when its
guess is refused. `RECIPES` weights them: mostly the op types graphfuse imports
(graphfuse/frontend/onnx_ops.py), a small share of others (`UNSUPPORTED`) to exercise the
"unsupported op" path. Guards keep values bounded and defined: exp of a clipped value, log
and sqrt of |x| + 1, division by |x| + 1, so a difference is never rounding of overflow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import GraphBuilder

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs", "Identity")
BINARY = ("Add", "Sub", "Mul", "Max", "Min")
UNSUPPORTED = ("NonZero", "Unique")
"""Ops onnxruntime runs and graphfuse refuses (their output shape depends on values)."""
"""Op types graphfuse has no converter for (checked against CONVERTERS by the tests)."""


def _int(b: GraphBuilder, low: int, high: int) -> int:
    """An integer in [low, high]."""
    return int(b.rng.integers(low, high + 1))


def _flip(b: GraphBuilder, p: float = 0.5) -> bool:
    return bool(b.rng.random() < p)


def _positive(b: GraphBuilder, x: str) -> str | None:
    """|x| + 1: a value safe to divide by, take the log or a fractional power of."""
    absolute = b.node("Abs", [x])
    if absolute is None:
        return None
    one = b.const(np.ones((), F32) if b.values[-1].dtype == F32 else np.ones((), F16))
    added = b.node("Add", [absolute[0].name, one])
    return added[0].name if added else None


# ---- elementwise ------------------------------------------------------------------------


def unary(b: GraphBuilder) -> None:
    x = b.float_value()
    b.node(str(b.rng.choice(UNARY)), [x.name])


def guarded_unary(b: GraphBuilder) -> None:
    """Exp, Log, Sqrt, Reciprocal on inputs where they are finite."""
    x = b.float_value()
    op = str(b.rng.choice(["Exp", "Log", "Sqrt", "Reciprocal"]))
    if op == "Exp":
        clipped = b.node("Clip", [x.name, b.const(-6.0, F32), b.const(6.0, F32)])
        if clipped:
            b.node("Exp", [clipped[0].name])
        return
    safe = _positive(b, x.name)
    if safe is not None:
        b.node(op, [safe])


def unsupported(b: GraphBuilder) -> None:
    x = b.float_value()
    b.node(str(b.rng.choice(UNSUPPORTED)), [x.name])


def broadcast_partner(b: GraphBuilder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`, of every kind: equal, scalar, trailing suffix,
    ones inserted, and two-sided (a 1 of ours meets a size of theirs)."""
    kind = _int(b, 0, 4)
    if kind == 0 or not shape:
        return shape if kind == 0 else ()
    dims = list(shape[_int(b, 0, len(shape)) :]) if kind == 2 else list(shape)
    if kind >= 3:
        dims = [1 if _flip(b, 0.4) else d for d in dims]
    if kind == 4:
        dims = [_int(b, 2, 5) if d == 1 and _flip(b) else d for d in dims]
    if kind == 4 and _flip(b, 0.3):
        dims = [_int(b, 1, 3), *dims]
    return tuple(dims)


def _operand(b: GraphBuilder, dtype: np.dtype[Any], shape: tuple[int, ...]) -> str:
    """A value of `shape`: an existing one when there is, else a constant or an input."""
    found = b.pick(lambda t: t.dtype == dtype and t.shape == shape)
    if found is not None and _flip(b, 0.5):
        return found.name
    if _flip(b, 0.5):
        return b.const(b.rng.standard_normal(shape).astype(dtype))
    return b.input(dtype, shape).name


def binary(b: GraphBuilder) -> None:
    """A broadcasting binary op, either operand order; Div and Pow guarded."""
    x = b.float_value()
    other = _operand(b, F32, broadcast_partner(b, x.shape))
    op = str(b.rng.choice([*BINARY, "Div", "Pow", "Sum"]))
    if op == "Div":
        safe = _positive(b, other)
        if safe is not None:
            b.node("Div", [x.name, safe])
        return
    if op == "Pow":
        base = _positive(b, x.name)
        if base is not None:
            b.node("Pow", [base, b.const(float(b.rng.choice([2.0, 3.0, 0.5, -1.0])), F32)])
        return
    operands = [x.name, other] if _flip(b) else [other, x.name]
    if op == "Sum":
        operands.append(x.name)
    b.node(op, operands)


def compare_select(b: GraphBuilder) -> None:
    """Greater/Less(-OrEqual) into bool, combined by Not/And/Or, then Where."""
    x = b.float_value()
    other = _operand(b, F32, broadcast_partner(b, x.shape))
    op = str(b.rng.choice(["Greater", "Less", "GreaterOrEqual", "LessOrEqual"]))
    condition = b.node(op, [x.name, other])
    if condition is None:
        return
    cond = condition[0].name
    boolean = b.pick(lambda t: t.dtype == BOOL and t.name != cond)
    if boolean is None or _flip(b, 0.2):
        boolean = b.input(BOOL, broadcast_partner(b, condition[0].shape))
    if _flip(b):
        combined = b.node(str(b.rng.choice(["And", "Or"])), [cond, boolean.name])
        cond = combined[0].name if combined else cond
    if _flip(b, 0.3):
        negated = b.node("Not", [cond])
        cond = negated[0].name if negated else cond
    branch = _operand(b, F32, broadcast_partner(b, x.shape))
    b.node("Where", [cond, x.name, branch])


def clip(b: GraphBuilder) -> None:
    x = b.float_value()
    low = b.const(-float(b.rng.uniform(0, 1)), F32) if _flip(b, 0.7) else ""
    high = b.const(float(b.rng.uniform(0, 1)), F32) if _flip(b, 0.7) else ""
    b.node("Clip", [x.name, low, high] if high else [x.name, low])


# ---- normalisations and reductions ------------------------------------------------------


def softmax(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=1)
    axis = _int(b, -x.rank, x.rank - 1)
    b.node("Softmax" if _flip(b, 0.7) else "LogSoftmax", [x.name], axis=axis)


def reduce(b: GraphBuilder) -> None:
    """ReduceSum/Mean/Max/Min over a random subset of axes, axes as input (opset 18) or
    attribute, keepdims either way; sometimes no axes at all."""
    x = b.float_value(min_rank=1)
    op = str(b.rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]))
    axes = [a - x.rank if _flip(b) else a for a in range(x.rank) if _flip(b)]
    attrs: dict[str, Any] = {"keepdims": _int(b, 0, 1)}
    if not axes and _flip(b, 0.2):
        attrs["noop_with_empty_axes"] = 1
    inputs = [x.name]
    if axes and (op == "ReduceSum" or b.opset >= 18):
        inputs.append(b.const(axes, I64))
    elif axes:
        attrs["axes"] = axes
    b.node(op, inputs, **attrs)


def layer_norm(b: GraphBuilder) -> None:
    """LayerNormalization at any axis, with or without bias, with 1 to 3 outputs."""
    x = b.float_value(min_rank=1)
    axis = _int(b, -x.rank, x.rank - 1)
    normalized = x.shape[axis:]
    scale = b.const(b.rng.uniform(0.5, 1.5, normalized).astype(F32))
    inputs = [x.name, scale]
    if _flip(b, 0.7):
        inputs.append(b.const(b.rng.standard_normal(normalized).astype(F32)))
    outputs = 1 if _flip(b, 0.7) else _int(b, 2, 3)
    epsilon = float(b.rng.choice([1e-5, 1e-3]))
    b.node("LayerNormalization", inputs, outputs, axis=axis, epsilon=epsilon)


def batch_norm(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=2, max_rank=4)
    channels = x.shape[1]
    scale, bias, mean = (b.rng.standard_normal(channels).astype(F32) for _ in range(3))
    var = b.rng.uniform(0.5, 2.0, channels).astype(F32)
    inputs = [x.name, *(b.const(a) for a in (scale, bias, mean, var))]
    b.node("BatchNormalization", inputs, epsilon=float(b.rng.choice([1e-5, 1e-3])))


# ---- data movement ----------------------------------------------------------------------


def transpose(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=2) if _flip(b, 0.8) else b.pick(lambda t: t.rank >= 1)
    if x is None:
        return
    if _flip(b, 0.1):
        b.node("Transpose", [x.name])
        return
    b.node("Transpose", [x.name], perm=[int(p) for p in b.rng.permutation(x.rank)])


def reshape(b: GraphBuilder) -> None:
    """Reshape to a random factorisation, with a -1 or a 0 (copy) now and then; Flatten."""
    x = b.float_value(min_rank=1)
    if _flip(b, 0.2):
        b.node("Flatten", [x.name], axis=_int(b, -x.rank, x.rank))
        return
    target = _factorise(b, int(np.prod(x.shape)))
    if _flip(b, 0.3):
        target[_int(b, 0, len(target) - 1)] = -1
    if _flip(b, 0.2) and len(target) <= x.rank:
        target[0] = 0 if target[0] == x.shape[0] else target[0]
    b.node("Reshape", [x.name, b.const(target, I64)])


def _factorise(b: GraphBuilder, size: int) -> list[int]:
    dims: list[int] = []
    rest = size
    for p in (2, 3, 5, 7, 127):
        while rest % p == 0 and _flip(b, 0.6):
            dims.append(p)
            rest //= p
    dims.append(rest)
    merged = [d for d in dims if d != 1 or _flip(b, 0.3)] or [1]
    b.rng.shuffle(merged)
    return [int(d) for d in merged[:5]] if len(merged) <= 5 else [size]


def squeeze_unsqueeze(b: GraphBuilder) -> None:
    x = b.float_value()
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if ones and _flip(b):
        axes = [a - x.rank if _flip(b) else a for a in ones if _flip(b, 0.7)] or ones[:1]
        b.node("Squeeze", [x.name, b.const(axes, I64)] if _flip(b, 0.8) else [x.name])
        return
    rank = x.rank + _int(b, 1, 2)
    axes = sorted({_int(b, -rank, rank - 1) % rank for _ in range(rank - x.rank)})
    if len(axes) == rank - x.rank:
        b.node("Unsqueeze", [x.name, b.const(axes, I64)])


def expand(b: GraphBuilder) -> None:
    x = b.float_value(max_rank=3)
    target = [(_int(b, 2, 5) if d == 1 and _flip(b) else d) for d in x.shape]
    if _flip(b, 0.4):
        target = [_int(b, 1, 3), *target]
    b.node("Expand", [x.name, b.const(target, I64)])


def gather(b: GraphBuilder) -> None:
    """Gather on any axis: constant indices (ranges, repeats, negatives, any rank) or
    indices read from an int64 input holding valid positions."""
    x = b.float_value(min_rank=1)
    axis = _int(b, -x.rank, x.rank - 1)
    size = x.shape[axis]
    index_shape = b.shape(_int(b, 0, 2))
    if _flip(b, 0.25):
        start = _int(b, 0, size - 1)
        indices = b.const(np.arange(start, min(size, start + _int(b, 1, 4)), dtype=I64))
    elif _flip(b, 0.3):
        source = b.input(I64, index_shape, high=size)
        shifted = b.node("Abs", [source.name])
        indices = shifted[0].name if shifted else source.name
    else:
        indices = b.const(b.rng.integers(-size, size, index_shape).astype(I64))
    b.node("Gather", [x.name, indices], axis=axis)


def slice_(b: GraphBuilder) -> None:
    """Slice with negative starts, ends past the end, steps 1 to 3 (rarely negative)."""
    x = b.float_value(min_rank=1)
    axes = sorted({_int(b, 0, x.rank - 1) for _ in range(_int(b, 1, x.rank))})
    starts, ends, steps = [], [], []
    for axis in axes:
        size = x.shape[axis]
        start = _int(b, 0, size - 1)
        starts.append(start - size if _flip(b, 0.3) else start)
        ends.append(int(np.iinfo(np.int64).max) if _flip(b, 0.2) else _int(b, start + 1, size))
        steps.append(-1 if _flip(b, 0.03) else _int(b, 1, 3))
    inputs = [x.name, b.const(starts, I64), b.const(ends, I64), b.const(axes, I64)]
    b.node("Slice", [*inputs, b.const(steps, I64)] if _flip(b, 0.7) else inputs)


def concat(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=1)
    axis = _int(b, -x.rank, x.rank - 1)
    parts = [x.name]
    for _ in range(_int(b, 1, 2)):
        shape = list(x.shape)
        shape[axis] = _int(b, 1, 4)
        parts.append(_operand(b, F32, tuple(shape)))
    b.rng.shuffle(parts)
    b.node("Concat", parts, axis=axis)


def split(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=1)
    axis = _int(b, -x.rank, x.rank - 1)
    size = x.shape[axis]
    if size < 2:
        return
    cut = _int(b, 1, size - 1)
    if b.opset >= 18 and _flip(b, 0.4):
        b.node("Split", [x.name], 2, axis=axis, num_outputs=2)
        return
    b.node("Split", [x.name, b.const([cut, size - cut], I64)], 2, axis=axis)


def pad(b: GraphBuilder) -> None:
    x = b.float_value(min_rank=1, max_rank=4)
    pads = [_int(b, 0, 2) for _ in range(2 * x.rank)]
    b.node("Pad", [x.name, b.const(pads, I64), b.const(float(b.rng.uniform(-1, 1)), F32)])


def dropout_identity(b: GraphBuilder) -> None:
    x = b.float_value()
    b.node("Dropout" if _flip(b) else "Identity", [x.name])


Recipe = Callable[[GraphBuilder], None]


def _other_modules() -> tuple[dict[Recipe, float], ...]:
    """The recipes kept in their own modules, which import this one's helpers."""
    from graphfuse.testing.fuzz.onnx_anchors import ANCHORS
    from graphfuse.testing.fuzz.onnx_attention import ATTENTION_RECIPES
    from graphfuse.testing.fuzz.onnx_dtypes import DTYPE_RECIPES

    return DTYPE_RECIPES, ANCHORS, ATTENTION_RECIPES


def _table() -> tuple[list[Recipe], np.ndarray[Any, Any]]:
    dtypes, anchors, attention = _other_modules()
    table: dict[Recipe, float] = {
        unary: 6, guarded_unary: 4, binary: 10, compare_select: 3, clip: 2, **dtypes,
        softmax: 3, reduce: 4, layer_norm: 2, batch_norm: 1,
        transpose: 3, reshape: 3, squeeze_unsqueeze: 2, expand: 2, gather: 2, slice_: 3,
        concat: 2, split: 1, pad: 1, dropout_identity: 1, unsupported: 0.4, **anchors,
        **attention,
    }  # fmt: skip
    weights = np.array(list(table.values()), dtype=np.float64)
    return list(table), weights / weights.sum()


_TABLE: list[tuple[list[Recipe], np.ndarray[Any, Any]]] = []


def add_random_node(b: GraphBuilder) -> None:
    """Run one recipe, chosen by weight."""
    if not _TABLE:
        _TABLE.append(_table())
    recipes, weights = _TABLE[0]
    recipes[int(b.rng.choice(len(recipes), p=weights))](b)
