"""ONNX recurrent operators (RNN, GRU, LSTM) unrolled over their static sequence length
into graph ops.

Each direction first projects the whole sequence at once, X [seq * batch, input] @ W^T plus
the biases that do not depend on the state; each time step then adds its rows to H @ R^T
and applies the gates' activations, all matmuls, slices and elementwise ops that
graph-fuse groups per step. Known weights are sliced and transposed with NumPy; an absent
initial state is a known zero, so the first step's products with it fold away.

`sequence_lens` must be known at import. Lengths shorter than the sequence are masked: a
batch entry past its length keeps its state and outputs zeros; the reverse direction reads
each entry's valid steps backwards through a gather with known indices, as ONNX and
onnxruntime define it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Array,
    Builder,
    Value,
    element_of,
    element_type_of,
    i64_array,
    i64_attr,
    shape_of,
)
from graphfuse.frontend.onnx_convert import (
    Attrs,
    Inputs,
    converter,
    optional,
    required,
)

Activation = Callable[[Value], Value]

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {
    "RNN": ("Tanh",),
    "GRU": ("Sigmoid", "Tanh"),
    "LSTM": ("Sigmoid", "Tanh", "Tanh"),
}
# Activations with parameters: the default (alpha, beta) of the ONNX op of that name, None
# where unused. Affine and ScaledTanh are no ONNX ops (any more) and have no default:
# onnxruntime takes 0, which makes them constant, so graphfuse asks for the values.
_PARAMETERS: dict[str, tuple[float | None, float | None]] = {
    "affine": (None, None),
    "leakyrelu": (0.01, None),
    "thresholdedrelu": (1.0, None),
    "scaledtanh": (None, None),
    "hardsigmoid": (0.2, 0.5),
    "elu": (1.0, None),
}
_WITHOUT_DEFAULTS = {"affine", "scaledtanh"}
_PLAIN = {"relu", "tanh", "sigmoid", "softsign", "softplus"}


# ---- values known now or computed -----------------------------------------------------------


@dataclass
class _Ops:
    """Graph ops on values that may be known arrays: known operands are computed with NumPy
    here, and a known zero short-cuts a product or a sum."""

    b: Builder
    dtype: np.dtype[Any]

    def const(self, value: float | Array) -> Array:
        return np.asarray(value, self.dtype)

    def zeros(self, shape: Sequence[int]) -> Array:
        return np.zeros(tuple(shape), self.dtype)

    def rows(self, x: Value, axis: int, start: int, size: int) -> Value:
        """x's entries [start, start + size) along `axis`."""
        shape = list(shape_of(x))
        if start == 0 and size == shape[axis]:
            return x
        if not isinstance(x, SSAValue):
            return np.take(x, range(start, start + size), axis=axis)
        starts = [start if i == axis else 0 for i in range(len(shape))]
        shape[axis] = size
        return self.b.op(
            graph.SliceOp,
            [x],
            shape,
            starts=i64_array(starts),
            strides=i64_array([1] * len(shape)),
        )

    def pick(self, x: Value, index: int) -> Value:
        """x[index] (the leading dimension dropped)."""
        part = self.rows(x, 0, index, 1)
        return self.b.reshape(part, shape_of(x)[1:])

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        if not isinstance(x, SSAValue):
            return np.transpose(x, perm)
        return self.b.transpose(x, perm)

    def matmul(self, a: Value, w: Value) -> Value:
        shape = (*shape_of(a)[:-1], shape_of(w)[-1])
        if _is_zero(a) or _is_zero(w):
            return self.zeros(shape)
        if not isinstance(a, SSAValue) and not isinstance(w, SSAValue):
            return np.matmul(a, w).astype(self.dtype)
        return self.b.op(graph.MatmulOp, [a, w], shape)

    def add(self, a: Value, c: Value) -> Value:
        shape = np.broadcast_shapes(shape_of(a), shape_of(c))
        if _is_zero(c) and shape_of(a) == shape:
            return a
        if _is_zero(a) and shape_of(c) == shape:
            return c
        return self._binary(graph.AddOp, np.add, a, c)

    def sub(self, a: Value, c: Value) -> Value:
        return self._binary(graph.SubOp, np.subtract, a, c)

    def mul(self, a: Value, c: Value) -> Value:
        if _is_zero(a) or _is_zero(c):
            return self.zeros(np.broadcast_shapes(shape_of(a), shape_of(c)))
        return self._binary(graph.MulOp, np.multiply, a, c)

    def _binary(self, op_type: type[graph.BinaryOp], fn: Any, a: Value, c: Value) -> Value:
        if not isinstance(a, SSAValue) and not isinstance(c, SSAValue):
            return np.asarray(fn(a, c), self.dtype)
        return self.b.binary(op_type, a, c)

    def concat(self, values: Sequence[Value], axis: int) -> Value:
        if len(values) == 1:
            return values[0]
        shape = list(shape_of(values[0]))
        shape[axis] = sum(shape_of(v)[axis] for v in values)
        return self.b.op(graph.ConcatOp, list(values), shape, axis=i64_attr(axis))

    def select(self, mask: Array, on_true: Value, on_false: Value) -> Value:
        """A known [batch, 1] mask picks rows of on_true or on_false."""
        if mask.all():
            return on_true
        if not mask.any():
            return on_false
        return self.where(mask, on_true, on_false)

    def where(self, condition: Value, on_true: Value, on_false: Value) -> Value:
        shape = np.broadcast_shapes(*(shape_of(v) for v in (condition, on_true, on_false)))
        element = element_type_of(self.dtype, f"node {self.b.node}")
        return self.b.op(graph.SelectOp, [condition, on_true, on_false], shape, element)


def _is_zero(value: Value) -> bool:
    return not isinstance(value, SSAValue) and not np.any(value)


# ---- activations ----------------------------------------------------------------------------


def _activation(ops: _Ops, name: str, alpha: float, beta: float) -> Activation:
    """One of the activations ONNX's recurrent ops name, as graph ops."""
    b = ops.b

    def unary(op_type: type[graph.UnaryOp]) -> Activation:
        return lambda x: b.unary(op_type, x)

    def leaky(x: Value) -> Value:
        return ops.where(b.compare("ge", x, ops.const(0)), x, ops.mul(x, ops.const(alpha)))

    def thresholded(x: Value) -> Value:
        return ops.where(b.compare("gt", x, ops.const(alpha)), x, ops.const(0))

    def hard_sigmoid(x: Value) -> Value:
        line = ops.add(ops.mul(x, ops.const(alpha)), ops.const(beta))
        return b.binary(graph.MinOp, b.binary(graph.MaxOp, line, ops.const(0)), ops.const(1))

    def elu(x: Value) -> Value:
        negative = ops.mul(ops.sub(b.unary(graph.ExpOp, x), ops.const(1)), ops.const(alpha))
        return ops.where(b.compare("ge", x, ops.const(0)), x, negative)

    def softsign(x: Value) -> Value:
        return b.binary(graph.DivOp, x, ops.add(b.unary(graph.AbsOp, x), ops.const(1)))

    def softplus(x: Value) -> Value:
        # max(x, 0) + log(1 + exp(-|x|)): log(1 + exp(x)) without overflow.
        tail = b.unary(graph.ExpOp, b.unary(graph.NegOp, b.unary(graph.AbsOp, x)))
        log = b.unary(graph.LogOp, ops.add(tail, ops.const(1)))
        return ops.add(b.unary(graph.ReluOp, x), log)

    table: dict[str, Activation] = {
        "relu": unary(graph.ReluOp),
        "tanh": unary(graph.TanhOp),
        "sigmoid": unary(graph.SigmoidOp),
        "affine": lambda x: ops.add(ops.mul(x, ops.const(alpha)), ops.const(beta)),
        "leakyrelu": leaky,
        "thresholdedrelu": thresholded,
        "scaledtanh": lambda x: ops.mul(
            b.unary(graph.TanhOp, ops.mul(x, ops.const(beta))), ops.const(alpha)
        ),
        "hardsigmoid": hard_sigmoid,
        "elu": elu,
        "softsign": softsign,
        "softplus": softplus,
    }
    return table[name]


def _activations(b: Builder, ops: _Ops, attrs: Attrs, directions: int) -> list[list[Activation]]:
    """Each direction's activations (f; f, g; f, g, h), alphas and betas taken in order by
    the activations that have them, defaults where the lists run out."""
    count = len(_DEFAULT_ACTIVATIONS[b.op_type])
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in attrs.get("activations", [])]
    if not names:
        names = list(_DEFAULT_ACTIVATIONS[b.op_type]) * directions
    elif len(names) == count and directions == 2:
        names = names * 2
    if len(names) != count * directions:
        raise b.fail(
            f"{len(names)} activations for a {directions}-direction {b.op_type}: expected "
            f"{count * directions}"
        )
    alphas = [float(v) for v in attrs.get("activation_alpha", [])]
    betas = [float(v) for v in attrs.get("activation_beta", [])]
    clip = attrs.get("clip")
    made: list[Activation] = []
    for name in names:
        key = name.lower()
        if key not in _PARAMETERS and key not in _PLAIN:
            raise b.fail(f"activation '{name}' is not one ONNX defines for {b.op_type}")
        alpha, beta = _parameters(b, name, alphas, betas)
        made.append(_clipped(ops, _activation(ops, key, alpha, beta), clip))
    return [made[d * count : (d + 1) * count] for d in range(directions)]


def _parameters(
    b: Builder, name: str, alphas: list[float], betas: list[float]
) -> tuple[float, float]:
    """The alpha and beta of activation `name`, taken from the front of the lists (the
    values are consumed in the order of the activations that use them)."""
    key = name.lower()
    alpha, beta = _PARAMETERS.get(key, (None, None))
    if key in _WITHOUT_DEFAULTS and (not alphas or not betas):
        raise b.fail(
            f"activation '{name}' needs its alpha and beta (activation_alpha, "
            "activation_beta): ONNX gives them no default"
        )
    if (alpha is not None or key in _WITHOUT_DEFAULTS) and alphas:
        alpha = alphas.pop(0)
    if (beta is not None or key in _WITHOUT_DEFAULTS) and betas:
        beta = betas.pop(0)
    return alpha or 0.0, beta or 0.0


def _clipped(ops: _Ops, activation: Activation, clip: float | None) -> Activation:
    """`clip` bounds an activation's input to [-clip, clip]."""
    if clip is None:
        return activation
    bound = float(clip)

    def apply(x: Value) -> Value:
        low = ops.b.binary(graph.MaxOp, x, ops.const(-bound))
        return activation(ops.b.binary(graph.MinOp, low, ops.const(bound)))

    return apply


# ---- the layer --------------------------------------------------------------------------------


@dataclass
class _Direction:
    """One direction's weights, transposed for x @ w, and its initial state."""

    w: Value  # [input, gates * hidden]
    r: Value  # [hidden, gates * hidden]
    bias: Value  # [gates * hidden]: every bias outside the reset gate's product
    reset_bias: Value  # GRU with linear_before_reset: Rbh, multiplied by r
    peepholes: Value  # LSTM: [3 * hidden] (i, o, f)
    h0: Value  # [batch, hidden]
    c0: Value  # [batch, hidden]
    activations: list[Activation]
    reverse: bool


@dataclass
class _Run:
    """One direction's outputs: the hidden state at every time step (original order) and
    the final hidden and cell states (the cell's stays the initial zero but in an LSTM)."""

    hs: list[Value]
    h: Value
    c: Value


@dataclass
class _Layer:
    b: Builder
    ops: _Ops
    kind: str
    hidden: int
    seq: int
    batch: int
    lengths: list[int]
    linear_before_reset: bool
    input_forget: bool

    @property
    def gates(self) -> int:
        return _GATES[self.kind]

    def run(self, x2d: Value, d: _Direction) -> _Run:
        """Unroll one direction; x2d is the input as [seq * batch, input]."""
        ops = self.ops
        projected = ops.add(ops.matmul(x2d, d.w), d.bias)  # [seq * batch, gates * hidden]
        masked = any(n != self.seq for n in self.lengths)
        order = reversed(range(self.seq)) if d.reverse and not masked else range(self.seq)
        rows = self._reversal() if d.reverse and masked else None
        if rows is not None:
            projected = self._gather_rows(projected, rows)
        run = _Run(hs=[ops.zeros([self.batch, self.hidden])] * self.seq, h=d.h0, c=d.c0)
        for t in order:
            mask = (t < np.array(self.lengths))[:, None]
            if not mask.any():
                continue
            xt = ops.rows(projected, 0, t * self.batch, self.batch)
            h, c = self._step(d, xt, run.h, run.c)
            run.hs[t] = ops.select(mask, h, ops.zeros([self.batch, self.hidden]))
            run.h = ops.select(mask, h, run.h)
            if c is not None:
                run.c = ops.select(mask, c, run.c)
        if rows is not None:  # back to the original time order
            stacked = self._gather_rows(ops.concat(run.hs, 0), rows)
            run.hs = [ops.rows(stacked, 0, t * self.batch, self.batch) for t in range(self.seq)]
        return run

    def _reversal(self) -> Array:
        """Row s * batch + n of the reversed input: time step len[n] - 1 - s of entry n
        (steps past its length stay, to be masked); the permutation is its own inverse."""
        index = np.arange(self.seq * self.batch).reshape(self.seq, self.batch)
        for n, length in enumerate(self.lengths):
            index[:length, n] = index[:length, n][::-1]
        return index.reshape(-1).astype(np.int64)

    def _gather_rows(self, x: Value, rows: Array) -> Value:
        if not isinstance(x, SSAValue):
            return np.take(x, rows, axis=0)
        return self.b.op(graph.GatherOp, [x, rows], shape_of(x), axis=i64_attr(0))

    def _gate(self, x: Value, index: int, count: int = 1) -> Value:
        return self.ops.rows(x, 1, index * self.hidden, count * self.hidden)

    def _step(self, d: _Direction, xt: Value, h: Value, c: Value) -> tuple[Value, Value | None]:
        if self.kind == "RNN":
            return d.activations[0](self.ops.add(xt, self.ops.matmul(h, d.r))), None
        if self.kind == "GRU":
            return self._gru_step(d, xt, h), None
        return self._lstm_step(d, xt, h, c)

    def _gru_step(self, d: _Direction, xt: Value, h: Value) -> Value:
        ops, (f, g) = self.ops, d.activations
        if self.linear_before_reset:
            recurrent = ops.matmul(h, d.r)
            zr = ops.add(self._gate(xt, 0, 2), self._gate(recurrent, 0, 2))
            z, r = f(self._gate(zr, 0)), f(self._gate(zr, 1))
            hidden_in = ops.mul(r, ops.add(self._gate(recurrent, 2), d.reset_bias))
        else:
            zr = ops.add(self._gate(xt, 0, 2), ops.matmul(h, self._gate(d.r, 0, 2)))
            z, r = f(self._gate(zr, 0)), f(self._gate(zr, 1))
            hidden_in = ops.matmul(ops.mul(r, h), self._gate(d.r, 2))
        candidate = g(ops.add(self._gate(xt, 2), hidden_in))
        return ops.add(ops.mul(ops.sub(ops.const(1), z), candidate), ops.mul(z, h))

    def _lstm_step(self, d: _Direction, xt: Value, h: Value, c: Value) -> tuple[Value, Value]:
        ops, (f, g, act_h) = self.ops, d.activations
        gates = ops.add(xt, ops.matmul(h, d.r))
        peep_i, peep_o, peep_f = (self._gate(_row(ops, d.peepholes), k) for k in range(3))
        i = f(ops.add(self._gate(gates, 0), ops.mul(peep_i, c)))
        if self.input_forget:
            forget = ops.sub(ops.const(1), i)
        else:
            forget = f(ops.add(self._gate(gates, 2), ops.mul(peep_f, c)))
        cell = ops.add(ops.mul(forget, c), ops.mul(i, g(self._gate(gates, 3))))
        o = f(ops.add(self._gate(gates, 1), ops.mul(peep_o, cell)))
        return ops.mul(o, act_h(cell)), cell


def _row(ops: _Ops, vector: Value) -> Value:
    """A vector as a [1, n] row, to slice and broadcast against [batch, n]."""
    return ops.b.reshape(vector, [1, shape_of(vector)[0]])


# ---- the converter --------------------------------------------------------------------------


@converter("RNN", "GRU", "LSTM")
def _recurrent(b: Builder, inputs: Inputs, attrs: Attrs) -> list[Value]:
    x, w, r = required(inputs, 0), required(inputs, 1), required(inputs, 2)
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise b.fail(f"layout {layout}: expected 0 or 1")
    ops = _Ops(b, numpy_dtype(element_of(x, f"node {b.node}")))
    if layout == 1:  # [batch, seq, ...] -> [seq, batch, ...]
        x = ops.transpose(x, [1, 0, 2])
    layer = _layer(b, ops, x, w, r, attrs, optional(inputs, 4))
    directions = _directions(b, attrs, shape_of(w)[0])
    states = [optional(inputs, 5), optional(inputs, 6)]
    if layout == 1:
        states = [s if s is None else ops.transpose(s, [1, 0, 2]) for s in states]
    activations = _activations(b, ops, attrs, len(directions))
    x2d = b.reshape(x, [layer.seq * layer.batch, shape_of(x)[2]])
    runs: list[_Run] = []
    for index, reverse in enumerate(directions):
        weights = _weights(layer, inputs, states, index, activations[index], reverse)
        runs.append(layer.run(x2d, weights))
    return _outputs(layer, runs, layout)


def _layer(
    b: Builder, ops: _Ops, x: Value, w: Value, r: Value, attrs: Attrs, lengths: Value | None
) -> _Layer:
    seq, batch, _ = shape_of(x)
    gates, hidden = _GATES[b.op_type], shape_of(r)[-1]
    if shape_of(w)[1] != gates * hidden or shape_of(r)[1] != gates * hidden:
        raise b.fail(
            f"W and R must have {gates} x hidden_size rows ({gates * hidden}), got "
            f"{shape_of(w)[1]} and {shape_of(r)[1]}"
        )
    if int(attrs.get("hidden_size", hidden)) != hidden:
        raise b.fail(f"hidden_size {attrs['hidden_size']} differs from R's {hidden}")
    known = [seq] * batch if lengths is None else b.ints(lengths, "sequence_lens")
    if len(known) != batch or any(not 1 <= n <= seq for n in known):
        raise b.fail(
            f"sequence_lens {known}: expected {batch} lengths between 1 and the sequence "
            f"length {seq}"
        )
    return _Layer(
        b,
        ops,
        b.op_type,
        hidden,
        seq,
        batch,
        known,
        bool(attrs.get("linear_before_reset", 0)),
        bool(attrs.get("input_forget", 0)),
    )


def _directions(b: Builder, attrs: Attrs, count: int) -> list[bool]:
    """Whether each direction runs backwards."""
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    table = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}
    if direction not in table:
        raise b.fail(f"direction '{direction}': expected forward, reverse or bidirectional")
    if len(table[direction]) != count:
        raise b.fail(f"direction '{direction}' with weights for {count} directions")
    return table[direction]


def _weights(
    layer: _Layer,
    inputs: Inputs,
    states: list[Value | None],
    index: int,
    activations: list[Activation],
    reverse: bool,
) -> _Direction:
    ops, size = layer.ops, layer.gates * layer.hidden
    w = ops.transpose(ops.pick(required(inputs, 1), index), [1, 0])
    r = ops.transpose(ops.pick(required(inputs, 2), index), [1, 0])
    bias_input = optional(inputs, 3)
    bias: Value = ops.zeros([size])
    reset_bias: Value = ops.zeros([layer.hidden])
    if bias_input is not None:
        both = ops.pick(bias_input, index)
        bias_w, bias_r = ops.rows(both, 0, 0, size), ops.rows(both, 0, size, size)
        if layer.kind == "GRU" and layer.linear_before_reset:
            # Rbh is added to H @ Rh^T before the reset gate multiplies it.
            reset_bias = ops.rows(bias_r, 0, 2 * layer.hidden, layer.hidden)
            bias_r = ops.mul(bias_r, ops.const(np.repeat([1.0, 1.0, 0.0], layer.hidden)))
        bias = ops.add(bias_w, bias_r)
    peepholes = optional(inputs, 7)
    state_shape = [layer.batch, layer.hidden]
    h0, c0 = (ops.zeros(state_shape) if s is None else ops.pick(s, index) for s in states)
    return _Direction(
        w,
        r,
        bias,
        reset_bias,
        ops.zeros([3 * layer.hidden]) if peepholes is None else ops.pick(peepholes, index),
        h0,
        c0,
        activations,
        reverse,
    )


def _outputs(layer: _Layer, runs: list[_Run], layout: int) -> list[Value]:
    """Y [seq, directions, batch, hidden], Y_h and Y_c [directions, batch, hidden] (layout 1:
    batch first), each made only when the model reads it."""
    b, ops = layer.b, layer.ops
    wanted = [i < len(b.outputs) and bool(b.outputs[i]) for i in range(3)]
    state = [layer.batch, layer.hidden]
    placeholder = ops.zeros([1])
    results: list[Value] = [placeholder, placeholder, placeholder]
    if wanted[0]:
        per_direction = [b.reshape(ops.concat(run.hs, 0), [layer.seq, 1, *state]) for run in runs]
        y = ops.concat(per_direction, 1)
        results[0] = ops.transpose(y, [2, 0, 1, 3]) if layout == 1 else y
    for index, pick in ((1, "h"), (2, "c")):
        if not wanted[index] or (pick == "c" and layer.kind != "LSTM"):
            continue
        finals = [b.reshape(getattr(run, pick), [1, *state]) for run in runs]
        final = ops.concat(finals, 0)
        results[index] = ops.transpose(final, [1, 0, 2]) if layout == 1 else final
    return results[: max(len(b.outputs), 1)]
