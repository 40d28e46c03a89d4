"""Declarative decompositions: rewrite rules as data, for what PDL cannot say.

PDL (run by xDSL's PDL interpreter) handles rules whose new ops take their types from
matched values. Opening a compound op needs new types (a reduction's keepdims shape, a
reshaped per-channel vector), so those rules are written here as data instead: the root op
to match, names for its operands, and the steps that rebuild it from primitives. Result
types are inferred by the graph ops' own shape rules, so a rule never spells out a type.

```python
Decomposition(
    root="graph.silu",
    operands=("x",),
    steps=(Step("s", "graph.sigmoid", ("x",)), Step("out", "graph.mul", ("x", "s"))),
)
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from graphfuse.dialects import graph
from graphfuse.dialects.graph import elements
from graphfuse.dialects.graph import shape_rules as rules

_OPS: dict[str, type[Operation]] = {op.name: op for op in graph.Graph.operations}


@dataclass(frozen=True)
class Step:
    """One op the rewrite builds: `name = op(operands...)`.

    `axes`, `keepdims` and `shape` name a binding (or give a literal); `value` is the
    number of a scalar `graph.constant` of the root's element type, or a binding's name.
    """

    name: str
    op: str
    operands: tuple[str, ...] = ()
    axes: str | None = None
    keepdims: str | bool = False
    shape: str | None = None
    value: float | str | None = None


@dataclass(frozen=True)
class Decomposition:
    """Replace every `root` op by the ops of `steps`; the last step gives the result."""

    root: str
    operands: tuple[str, ...]
    steps: tuple[Step, ...]
    when: tuple[tuple[str, str], ...] = ()
    """Property values the root must have, e.g. `(("approximate", "tanh"),)`."""

    def applies_to(self, op: Operation) -> bool:
        """Whether `op` is this rule's root with the required property values."""
        if op.name != self.root:
            return False
        return all(_enum_value(getattr(op, name)) == value for name, value in self.when)

    def __post_init__(self) -> None:
        # Our own invariant: a rule only reads names defined before it.
        known = set(self.operands) | set(_BINDING_NAMES)
        for step in self.steps:
            assert step.op in _OPS, f"{self.root}: unknown op {step.op}"
            missing = [name for name in step.operands if name not in known]
            assert not missing, f"{self.root}: step {step.name} reads undefined {missing}"
            known.add(step.name)


_BINDING_NAMES = (
    "axis",
    "trailing_axes",
    "axes",
    "keepdims",
    "epsilon",
    "channel_shape",
    "inverse_count",
)


def bindings_of(op: Operation) -> dict[str, Any]:
    """The parameters of a matched op that steps may read, besides operands and earlier
    steps: `axis` (its normalised axis, as a one-element list for `axes`), `trailing_axes`
    (axis to the last dimension), `axes` and `keepdims` (of a reduction), `epsilon`,
    `channel_shape` (`C, 1, 1, ...` for broadcasting a per-channel vector over N, C, ...)
    and `inverse_count` (1 / number of elements a reduction averages)."""
    shape = graph.tensor_type_of(op.operands[0]).get_shape()
    rank = len(shape)
    found: dict[str, Any] = {"keepdims": getattr(op, "keepdims", None) is not None}
    if (axis_attr := getattr(op, "axis", None)) is not None:
        axis = rules.normalize_axis(_int(axis_attr), rank)
        found["axis"] = [axis]
        found["trailing_axes"] = list(range(axis, rank))
    if (axes_attr := getattr(op, "axes", None)) is not None:
        axes = rules.normalize_axes(_ints(axes_attr), rank)
        found["axes"] = list(axes)
        found["inverse_count"] = 1.0 / max(1, _product(shape[a] for a in axes))
    if (epsilon := getattr(op, "epsilon", None)) is not None:
        found["epsilon"] = _float(epsilon)
    if rank >= 2:
        found["channel_shape"] = (shape[1],) + (1,) * (rank - 2)
    return found


def _enum_value(attr: Any) -> str:
    return str(getattr(attr, "data", attr))


def _int(attr: Attribute) -> int:
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


def _float(attr: Attribute) -> float:
    assert isinstance(attr, FloatAttr)
    return float(attr.value.data)


def _ints(attr: Attribute) -> tuple[int, ...]:
    assert isinstance(attr, DenseArrayBase)
    return tuple(int(v) for v in attr.get_values())


def _product(values: Any) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def _resolve(value: Any, env: Mapping[str, Any]) -> Any:
    return env[value] if isinstance(value, str) else value


def scalar_constant(value: float, element_type: Attribute) -> graph.ConstantOp:
    """A rank-0 `graph.constant` of the given element type."""
    attr = elements.numpy_to_dense(np.array(value), TensorType(element_type, ()))
    return graph.ConstantOp(attr)


def build_step(step: Step, env: Mapping[str, Any], element_type: Attribute) -> Operation:
    """Create the op of one step, its result type inferred from its operands."""
    operands: Sequence[SSAValue] = [env[name] for name in step.operands]
    cls = _OPS[step.op]
    if cls is graph.ConstantOp:
        return scalar_constant(float(_resolve(step.value, env)), element_type)
    if issubclass(cls, graph.ReduceOp):
        axes = _resolve(step.axes, env)
        return cls(operands[0], axes, bool(_resolve(step.keepdims, env)))
    if issubclass(cls, graph.BinaryOp | graph.UnaryOp):
        return cls(*operands)
    if cls is graph.ReshapeOp:
        return graph.ReshapeOp(operands[0], _resolve(step.shape, env))
    raise AssertionError(f"no builder for {step.op} in a decomposition step")


def is_narrow_float(element_type: Attribute) -> bool:
    """f16 and bf16: decompositions compute these in f32 (see `DecompositionPattern`)."""
    return isinstance(element_type, Float16Type | BFloat16Type)


def _hint(value: SSAValue, base: str | None, suffix: str) -> None:
    if base is not None:
        value.name_hint = f"{base}_{suffix}"


def _widen_operands(
    op: Operation, names: Sequence[str], new_ops: list[Operation]
) -> list[SSAValue]:
    """The root's operands, each f16/bf16 one cast to f32 (the casts appended to new_ops)."""
    widened: list[SSAValue] = []
    for name, operand in zip(names, op.operands, strict=True):
        operand_type = graph.tensor_type_of(operand)
        if not is_narrow_float(operand_type.get_element_type()):
            widened.append(operand)
            continue
        cast = graph.CastOp(operand, TensorType(f32, operand_type.get_shape()))
        _hint(cast.result, op.results[0].name_hint, f"{name}_f32")
        new_ops.append(cast)
        widened.append(cast.result)
    return widened


class DecompositionPattern(RewritePattern):
    """Applies one `Decomposition` wherever its root op appears (float tensors only).

    A root of f16 or bf16 is opened in f32: its narrow operands are cast to f32, the steps
    compute in f32 and the result is cast back. Rounding every step to the narrow type
    instead overflows (an f16 reduce_mean sums past 65504) or drifts by many ulps (bf16
    gelu); the reference computes compound ops in f32 and rounds once, as kernels do.
    """

    def __init__(self, rule: Decomposition):
        self.rule = rule

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not self.rule.applies_to(op):
            return
        result_type = graph.tensor_type_of(op.results[0])
        narrow = is_narrow_float(result_type.get_element_type())
        element_type = f32 if narrow else result_type.get_element_type()
        base = op.results[0].name_hint
        new_ops: list[Operation] = []
        operands = _widen_operands(op, self.rule.operands, new_ops) if narrow else op.operands
        env: dict[str, Any] = bindings_of(op)
        env.update(zip(self.rule.operands, operands, strict=True))
        for step in self.rule.steps:
            new_op = build_step(step, env, element_type)
            new_ops.append(new_op)
            env[step.name] = new_op.results[0]
            _hint(new_op.results[0], base, step.name)
        result: SSAValue = env[self.rule.steps[-1].name]
        if narrow:
            cast = graph.CastOp(result, result_type)
            new_ops.append(cast)
            result = cast.result
        result.name_hint = base
        rewriter.replace(op, new_ops, [result])
