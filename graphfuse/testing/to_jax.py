"""A graph-dialect function as a jitted JAX function: the XLA (CPU) side of bench_cpu.py.

Each graph op maps to the jax.numpy / jax.lax call with the semantics of its NumPy definition in
graphfuse.dialects.graph.interpreter, so XLA compiles the same computation graphfuse does and
makes its own fusion and kernel choices. Constants (a model's weights) become arguments of the
jitted function, bound once: XLA sees them as parameters, as a JAX model's weights are, instead
of folding 100 MB of literals into the executable."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)  # i64 ids and masks keep their type, as in ONNX

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from xdsl.dialects import func  # noqa: E402

from graphfuse.dialects import graph  # noqa: E402
from graphfuse.dialects.graph import interpreter as reference  # noqa: E402
from graphfuse.dialects.graph import shape_rules as rules  # noqa: E402

Array = Any


def _sigmoid(x: Array) -> Array:
    return jax.nn.sigmoid(x)


def _gelu(op: Any, x: Array) -> Array:
    if op.approximate.data == graph.GeluApproximation.TANH:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1 + jnp.tanh(inner))
    return 0.5 * x * (1 + lax.erf(x / math.sqrt(2)))


def _layer_norm(op: Any, a: Sequence[Array]) -> Array:
    x, scale, bias = a
    axes = tuple(range(_axis(op), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) * lax.rsqrt(var + op.epsilon.value.data) * scale + bias


def _batch_norm(op: Any, a: Sequence[Array]) -> Array:
    x, scale, bias, mean, var = a
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale.reshape(shape) * lax.rsqrt(var.reshape(shape) + op.epsilon.value.data)
    return (x - mean.reshape(shape)) * inv + bias.reshape(shape)


def _conv2d(op: Any, a: Sequence[Array]) -> Array:
    p = op.padding.get_values()
    return lax.conv_general_dilated(
        a[0],
        a[1],
        window_strides=tuple(op.strides.get_values()),
        padding=((p[0], p[2]), (p[1], p[3])),
        rhs_dilation=tuple(op.dilations.get_values()),
        feature_group_count=op.groups.value.data,
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )


def _pool(op: Any, x: Array, init: Any, combine: Any) -> Array:
    kh, kw = op.kernel.get_values()
    sh, sw = op.strides.get_values()
    p = op.padding.get_values()
    pads = ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3]))
    return lax.reduce_window(x, init, combine, (1, 1, kh, kw), (1, 1, sh, sw), pads)


def _max_pool(op: Any, a: Sequence[Array]) -> Array:
    return _pool(op, a[0], -jnp.inf, lax.max)


def _avg_pool(op: Any, a: Sequence[Array]) -> Array:
    kh, kw = op.kernel.get_values()
    sums = _pool(op, a[0], 0.0, lax.add)
    if op.count_include_pad is not None:
        return sums / (kh * kw)
    return sums / _pool(op, jnp.ones_like(a[0]), 0.0, lax.add)


def _gather(op: Any, a: Sequence[Array]) -> Array:
    data, indices = a
    axis = rules.normalize_axis(op.axis.value.data, data.ndim)
    dim = data.shape[axis]
    wrapped = jnp.where(indices < 0, indices + dim, indices)
    return jnp.take(data, jnp.clip(wrapped, 0, dim - 1), axis=axis)


def _slice(op: Any, a: Sequence[Array]) -> Array:
    starts, strides = op.starts.get_values(), op.strides.get_values()
    sizes = graph.tensor_type_of(op.result).get_shape()
    limits = [
        s + (n - 1) * st + 1 if n else s for s, n, st in zip(starts, sizes, strides, strict=True)
    ]
    return lax.slice(a[0], tuple(starts), tuple(limits), tuple(strides))


def _cast(op: Any, a: Sequence[Array]) -> Array:
    dtype = reference.numpy_dtype(graph.tensor_type_of(op.result).get_element_type())
    x = a[0]
    if dtype == np.bool_:
        return x != 0
    if jnp.issubdtype(dtype, jnp.integer) and jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.trunc(x).astype(dtype)
    return x.astype(dtype)


def _divide(a: Array, b: Array) -> Array:
    if jnp.issubdtype(a.dtype, jnp.floating):
        return a / b
    return lax.div(a, jnp.where(b == 0, 1, b))  # truncates toward zero, as arith.divsi


def _axis(op: Any) -> int:
    return rules.normalize_axis(op.axis.value.data, len(op.input.type.get_shape()))


def _reduce(fn: Callable[..., Array]) -> Callable[[Any, Sequence[Array]], Array]:
    def run(op: Any, a: Sequence[Array]) -> Array:
        axes = rules.normalize_axes(op.axes.get_values(), a[0].ndim)
        return fn(a[0], axis=axes, keepdims=op.keepdims is not None)

    return run


_UNARY: dict[type, Callable[[Array], Array]] = {
    graph.NegOp: jnp.negative,
    graph.AbsOp: jnp.abs,
    graph.ReluOp: lambda x: jnp.maximum(x, 0),
    graph.ExpOp: jnp.exp,
    graph.LogOp: jnp.log,
    graph.SqrtOp: jnp.sqrt,
    graph.RsqrtOp: lax.rsqrt,
    graph.TanhOp: jnp.tanh,
    graph.SigmoidOp: _sigmoid,
    graph.ErfOp: lax.erf,
    graph.SiluOp: lambda x: x * _sigmoid(x),
}

_BINARY: dict[type, Callable[[Array, Array], Array]] = {
    graph.AddOp: jnp.add,
    graph.SubOp: jnp.subtract,
    graph.MulOp: jnp.multiply,
    graph.DivOp: _divide,
    graph.MaxOp: jnp.maximum,
    graph.MinOp: jnp.minimum,
    graph.PowOp: jnp.power,
    graph.MatmulOp: jnp.matmul,
}

_COMPARISONS: dict[graph.ComparePredicate, Callable[[Array, Array], Array]] = {
    graph.ComparePredicate.EQ: jnp.equal,
    graph.ComparePredicate.NE: jnp.not_equal,
    graph.ComparePredicate.LT: jnp.less,
    graph.ComparePredicate.LE: jnp.less_equal,
    graph.ComparePredicate.GT: jnp.greater,
    graph.ComparePredicate.GE: jnp.greater_equal,
}

_WITH_PARAMS: dict[type, Callable[[Any, Sequence[Array]], Array]] = {
    graph.CastOp: _cast,
    graph.CompareOp: lambda op, a: _COMPARISONS[op.predicate.data](*a),
    graph.SelectOp: lambda op, a: jnp.where(*a),
    graph.BroadcastToOp: lambda op, a: jnp.broadcast_to(
        a[0], graph.tensor_type_of(op.result).get_shape()
    ),
    graph.ReshapeOp: lambda op, a: a[0].reshape(graph.tensor_type_of(op.result).get_shape()),
    graph.TransposeOp: lambda op, a: jnp.transpose(a[0], op.perm.get_values()),
    graph.SliceOp: _slice,
    graph.ConcatOp: lambda op, a: jnp.concatenate(
        a, axis=rules.normalize_axis(op.axis.value.data, a[0].ndim)
    ),
    graph.GatherOp: _gather,
    graph.PadOp: lambda op, a: jnp.pad(
        a[0],
        tuple(zip(op.low.get_values(), op.high.get_values(), strict=False)),
        constant_values=op.value.value.data,
    ),
    graph.ReduceSumOp: _reduce(jnp.sum),
    graph.ReduceMaxOp: _reduce(jnp.max),
    graph.ReduceMinOp: _reduce(jnp.min),
    graph.ReduceMeanOp: _reduce(jnp.mean),
    graph.Conv2dOp: _conv2d,
    graph.MaxPool2dOp: _max_pool,
    graph.AvgPool2dOp: _avg_pool,
    graph.SoftmaxOp: lambda op, a: jax.nn.softmax(a[0], axis=_axis(op)),
    graph.LogSoftmaxOp: lambda op, a: jax.nn.log_softmax(a[0], axis=_axis(op)),
    graph.GeluOp: lambda op, a: _gelu(op, a[0]),
    graph.LayerNormOp: _layer_norm,
    graph.BatchNormOp: _batch_norm,
}


def _semantics(op: Any) -> Callable[[Sequence[Array]], Array]:
    kind = type(op)
    if kind in _UNARY:
        return lambda a: _UNARY[kind](a[0])
    if kind in _BINARY:
        return lambda a: _BINARY[kind](a[0], a[1])
    if kind in _WITH_PARAMS:
        return lambda a: _WITH_PARAMS[kind](op, a)
    raise NotImplementedError(f"{op.name}: no JAX translation")


def to_jax(function: func.FuncOp) -> Callable[..., tuple[Any, ...]]:
    """`function` (graph dialect, unfused) as a jitted JAX function of its arguments.

    The result takes the function's arguments as NumPy arrays and returns a tuple of JAX
    arrays (call `.block_until_ready()` on them when timing).
    """
    block = function.body.block
    constants = [op for op in block.ops if isinstance(op, graph.ConstantOp)]
    computing = [
        (op, _semantics(op))
        for op in block.ops
        if op.dialect_name() == "graph" and not isinstance(op, graph.ConstantOp)
    ]
    returned = block.last_op
    assert returned is not None

    def body(weights: Sequence[Array], *arrays: Array) -> tuple[Array, ...]:
        values: dict[Any, Array] = dict(zip(block.args, arrays, strict=True))
        values.update(zip((c.result for c in constants), weights, strict=True))
        for op, semantics in computing:
            values[op.results[0]] = semantics([values[v] for v in op.operands])
        return tuple(values[v] for v in returned.operands)

    jitted = jax.jit(body)
    weights = [jnp.asarray(reference.dense_to_numpy(c.value)) for c in constants]
    return lambda *arrays: jitted(weights, *arrays)
