"""One `graph.fused` kernel → one `loop.kernel`.

Every value of the kernel is computed *at an index*: an elementwise op computes its operands
at the (broadcast) index, a data-movement op at its index map, and nothing in between is
stored. Reductions, matmul, convolution and pooling ("heavy" ops) become `loop.reduce`
accumulators computed at the output point, with their elementwise epilogue applied to the
accumulated scalar in the same loop.

A heavy op is computed inline only when every path from it to the kernel's results is
elementwise at the same shape, so each of its elements is needed exactly once per output
point. Otherwise (a reduction broadcast back over the rows it reduced, a matmul read
through a transpose) inlining would recompute it many times, so it is *materialised*: a
first loop writes it to a buffer (the kernel's output buffer if it is also a result, else a
scratch buffer the caller passes in) and later loops read it. Results of one shape are
stored by one loop, each once.

A kernel whose materialised ops all reduce the trailing dims of rows it shares with its
results (softmax, layer-norm, RMS-norm) is instead stitched: one loop over the rows
computes each reduction once per row as a scalar and stores the row's results in inner
loops, with no scratch buffer (see `row_stitching`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

import numpy as np
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    MemRefType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import FusionKind, fusion_kind, shape_of, tensor_type_of
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.interpreter import dense_to_numpy, to_element_type
from graphfuse.dialects.loop.emitter import Emitter, Index, compute_type, is_float, point_index
from graphfuse.lowering.graph_to_loop import index_maps
from graphfuse.lowering.graph_to_loop.operand_layouts import OperandCopy, copy_for, operand_copies
from graphfuse.lowering.graph_to_loop.ranking import emit_ranking
from graphfuse.lowering.graph_to_loop.row_stitching import RowPlan, row_plan, stitched_rows
from graphfuse.lowering.graph_to_loop.scalar_ops import SCALAR_RULES, ScalarRule, round_result

HEAVY_OPS = (graph.ReduceOp, graph.MatmulOp, graph.Conv2dOp, graph.Pool2dOp)
"""Ops computed with an accumulator over a reduction space."""
RANKING_OPS = (graph.SortOp, graph.TopKOp)
"""Ops that scatter their results (see `ranking`): always materialised."""


def memref_of(value: SSAValue | Attribute) -> MemRefType[Attribute]:
    """The buffer type holding a tensor value (same shape and element type)."""
    tensor = tensor_type_of(value)
    return MemRefType(tensor.get_element_type(), tensor.get_shape())


@dataclass
class GlobalPool:
    """Module-level `memref.global`s for non-splat constants, named uniquely."""

    ops: list[memref.GlobalOp] = field(default_factory=list[memref.GlobalOp])

    def add(self, value: DenseIntOrFPElementsAttr) -> tuple[str, MemRefType[Attribute]]:
        name = f"__graphfuse_constant_{len(self.ops)}"
        typ = memref_of(value.get_type())
        self.ops.append(
            memref.GlobalOp.get(StringAttr(name), typ, value, constant=UnitAttr(), alignment=64)
        )
        return name, typ


def _identity_closed(value: SSAValue, seen: dict[SSAValue, bool]) -> bool:
    """Every use of `value` is the yield or an elementwise op of the same shape whose
    result is itself identity-closed: each element is used once per output point.

    Users are visited with an explicit stack (an elementwise tail may be thousands of
    ops long), each value's answer after its users' answers."""
    stack = [(value, False)]
    while stack:
        top, users_done = stack.pop()
        if users_done:
            seen[top] = all(_closed_use(top, use.operation, seen) for use in top.uses)
        elif top not in seen:
            seen[top] = True
            stack.append((top, True))
            stack.extend((r, False) for r in _elementwise_results(top))
    return seen[value]


def _elementwise_results(value: SSAValue) -> list[SSAValue]:
    """Results of `value`'s elementwise users of its own shape."""
    return [
        result
        for use in value.uses
        if _same_shape_elementwise(use.operation, value)
        for result in use.operation.results
    ]


def _same_shape_elementwise(user: Operation, value: SSAValue) -> bool:
    return fusion_kind(user) == FusionKind.ELEMWISE and all(
        shape_of(r) == shape_of(value) for r in user.results
    )


def _closed_use(value: SSAValue, user: Operation, seen: dict[SSAValue, bool]) -> bool:
    if isinstance(user, graph.YieldOp):
        return True
    return _same_shape_elementwise(user, value) and all(seen[r] for r in user.results)


def materialized_ops(fused: graph.FusedOp) -> list[Operation]:
    """Heavy ops of the kernel that need a buffer, in program order."""
    seen: dict[SSAValue, bool] = {}
    return [
        op
        for op in fused.body.block.ops
        if isinstance(op, RANKING_OPS)
        or (isinstance(op, HEAVY_OPS) and not _identity_closed(op.results[0], seen))
    ]


@dataclass
class KernelSignature:
    """Buffers a kernel takes: one per input, one per result, then its scratch buffers."""

    inputs: list[MemRefType[Attribute]]
    outputs: list[MemRefType[Attribute]]
    scratch: list[MemRefType[Attribute]]

    @property
    def arg_types(self) -> list[Attribute]:
        return [*self.inputs, *self.outputs, *self.scratch]


def _stitched_rows(
    fused: graph.FusedOp, materialized: Sequence[Operation]
) -> tuple[int, ...] | None:
    return stitched_rows(materialized, _yield(fused).values, bool(operand_copies(fused)))


def staged_ops(fused: graph.FusedOp) -> list[Operation]:
    """Materialised ops that a loop of their own writes to a buffer before later loops read
    them: none in a kernel lowered row by row (see row_stitching), which keeps each
    reduction a scalar of its row."""
    materialized = materialized_ops(fused)
    return [] if _stitched_rows(fused, materialized) is not None else materialized


def kernel_signature(fused: graph.FusedOp) -> KernelSignature:
    yielded = set(_yield(fused).values)
    scratch = [
        memref_of(result)
        for op in staged_ops(fused)
        for result in op.results
        if result not in yielded
    ]
    scratch += [copy.buffer_type() for copy in operand_copies(fused)]
    return KernelSignature(
        [memref_of(v) for v in fused.inputs], [memref_of(r) for r in fused.outputs], scratch
    )


def _yield(fused: graph.FusedOp) -> graph.YieldOp:
    last = fused.body.block.last_op
    assert isinstance(last, graph.YieldOp)
    return last


def lower_kernel(fused: graph.FusedOp, name: str, pool: GlobalPool) -> loop.KernelOp:
    """The loop kernel computing `fused`'s results into its output buffers."""
    signature = kernel_signature(fused)
    kernel = loop.KernelOp(name, signature.arg_types)
    _KernelBuilder(fused, kernel, signature, pool).build()
    return kernel


_OpT = TypeVar("_OpT", bound=Operation)
_R = TypeVar("_R")

Row = tuple[Index, ...]
"""The index of a row in a stitched kernel (empty outside one)."""
_Stored = tuple[SSAValue, list[SSAValue]]
"""A value and the buffers it is stored into."""

ValueRule = Callable[["_KernelBuilder", Operation, tuple[Index, ...]], SSAValue]
"""Computes one element of a non-elementwise op's result at an index."""
Element = tuple[SSAValue, tuple[Index, ...]]
"""A value at an index: one element `value_at` computes (and caches under this key)."""
Step = Generator[Element, SSAValue, SSAValue]
"""Computes one element: yields each operand element it needs, in the order it needs them,
is sent that element's value, and returns its own (see `value_at`)."""
StepRule = Callable[["_KernelBuilder", Operation, tuple[Index, ...]], Step]
"""The step computing one element of an op's result."""


def _value_rule(
    op_type: type[_OpT], method: Callable[[_KernelBuilder, _OpT, tuple[Index, ...]], _R]
) -> tuple[type[Operation], Callable[[_KernelBuilder, Operation, tuple[Index, ...]], _R]]:
    """A `VALUE_RULES` entry running `method` on ops of `op_type`.

    The table holds one rule type, taking any op; `_compute` picks a rule by the op's type
    or a base of it, so the narrowing assert holds."""

    def rule(builder: _KernelBuilder, op: Operation, index: tuple[Index, ...]) -> _R:
        assert isinstance(op, op_type)
        return method(builder, op, index)

    return op_type, rule


class _KernelBuilder:
    def __init__(
        self,
        fused: graph.FusedOp,
        kernel: loop.KernelOp,
        signature: KernelSignature,
        pool: GlobalPool,
    ):
        self.fused = fused
        self.em = Emitter(kernel.body.block)
        self.pool = pool
        args = kernel.body.block.args
        n_in, n_out = len(signature.inputs), len(signature.outputs)
        region_args = fused.body.block.args
        self.inputs: dict[SSAValue, SSAValue] = dict(zip(region_args, args[:n_in], strict=True))
        self.output_args = list(args[n_in : n_in + n_out])
        self.scratch_args: list[SSAValue] = list(args[n_in + n_out :])
        self.buffer_of: dict[SSAValue, SSAValue] = {}
        self.row_buffers: dict[SSAValue, SSAValue] = {}
        """Values kept per row (stitched kernels) -> the output buffer holding them."""
        self.unkept_rows: dict[SSAValue, SSAValue] = {}
        """Values to keep per row that the next reduction reading them stores as it goes."""
        self.copies = operand_copies(fused)
        self.copy_buffers: list[SSAValue] = []

    # ---- stages -----------------------------------------------------------------------

    def build(self) -> None:
        materialized = materialized_ops(self.fused)
        rows = _stitched_rows(self.fused, materialized)
        if rows is None:
            self._build_staged(materialized)
        else:
            ops = list(self.fused.body.block.ops)
            results = _yield(self.fused).values
            self._build_rows(row_plan(ops, materialized, results, rows))
        self.em.add(loop.YieldOp())

    def _homes(self) -> dict[SSAValue, list[SSAValue]]:
        """Each result value -> the output buffers it is stored into."""
        homes: dict[SSAValue, list[SSAValue]] = {}
        for value, buffer in zip(_yield(self.fused).values, self.output_args, strict=True):
            homes.setdefault(value, []).append(buffer)
        return homes

    def _build_staged(self, materialized: Sequence[Operation]) -> None:
        """Materialised ops first, each by a loop of its own, then one loop per result shape."""
        homes = self._homes()
        scratch = iter(self.scratch_args)
        n_materialized = sum(1 for op in materialized for r in op.results if r not in homes)
        self.copy_buffers = self.scratch_args[n_materialized:]
        for copy, buffer in zip(self.copies, self.copy_buffers, strict=True):
            self._copy_stage(copy, buffer)
        for op in materialized:
            buffers = [homes.pop(r, None) or [next(scratch)] for r in op.results]
            if isinstance(op, RANKING_OPS):
                emit_ranking(self.em, op, self.value_at, buffers)
            else:
                self._stage(shape_of(op.results[0]), [(op.results[0], buffers[0])])
            for result, homes_of_result in zip(op.results, buffers, strict=True):
                self.buffer_of[result] = homes_of_result[0]
        by_shape: dict[tuple[int, ...], list[tuple[SSAValue, list[SSAValue]]]] = {}
        for value, buffers in homes.items():
            by_shape.setdefault(shape_of(value), []).append((value, buffers))
        for shape, group in by_shape.items():
            self._stage(shape, group)

    def _stage(self, shape: tuple[int, ...], group: Sequence[_Stored], row: Row = ()) -> None:
        """One loop over `shape` storing each value of `group` into its buffers (at `row`,
        then the loop's index, inside a row loop)."""
        if 0 in shape:
            return
        if row and all(d == 1 for d in shape):
            self._store(group, (*row, *(0 for _ in shape)))
            return
        nest = loop.ParallelOp(shape)
        self.em.add(nest)
        with self.em.inside(nest.body.block):
            index = (*row, *point_index(nest))
            # Kept rows of this shape live in output buffers this loop stores to: load
            # them before any store.
            for kept in self.row_buffers:
                if shape_of(kept) == shape_of(group[0][0]):
                    self.value_at(kept, index)
            self._store(group, index)
            self.em.add(loop.YieldOp())

    def _store(self, group: Sequence[_Stored], index: tuple[Index, ...]) -> None:
        for value, buffers in group:
            element = tensor_type_of(value).get_element_type()
            scalar = self._to_storage(self.value_at(value, index), element)
            indices = [self.em.index_value(i) for i in index]
            for buffer in buffers:
                # A kept value already lies in its own output buffer.
                if self.row_buffers.get(value) is not buffer:
                    self.em.add(loop.StoreOp(scalar, buffer, indices))

    # ---- row-stitched kernels (see row_stitching) -------------------------------------

    def _build_rows(self, plan: RowPlan) -> None:
        """One loop over the rows; per row its scalars, then its results."""
        em = self.em
        nest = loop.ParallelOp(plan.rows)
        em.add(nest)
        with em.inside(nest.body.block):
            row = point_index(nest)
            for value in plan.row_values:
                owner = value.owner
                if isinstance(owner, graph.ReduceOp) and owner.input in plan.kept:
                    self._keep_row(plan, owner.input)
                self.value_at(value, plan.row_index(row, value))
            by_trailing: dict[tuple[int, ...], list[_Stored]] = {}
            for value, buffers in self._homes().items():
                by_trailing.setdefault(plan.trailing(value), []).append((value, buffers))
            # One element per row first: they may read a kept row the loops overwrite.
            for trailing in sorted(by_trailing, key=lambda t: math.prod(t) > 1):
                self._stage(trailing, by_trailing[trailing], row)
            em.add(loop.YieldOp())

    def _keep_row(self, plan: RowPlan, value: SSAValue) -> None:
        """Have the reduction about to read `value` also write its row into the row of
        the output buffer that holds it; later reads load it (see row_stitching). One
        loop computes, stores and sums each element, where a fill loop before the
        reduction would load the row back from L1 once more."""
        if value not in self.row_buffers:
            self.unkept_rows[value] = self.output_args[plan.kept[value]]

    def _copy_stage(self, copy: OperandCopy, buffer: SSAValue) -> None:
        """buffer = the operand in the copy's layout (see operand_layouts)."""
        em = self.em
        nest = loop.ParallelOp(copy.shape)
        em.add(nest)
        with em.inside(nest.body.block):
            index = point_index(nest)
            element = tensor_type_of(copy.value).get_element_type()
            source = copy.source_index(index)
            if copy.layout in ("nhwc_padded", "nchw_padded"):
                top, left, bottom, right = copy.padding
                n, c, h, w = source
                shifted = (n, c, em.isub(h, top), em.isub(w, left))
                zero = em.constant(0, compute_type(element))
                # Only padded rows and columns fall outside the input.
                checked = (False, False, top + bottom > 0, left + right > 0)
                value = self._guarded(copy.value, shifted, zero, checked)
            else:
                value = self.value_at(copy.value, source)
            indices = [em.index_value(i) for i in index]
            em.add(loop.StoreOp(self._to_storage(value, element), buffer, indices))
            em.add(loop.YieldOp())

    def _copy_of(
        self, value: SSAValue, layout: str, padding: Sequence[int] = (0, 0, 0, 0)
    ) -> SSAValue | None:
        position = copy_for(self.copies, value, layout, tuple(padding))
        return None if position is None else self.copy_buffers[position]

    def _to_storage(self, scalar: SSAValue, element: Attribute) -> SSAValue:
        if scalar.type == element:
            return scalar
        widened = scalar.owner
        if isinstance(widened, arith.ExtFOp) and widened.input.type == element:
            return widened.input  # rounded already (round_result)
        return self.em.emit(arith.TruncFOp(scalar, element))

    # ---- values at an index -----------------------------------------------------------

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
        """The element if made already or made at once (a load, a whole rule), else the
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
        `_compute` makes it whole (a load, or a rule of `VALUE_RULES`)."""
        if value in self.buffer_of or value in self.row_buffers:
            return None
        op = value.owner
        if not isinstance(op, Operation):
            return None
        rule = SCALAR_RULES.get(type(op))
        if rule is not None:
            return self._elementwise(op, rule, index)
        step = self.STEP_RULES.get(type(op))
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
            return self._load(self.buffer_of[value], index)
        if value in self.row_buffers:
            return self._load(self.row_buffers[value], index)
        if isinstance(value, BlockArgument):
            return self._load(self.inputs[value], index)
        op = value.owner
        assert isinstance(op, Operation)
        method = self.VALUE_RULES.get(type(op))
        if method is None:
            for base, fallback in self.VALUE_RULES.items():
                if isinstance(op, base):
                    method = fallback
        if method is None:
            raise PassFailedException(
                f"'{op.name}' has no loop lowering (convert-graph-to-loop supports "
                "elementwise, data-movement, reduction, matmul, conv2d and pooling ops)"
            )
        return round_result(self.em, op, method(self, op, index))

    def _load(self, buffer: SSAValue, index: Sequence[Index]) -> SSAValue:
        em = self.em
        indices = [em.index_value(i) for i in index]
        element = em.emit(loop.LoadOp(buffer, indices))
        target = compute_type(element.type)
        return element if target == element.type else em.emit(arith.ExtFOp(element, target))

    # ---- data movement ----------------------------------------------------------------

    def _constant(self, op: graph.ConstantOp, index: tuple[Index, ...]) -> SSAValue:
        element = tensor_type_of(op.value.get_type()).get_element_type()
        array = dense_to_numpy(op.value)
        flat = array.reshape(-1)
        if flat.size > 0 and bool(np.all(flat == flat[0])):
            return self.em.constant(flat[0].item(), compute_type(element))
        name, typ = self.pool.add(op.value)
        buffer = self.em.hoist(memref.GetGlobalOp(name, typ))
        return self._load(buffer, index)

    def _broadcast_to(self, op: graph.BroadcastToOp, index: tuple[Index, ...]) -> Step:
        return (yield (op.input, index_maps.broadcast(index, shape_of(op.input))))

    def _reshape(self, op: graph.ReshapeOp, index: tuple[Index, ...]) -> Step:
        mapped = index_maps.reshape(self.em, index, shape_of(op.result), shape_of(op.input))
        return (yield (op.input, mapped))

    def _transpose(self, op: graph.TransposeOp, index: tuple[Index, ...]) -> Step:
        return (yield (op.input, index_maps.transpose(index, op.perm.get_values())))

    def _slice(self, op: graph.SliceOp, index: tuple[Index, ...]) -> Step:
        mapped = index_maps.strided_slice(
            self.em, index, op.starts.get_values(), op.strides.get_values()
        )
        return (yield (op.input, mapped))

    def _guarded(
        self,
        value: SSAValue,
        index: Sequence[Index],
        fill: SSAValue,
        checked: Sequence[bool] | None = None,
    ) -> SSAValue:
        """value[index] where index is inside value's shape, else `fill` (branch-free: the
        load uses a clamped index and a select picks the answer). Only dims whose entry
        in `checked` is true (all by default) can leave the shape."""
        return self._run(self._guard(value, index, fill, checked))

    def _guard(
        self,
        value: SSAValue,
        index: Sequence[Index],
        fill: SSAValue,
        checked: Sequence[bool] | None = None,
    ) -> Step:
        """`_guarded` as a step."""
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

    def _pad(self, op: graph.PadOp, index: tuple[Index, ...]) -> Step:
        lows, highs = op.low.get_values(), op.high.get_values()
        shifted = tuple(self.em.isub(i, low) for i, low in zip(index, lows, strict=True))
        stored = tensor_type_of(op.result).get_element_type()
        element = compute_type(stored)
        # The fill as the result's type holds it (0.1 in f16 is not 0.1 in f32).
        fill_value = float(to_element_type(np.array(op.value.value.data), stored))
        fill = self.em.constant(fill_value if is_float(element) else int(fill_value), element)
        padded = [low != 0 or high != 0 for low, high in zip(lows, highs, strict=True)]
        return (yield from self._guard(op.input, shifted, fill, padded))

    def _gather(self, op: graph.GatherOp, index: tuple[Index, ...]) -> Step:
        """data at `index` with the dims indices spans replaced by one position on `axis`:
        the index read from `indices` there (a data-dependent index map)."""
        shape = shape_of(op.data)
        axis = rules.normalize_axis(op.axis.value.data, len(shape))
        rank = len(shape_of(op.indices))
        position = self._gather_position(op.indices, index[axis : axis + rank], shape[axis])
        return (yield (op.data, (*index[:axis], position, *index[axis + rank :])))

    def _gather_position(self, indices: SSAValue, at: tuple[Index, ...], dim: int) -> Index:
        """indices[at] as an index into an axis of extent `dim`: a negative one wrapped
        (+ dim), then clamped into [0, dim - 1] as the reference interpreter does, so the
        load stays inside the buffer. Known when the indices are a constant read at a
        known place, or when the axis has one element."""
        known = _constant_element(indices, at)
        if dim == 1 or known is not None:
            wrapped = 0 if known is None else known + dim if known < 0 else known
            return min(max(wrapped, 0), dim - 1)
        em = self.em

        def position() -> SSAValue:
            raw = em.emit(arith.IndexCastOp(self.value_at(indices, at), IndexType()))
            negative = em.emit(arith.CmpiOp(raw, em.index_value(0), "slt"))
            wrapped = em.emit(arith.SelectOp(negative, em.index_value(em.iadd(raw, dim)), raw))
            return em.index_value(em.iclamp(wrapped, dim))

        return em.cached(("gather_position", indices, at, dim), position)

    def _concat(self, op: graph.ConcatOp, index: tuple[Index, ...]) -> Step:
        em = self.em
        axis = rules.normalize_axis(op.axis.value.data, len(index))
        offsets = [0]
        for v in op.inputs:
            offsets.append(offsets[-1] + shape_of(v)[axis])
        position = index[axis]
        if isinstance(position, int):
            k = next(k for k in range(len(op.inputs)) if position < offsets[k + 1])
            local = (*index[:axis], position - offsets[k], *index[axis + 1 :])
            return (yield (op.inputs[k], local))
        result: SSAValue | None = None
        for k in reversed(range(len(op.inputs))):
            v = op.inputs[k]
            local_pos = em.iclamp(em.isub(position, offsets[k]), shape_of(v)[axis])
            part = yield (v, (*index[:axis], local_pos, *index[axis + 1 :]))
            if result is None:
                result = part
                continue
            below = em.emit(arith.CmpiOp(position, em.index_value(offsets[k + 1]), "slt"))
            result = em.emit(arith.SelectOp(below, part, result))
        assert result is not None
        return result

    # ---- heavy ops --------------------------------------------------------------------

    def _accumulate(
        self,
        kind: loop.ReduceKind,
        bounds: Sequence[int],
        typ: Attribute,
        body: Callable[[tuple[Index, ...]], SSAValue],
    ) -> SSAValue:
        """A loop.reduce over `bounds` whose body yields `body(loop indices)`."""
        em = self.em
        init = {
            loop.ReduceKind.ADD: lambda: em.constant(0, typ),
            loop.ReduceKind.MUL: lambda: em.constant(1, typ),
            loop.ReduceKind.MAX: lambda: em.lowest(typ),
            loop.ReduceKind.MIN: lambda: em.highest(typ),
        }[kind]()
        if 0 in bounds:
            return init
        reduce = loop.ReduceOp(kind, bounds, init)
        with em.inside(reduce.body.block):
            element = body(point_index(reduce))
            em.add(loop.YieldOp(element))
        return em.emit(reduce)

    def _reduce(self, op: graph.ReduceOp, index: tuple[Index, ...]) -> SSAValue:
        in_shape = shape_of(op.input)
        # Sorted: the loop over reduced dims follows dim order, as _reduced_index reads it.
        axes = sorted(rules.normalize_axes(op.axes.get_values(), len(in_shape)))
        keepdims = op.keepdims is not None
        typ = compute_type(tensor_type_of(op.result).get_element_type())
        kinds: dict[type[graph.ReduceOp], loop.ReduceKind] = {
            graph.ReduceSumOp: loop.ReduceKind.ADD,
            graph.ReduceMeanOp: loop.ReduceKind.ADD,
            graph.ReduceMaxOp: loop.ReduceKind.MAX,
            graph.ReduceMinOp: loop.ReduceKind.MIN,
        }
        kind = kinds[type(op)]

        keep = self.unkept_rows.pop(op.input, None)

        def body(loop_index: tuple[Index, ...]) -> SSAValue:
            at = _reduced_index(index, loop_index, axes, len(in_shape), keepdims)
            element = self.value_at(op.input, at)
            if keep is not None:
                self.em.add(loop.StoreOp(element, keep, [self.em.index_value(i) for i in at]))
            return element

        total = self._accumulate(kind, [in_shape[a] for a in axes], typ, body)
        if keep is not None:
            self.row_buffers[op.input] = keep
        if not isinstance(op, graph.ReduceMeanOp):
            return total
        count = math.prod(in_shape[a] for a in axes)
        if is_float(typ):
            return self.em.emit(arith.DivfOp(total, self.em.constant(float(count), typ)))
        return self.em.emit(arith.DivSIOp(total, self.em.constant(max(count, 1), typ)))

    def _multiply(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.em.emit(arith.MulfOp(a, b) if is_float(a.type) else arith.MuliOp(a, b))

    def _matmul(self, op: graph.MatmulOp, index: tuple[Index, ...]) -> SSAValue:
        lhs_shape, rhs_shape = shape_of(op.lhs), shape_of(op.rhs)
        batch, m, n = index[:-2], index[-2], index[-1]
        lhs_batch = index_maps.broadcast(batch, lhs_shape[:-2])
        rhs_batch = index_maps.broadcast(batch, rhs_shape[:-2])
        typ = compute_type(tensor_type_of(op.result).get_element_type())

        transposed = self._copy_of(op.rhs, "transposed")

        def body(k: tuple[Index, ...]) -> SSAValue:
            a = self.value_at(op.lhs, (*lhs_batch, m, k[0]))
            if transposed is not None:
                b = self._load(transposed, (*rhs_batch, n, k[0]))
            else:
                b = self.value_at(op.rhs, (*rhs_batch, k[0], n))
            return self._multiply(a, b)

        return self._accumulate(loop.ReduceKind.ADD, [lhs_shape[-1]], typ, body)

    def _window_position(
        self, out: Index, tap: Index, stride: int, dilation: int, pad: int
    ) -> Index:
        em = self.em
        return em.iadd(em.isub(em.imul(out, stride), pad), em.imul(tap, dilation))

    def _conv2d(self, op: graph.Conv2dOp, index: tuple[Index, ...]) -> SSAValue:
        em = self.em
        n, co, oh, ow = index
        channels = shape_of(op.input)[1]
        out_channels, group_channels, kh, kw = shape_of(op.weight)
        groups = op.groups.value.data
        sh, sw = op.strides.get_values()
        dh, dw = op.dilations.get_values()
        top, left = op.padding.get_values()[:2]
        # The first input channel of this output channel's group (0 without groups: no
        # index arithmetic on `co`, so the input's loads do not depend on it).
        group_base = (
            0 if groups == 1 else em.imul(em.idiv(co, out_channels // groups), channels // groups)
        )
        typ = compute_type(tensor_type_of(op.result).get_element_type())
        zero = em.constant(0, typ)

        rows = self._copy_of(op.input, "nchw_padded", op.padding.get_values())
        if rows is not None:
            # A depthwise convolution on its input's rows, padding written out: unchecked.
            def on_rows(taps: tuple[Index, ...]) -> SSAValue:
                c, i, j = taps
                ih = self._window_position(oh, i, sh, dh, 0)
                iw = self._window_position(ow, j, sw, dw, 0)
                x = self._load(rows, (n, em.iadd(group_base, c), ih, iw))
                return self._multiply(x, self.value_at(op.weight, (co, c, i, j)))

            return self._accumulate(loop.ReduceKind.ADD, [group_channels, kh, kw], typ, on_rows)
        padded = self._copy_of(op.input, "nhwc_padded", op.padding.get_values())
        weights = self._copy_of(op.weight, "ohwi")
        if padded is not None:
            # Channels innermost, padding already written out: a contiguous dot product.
            # (Without a weight copy, loop-tile-matmul packs the weights from their own.)
            def channels_last(taps: tuple[Index, ...]) -> SSAValue:
                i, j, c = taps
                ih = self._window_position(oh, i, sh, dh, 0)
                iw = self._window_position(ow, j, sw, dw, 0)
                x = self._load(padded, (n, ih, iw, em.iadd(group_base, c)))
                if weights is None:
                    return self._multiply(x, self.value_at(op.weight, (co, c, i, j)))
                return self._multiply(x, self._load(weights, (co, i, j, c)))

            bounds = [kh, kw, group_channels]
            return self._accumulate(loop.ReduceKind.ADD, bounds, typ, channels_last)

        # Only rows and columns can leave the input, and only where padding (or a window
        # past the input's end) lets them: a 1x1 or unpadded window reads plain loads.
        height, width = shape_of(op.input)[2:]
        out_height, out_width = shape_of(op.result)[2:]
        checked = (
            False,
            False,
            _window_leaves(out_height, sh, kh, dh, top, height),
            _window_leaves(out_width, sw, kw, dw, left, width),
        )

        def body(taps: tuple[Index, ...]) -> SSAValue:
            c, i, j = taps
            ih = self._window_position(oh, i, sh, dh, top)
            iw = self._window_position(ow, j, sw, dw, left)
            x = self._guarded(op.input, (n, em.iadd(group_base, c), ih, iw), zero, checked)
            w = self.value_at(op.weight, (co, c, i, j))
            return self._multiply(x, w)

        return self._accumulate(loop.ReduceKind.ADD, [group_channels, kh, kw], typ, body)

    def _pool(self, op: graph.Pool2dOp, index: tuple[Index, ...]) -> SSAValue:
        em = self.em
        n, c, oh, ow = index
        kh, kw = op.kernel.get_values()
        sh, sw = op.strides.get_values()
        top, left = op.padding.get_values()[:2]
        typ = compute_type(tensor_type_of(op.result).get_element_type())
        is_max = isinstance(op, graph.MaxPool2dOp)
        fill = em.lowest(typ) if is_max else em.constant(0, typ)

        def position(taps: tuple[Index, ...]) -> tuple[Index, ...]:
            return (
                n,
                c,
                self._window_position(oh, taps[0], sh, 1, top),
                self._window_position(ow, taps[1], sw, 1, left),
            )

        def body(taps: tuple[Index, ...]) -> SSAValue:
            return self._guarded(op.input, position(taps), fill)

        kind = loop.ReduceKind.MAX if is_max else loop.ReduceKind.ADD
        total = self._accumulate(kind, [kh, kw], typ, body)
        if is_max:
            return total
        if isinstance(op, graph.AvgPool2dOp) and op.count_include_pad is not None:
            return em.emit(arith.DivfOp(total, em.constant(float(kh * kw), typ)))
        height, width = shape_of(op.input)[2:]

        def counted(taps: tuple[Index, ...]) -> SSAValue:
            _, _, ih, iw = position(taps)
            inside = em.both(em.in_range(ih, 0, height), em.in_range(iw, 0, width))
            one = em.constant(1.0, typ)
            if isinstance(inside, bool):
                return one if inside else em.constant(0.0, typ)
            return em.emit(arith.SelectOp(inside, one, em.constant(0.0, typ)))

        count = self._accumulate(loop.ReduceKind.ADD, [kh, kw], typ, counted)
        return em.emit(arith.DivfOp(total, count))

    VALUE_RULES: ClassVar[dict[type[Operation], ValueRule]] = dict(
        [
            _value_rule(graph.ConstantOp, _constant),
            _value_rule(graph.ReduceOp, _reduce),
            _value_rule(graph.MatmulOp, _matmul),
            _value_rule(graph.Conv2dOp, _conv2d),
            _value_rule(graph.Pool2dOp, _pool),
        ]
    )
    """Non-elementwise graph op type -> how to compute one element of its result."""

    STEP_RULES: ClassVar[dict[type[Operation], StepRule]] = dict(
        [
            _value_rule(graph.BroadcastToOp, _broadcast_to),
            _value_rule(graph.ReshapeOp, _reshape),
            _value_rule(graph.TransposeOp, _transpose),
            _value_rule(graph.SliceOp, _slice),
            _value_rule(graph.PadOp, _pad),
            _value_rule(graph.ConcatOp, _concat),
            _value_rule(graph.GatherOp, _gather),
        ]
    )
    """Data-movement op type (exact) -> the step computing one element of its result from
    its operands' (see `value_at`)."""


def _constant_element(value: SSAValue, at: tuple[Index, ...]) -> int | None:
    """The integer element of a `graph.constant` at a known index, else None."""
    owner = value.owner
    place = tuple(i for i in at if isinstance(i, int))
    if not isinstance(owner, graph.ConstantOp) or len(place) != len(at):
        return None
    return int(dense_to_numpy(owner.value)[place])


def _reduced_index(
    out: Sequence[Index],
    loop_index: Sequence[Index],
    axes: Sequence[int],
    rank: int,
    keepdims: bool,
) -> tuple[Index, ...]:
    """The input index of a reduction: reduced dims from the loop, the rest from `out`."""
    result: list[Index] = []
    outer = iter(out)
    inner = iter(loop_index)
    for dim in range(rank):
        if dim in axes:
            result.append(next(inner))
            if keepdims:
                next(outer)
        else:
            result.append(next(outer))
    return tuple(result)


def _window_leaves(out: int, stride: int, taps: int, dilation: int, pad: int, size: int) -> bool:
    """Whether a window position (out * stride + tap * dilation - pad) can fall outside
    [0, size): only with padding before, or a last window reaching past the end."""
    return pad > 0 or (out - 1) * stride + (taps - 1) * dilation - pad >= size
