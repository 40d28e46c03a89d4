"""One element of a kernel's value at an index, as `arith` in the loop being built.

Every value of a kernel is computed *at an index*: an elementwise op computes its operands
at the (broadcast) index, a data-movement op at its index map, and nothing in between is
stored. Other ops have rules of their own (`value_rules`). A value that a loop before
wrote to a buffer (a kernel input, a materialised op, a kept row) is loaded instead.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from xdsl.dialects import arith
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import loop
from graphfuse.dialects.graph import shape_of
from graphfuse.dialects.loop.emitter import Emitter, Index, compute_type
from graphfuse.lowering.graph_to_loop import index_maps
from graphfuse.lowering.graph_to_loop.buffers import GlobalPool
from graphfuse.lowering.graph_to_loop.operand_layouts import OperandCopy, copy_for
from graphfuse.lowering.graph_to_loop.scalars.scalar_ops import (
    SCALAR_RULES,
    ScalarRule,
    round_result,
)
from graphfuse.lowering.graph_to_loop.value_rules import Element, Step, ValueRules


class ElementBuilder:
    """Computes elements of a kernel's values where the emitter emits, each (value, index)
    once per loop scope (the emitter caches them). Rules take it as their first argument."""

    def __init__(
        self,
        em: Emitter,
        inputs: dict[SSAValue, SSAValue],
        copies: Sequence[OperandCopy],
        pool: GlobalPool,
        rules: ValueRules,
    ):
        self.em = em
        self.inputs = inputs
        """Kernel region arguments -> the input buffers holding them."""
        self.copies = list(copies)
        self.copy_buffers: list[SSAValue] = []
        """The buffer of each operand copy, in the order of `copies`."""
        self.pool = pool
        self.rules = rules
        self.buffer_of: dict[SSAValue, SSAValue] = {}
        """Materialised values -> the buffer a loop before wrote them to."""
        self.row_buffers: dict[SSAValue, SSAValue] = {}
        """Values kept per row (stitched kernels) -> the output buffer holding them."""
        self.unkept_rows: dict[SSAValue, SSAValue] = {}
        """Values to keep per row that the next reduction reading them stores as it goes."""

    def value_at(self, value: SSAValue, index: Sequence[Index]) -> SSAValue:
        """The element of `value` at `index`, in its compute type.

        Producers are walked with an explicit stack of steps (generators), not by
        recursion: a kernel's elementwise and data-movement ops can chain as deep as the
        kernel is long (a high max-depth), past Python's recursion limit. Each step runs
        exactly as a recursive walk would, operands in order, each element made once;
        only rules that build loops of their own (reductions, matmul, conv, pooling,
        ranking) call back in."""
        made = self._start((value, tuple(index)))
        if not isinstance(made, Generator):
            return made
        stack: list[tuple[Element, Step]] = [((value, tuple(index)), made)]
        sent: SSAValue | None = None
        while stack:
            element, step = stack[-1]
            try:
                wanted = next(step) if sent is None else step.send(sent)
            except StopIteration as done:
                stack.pop()
                sent = self.em.remember(element, done.value)
                continue
            started = self._start(wanted)
            if isinstance(started, Generator):
                stack.append((wanted, started))
                sent = None
            else:
                sent = started
        assert sent is not None
        return sent

    def _start(self, element: Element) -> SSAValue | Step:
        """The element if made already or made at once (a load, a value rule), else the
        step that makes it."""
        found = self.em.lookup(element)
        if found is not None:
            return found
        step = self._step(*element)
        if step is None:
            return self.em.remember(element, self._compute(*element))
        return step

    def _step(self, value: SSAValue, index: tuple[Index, ...]) -> Step | None:
        """The step making `value` at `index` from operand elements, or None where
        `_compute` makes it whole (a load, or a value rule)."""
        if value in self.buffer_of or value in self.row_buffers:
            return None
        op = value.owner
        if not isinstance(op, Operation):
            return None
        rule = SCALAR_RULES.get(type(op))
        if rule is not None:
            return self._elementwise(op, rule, index)
        step = self.rules.step_rule(op)
        return None if step is None else step(self, op, index)

    def _elementwise(self, op: Operation, rule: ScalarRule, index: tuple[Index, ...]) -> Step:
        args: list[SSAValue] = []
        for v in op.operands:
            args.append((yield (v, index_maps.broadcast(index, shape_of(v)))))
        return round_result(self.em, op, rule(self.em, op, args))

    def _run(self, step: Step) -> SSAValue:
        """Runs a step outside `value_at`'s stack, its operand elements from `value_at`."""
        try:
            wanted = next(step)
            while True:
                wanted = step.send(self.value_at(*wanted))
        except StopIteration as done:
            return done.value

    def _compute(self, value: SSAValue, index: tuple[Index, ...]) -> SSAValue:
        if value in self.buffer_of:
            return self.load(self.buffer_of[value], index)
        if value in self.row_buffers:
            return self.load(self.row_buffers[value], index)
        if isinstance(value, BlockArgument):
            return self.load(self.inputs[value], index)
        op = value.owner
        assert isinstance(op, Operation)
        rule = self.rules.value_rule(op)
        if rule is None:
            raise PassFailedException(
                f"'{op.name}' has no loop lowering (convert-graph-to-loop supports "
                "elementwise, data-movement, reduction, matmul, conv2d and pooling ops)"
            )
        return round_result(self.em, op, rule(self, op, index))

    def load(self, buffer: SSAValue, index: Sequence[Index]) -> SSAValue:
        """buffer[index], widened to its compute type."""
        em = self.em
        indices = [em.index_value(i) for i in index]
        element = em.emit(loop.LoadOp(buffer, indices))
        target = compute_type(element.type)
        return element if target == element.type else em.emit(arith.ExtFOp(element, target))

    def guarded(
        self,
        value: SSAValue,
        index: Sequence[Index],
        fill: SSAValue,
        checked: Sequence[bool] | None = None,
    ) -> SSAValue:
        """value[index] where index is inside value's shape, else `fill` (branch-free: the
        load uses a clamped index and a select picks the answer). Only dims whose entry
        in `checked` is true (all by default) can leave the shape."""
        return self._run(self.guard(value, index, fill, checked))

    def guard(
        self,
        value: SSAValue,
        index: Sequence[Index],
        fill: SSAValue,
        checked: Sequence[bool] | None = None,
    ) -> Step:
        """`guarded` as a step."""
        em = self.em
        shape = shape_of(value)
        checked = checked or [True] * len(shape)
        inside: SSAValue | bool = True
        for i, dim, check in zip(index, shape, checked, strict=True):
            if check:
                inside = em.both(inside, em.in_range(i, 0, dim))
        if inside is False:
            return fill
        clamped = tuple(
            em.iclamp(i, dim) if check else i
            for i, dim, check in zip(index, shape, checked, strict=True)
        )
        loaded = yield (value, clamped)
        if inside is True:
            return loaded
        return em.emit(arith.SelectOp(inside, loaded, fill))

    def copy_of(
        self,
        value: SSAValue,
        layout: str,
        padding: Sequence[int] = (0, 0, 0, 0),
        strides: Sequence[int] = (1, 1),
    ) -> SSAValue | None:
        """The buffer holding `value` copied into `layout` (see operand_layouts), if the
        kernel made that copy."""
        position = copy_for(self.copies, value, layout, tuple(padding), tuple(strides))
        return None if position is None else self.copy_buffers[position]
