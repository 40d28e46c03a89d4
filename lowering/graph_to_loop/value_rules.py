"""Per-op rules computing one element of a non-elementwise graph op inside a loop kernel.

`ElementBuilder.value_at` computes every value of a kernel at an index: elementwise ops by
their scalar body (`scalar_ops`), every other op by a rule registered here per op type, as
xDSL's interpreters register one `@impl` per op (`data_movement_rules`,
`accumulator_rules`). A *step* rule asks for the operand elements it needs one at a time
and is sent each, so a deep chain of data movement needs no recursion; a *value* rule
computes its element whole (an accumulator loop of its own, a load).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from xdsl.ir import Operation, SSAValue

from graphfuse.dialects.loop.emitter import Index

if TYPE_CHECKING:
    from graphfuse.lowering.graph_to_loop.element_builder import ElementBuilder

_OpT = TypeVar("_OpT", bound=Operation)
_R = TypeVar("_R")

Element = tuple[SSAValue, tuple[Index, ...]]
"""A value at an index: one element `value_at` computes (and caches under this key)."""
Step = Generator[Element, SSAValue, SSAValue]
"""Computes one element: yields each operand element it needs, in the order it needs them,
is sent that element's value, and returns its own (see `ElementBuilder.value_at`)."""
OpRule = Callable[["ElementBuilder", _OpT, tuple[Index, ...]], _R]
"""A rule for ops of one type: the builder, the op, the index of the element to compute."""
ValueRule = OpRule[Operation, SSAValue]
"""Computes one element of an op's result whole."""
StepRule = OpRule[Operation, Step]
"""The step computing one element of an op's result from its operands' elements."""


def _any_op(op_type: type[_OpT], rule: OpRule[_OpT, _R]) -> OpRule[Operation, _R]:
    """`rule` as a rule taking any op. A table finds it only for ops of `op_type` (or a
    subclass), so the narrowing assert holds."""

    def checked(builder: ElementBuilder, op: Operation, index: tuple[Index, ...]) -> _R:
        assert isinstance(op, op_type)
        return rule(builder, op, index)

    return checked


def _find(table: dict[type[Operation], _R], op: Operation) -> _R | None:
    """The rule registered for `op`'s type, else for the first registered base of it
    (`graph.reduce_sum` takes the rule of `ReduceOp`)."""
    found = table.get(type(op))
    if found is not None:
        return found
    return next((rule for base, rule in table.items() if isinstance(op, base)), None)


@dataclass
class ValueRules:
    """Rules by op type; a module registers its own with the decorators, and a kernel
    lowering combines the modules' tables with `|`."""

    values: dict[type[Operation], ValueRule] = field(
        default_factory=dict[type[Operation], ValueRule]
    )
    steps: dict[type[Operation], StepRule] = field(default_factory=dict[type[Operation], StepRule])

    def value(
        self, op_type: type[_OpT]
    ) -> Callable[[OpRule[_OpT, SSAValue]], OpRule[_OpT, SSAValue]]:
        """Registers the decorated function as the value rule of `op_type` and its subclasses."""

        def register(rule: OpRule[_OpT, SSAValue]) -> OpRule[_OpT, SSAValue]:
            self.values[op_type] = _any_op(op_type, rule)
            return rule

        return register

    def step(self, op_type: type[_OpT]) -> Callable[[OpRule[_OpT, Step]], OpRule[_OpT, Step]]:
        """Registers the decorated function as the step rule of `op_type` and its subclasses."""

        def register(rule: OpRule[_OpT, Step]) -> OpRule[_OpT, Step]:
            self.steps[op_type] = _any_op(op_type, rule)
            return rule

        return register

    def value_rule(self, op: Operation) -> ValueRule | None:
        return _find(self.values, op)

    def step_rule(self, op: Operation) -> StepRule | None:
        return _find(self.steps, op)

    def __or__(self, other: ValueRules) -> ValueRules:
        return ValueRules({**self.values, **other.values}, {**self.steps, **other.steps})
