"""Recipes for the ONNX generator's other element types: int64, bool and f16 paths.

Kept apart from onnx_recipes (whose helpers they use) because each builds a short chain
of its own: int64 arithmetic, comparison, gathers and reductions from small-int inputs;
casts between f32, f16, int64 and bool (float to int only from inputs, which are exact);
f16 through elementwise ops, softmax, matmul, reductions and layer norm, often cast back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import GraphBuilder, Tensor
from graphfuse.testing.fuzz.onnx_recipes import (
    BOOL,
    F16,
    F32,
    I64,
    _flip,
    _int,
    broadcast_partner,
)


def int_path(b: GraphBuilder) -> None:
    """int64 arithmetic, comparison and reduction, from an int input or a cast input."""
    x = b.pick(lambda t: t.dtype == I64)
    if x is None or _flip(b, 0.3):
        x = b.input(I64, b.shape(_int(b, 1, 3)))
    other = _operand_int(b, broadcast_partner(b, x.shape))
    op = str(b.rng.choice(["Add", "Sub", "Mul", "Max", "Min", "Equal", "Greater", "Abs"]))
    result = b.node(op, [x.name] if op == "Abs" else [x.name, other])
    if result is None:
        return
    if result[0].dtype == I64 and _flip(b, 0.4):
        b.node("ReduceSum", [result[0].name, b.const([-1], I64)], keepdims=_int(b, 0, 1))
    elif _flip(b, 0.5):
        b.node("Cast", [result[0].name], to=1)


def _operand_int(b: GraphBuilder, shape: tuple[int, ...]) -> str:
    return b.const(b.rng.integers(-3, 4, shape).astype(I64))


def cast(b: GraphBuilder) -> None:
    """Casts between f32, f16, int64 and bool; float to int only from inputs (exact)."""
    from onnx import TensorProto

    x = b.pick(lambda t: t.dtype in (F16, I64, BOOL))
    if x is None or _flip(b, 0.3):
        x = b.inputs[-1] if b.inputs and _flip(b) else b.float_value()
    targets = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BOOL]
    if x.dtype != F32 or x in b.inputs:
        targets.append(TensorProto.INT64)
    b.node("Cast", [x.name], to=int(b.rng.choice(targets)))


def f16_path(b: GraphBuilder) -> None:
    """f16 ops between casts: elementwise, softmax, matmul, reduction, layer norm, data
    movement; the result sometimes cast back to f32."""
    x = b.pick(lambda t: t.dtype == F16)
    if x is None:
        source = b.float_value()
        cast = b.node("Cast", [source.name], to=10)
        if cast is None:
            return
        x = cast[0]
    result = _f16_op(b, x, str(b.rng.choice(F16_OPS)))
    if result is not None and _flip(b, 0.5):
        b.node("Cast", [result[0].name], to=1)


F16_OPS = ("Relu", "Tanh", "Sigmoid", "Add", "Mul", "Softmax", "Abs", "MatMul", "ReduceSum",
           "ReduceMax", "LayerNormalization", "Transpose", "Concat", "Where")  # fmt: skip


def _f16_op(b: GraphBuilder, x: Tensor, op: str) -> list[Tensor] | None:
    if op in ("Add", "Mul"):
        other = b.const(b.rng.standard_normal(broadcast_partner(b, x.shape)).astype(F16))
        return b.node(op, [x.name, other])
    if op == "MatMul" and x.rank >= 1:
        weights = b.rng.standard_normal((x.shape[-1], _int(b, 1, 9))) / np.sqrt(x.shape[-1])
        return b.node(op, [x.name, b.const(weights.astype(F16))])
    if op.startswith("Reduce") and x.rank >= 1:
        return b.node(op, [x.name, b.const([-1], I64)], keepdims=_int(b, 0, 1))
    if op == "LayerNormalization" and x.rank >= 1 and b.opset >= 18:
        return b.node(op, [x.name, b.const(np.ones(x.shape[-1:], F16))], axis=-1)
    if op == "Concat" and x.rank >= 1:
        return b.node(op, [x.name, x.name], axis=_int(b, -x.rank, x.rank - 1))
    if op == "Where":
        condition = b.input(BOOL, broadcast_partner(b, x.shape))
        return b.node(op, [condition.name, x.name, b.const(np.zeros((), F16))])
    if op in ("Relu", "Tanh", "Sigmoid", "Softmax", "Abs", "Transpose"):
        return b.node(op, [x.name])
    return None


def int_data(b: GraphBuilder) -> None:
    """int64 data moved and selected: Gather, Concat, Where, Transpose, ReduceMax, and a
    cast to bool."""
    x = b.pick(lambda t: t.dtype == I64 and t.rank >= 1)
    if x is None:
        x = b.input(I64, b.shape(_int(b, 1, 3)))
    op = str(b.rng.choice(["Gather", "Concat", "Where", "Transpose", "ReduceMax", "Cast"]))
    if op == "Gather":
        indices = b.rng.integers(-x.shape[0], x.shape[0], b.shape(_int(b, 0, 2)))
        b.node(op, [x.name, b.const(indices.astype(I64))])
    elif op == "Concat":
        b.node(op, [x.name, x.name], axis=_int(b, 0, x.rank - 1))
    elif op == "Where":
        condition = b.input(BOOL, broadcast_partner(b, x.shape))
        b.node(op, [condition.name, x.name, _operand_int(b, broadcast_partner(b, x.shape))])
    elif op == "ReduceMax" and b.opset >= 18:
        b.node(op, [x.name, b.const([0], I64)], keepdims=_int(b, 0, 1))
    elif op == "Cast":
        b.node(op, [x.name], to=9)
    elif op == "Transpose":
        b.node(op, [x.name])


DTYPE_RECIPES: dict[Callable[[GraphBuilder], None], float] = {
    int_path: 2,
    cast: 2,
    f16_path: 3,
    int_data: 1.5,
}
