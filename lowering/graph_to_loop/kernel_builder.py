"""The loops of one `loop.kernel`: which loop computes each value and stores it where.

A staged kernel copies operands into their layouts first (`operand_layouts`), then writes
each materialised op to a buffer by a loop of its own, then stores its results with one
loop per result shape, each result once. A row-stitched kernel (`row_stitching`) is one
loop over the rows: per row its reductions as scalars, then the row's results in inner
loops. Elements inside the loops come from `ElementBuilder`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import shape_of, tensor_type_of
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.loop.emitter import Emitter, Index, compute_type, point_index
from graphfuse.lowering.graph_to_loop.buffers import GlobalPool
from graphfuse.lowering.graph_to_loop.element_builder import ElementBuilder
from graphfuse.lowering.graph_to_loop.operand_layouts import OperandCopy
from graphfuse.lowering.graph_to_loop.ranking import RANKING_OPS, emit_ranking
from graphfuse.lowering.graph_to_loop.row_stitching import RowPlan
from graphfuse.lowering.graph_to_loop.value_rules import ValueRules

Row = tuple[Index, ...]
"""The index of a row in a stitched kernel (empty outside one)."""
_Stored = tuple[SSAValue, list[SSAValue]]
"""A value and the buffers it is stored into."""


def yielded(fused: graph.FusedOp) -> tuple[SSAValue, ...]:
    """The values a kernel returns, in result order."""
    last = fused.body.block.last_op
    assert isinstance(last, graph.YieldOp)
    return tuple(last.values)


class KernelBuilder:
    """Builds the body of `kernel` computing `fused`: its arguments are the buffers of
    `fused`'s inputs, then of its results, then its scratch buffers (`KernelSignature`)."""

    def __init__(
        self,
        fused: graph.FusedOp,
        kernel: loop.KernelOp,
        copies: Sequence[OperandCopy],
        pool: GlobalPool,
        rules: ValueRules,
    ):
        self.em = Emitter(kernel.body.block)
        args = kernel.body.block.args
        n_in, n_out = len(fused.inputs), len(fused.outputs)
        inputs: dict[SSAValue, SSAValue] = dict(
            zip(fused.body.block.args, args[:n_in], strict=True)
        )
        self.elements = ElementBuilder(self.em, inputs, copies, pool, rules)
        self.results = yielded(fused)
        self.output_args = list(args[n_in : n_in + n_out])
        self.scratch_args: list[SSAValue] = list(args[n_in + n_out :])

    def finish(self) -> None:
        self.em.add(loop.YieldOp())

    def _homes(self) -> dict[SSAValue, list[SSAValue]]:
        """Each result value -> the output buffers it is stored into."""
        homes: dict[SSAValue, list[SSAValue]] = {}
        for value, buffer in zip(self.results, self.output_args, strict=True):
            homes.setdefault(value, []).append(buffer)
        return homes

    def build_staged(self, materialized: Sequence[Operation]) -> None:
        """Operand copies and materialised ops first, each by a loop of its own, then one
        loop per result shape."""
        elements = self.elements
        homes = self._homes()
        scratch = iter(self.scratch_args)
        n_materialized = sum(1 for op in materialized for r in op.results if r not in homes)
        elements.copy_buffers = self.scratch_args[n_materialized:]
        for copy, buffer in zip(elements.copies, elements.copy_buffers, strict=True):
            self._copy_stage(copy, buffer)
        for op in materialized:
            buffers = [homes.pop(r, None) or [next(scratch)] for r in op.results]
            if isinstance(op, RANKING_OPS):
                emit_ranking(self.em, op, elements.value_at, buffers)
            else:
                self._stage(shape_of(op.results[0]), [(op.results[0], buffers[0])])
            for result, homes_of_result in zip(op.results, buffers, strict=True):
                elements.buffer_of[result] = homes_of_result[0]
        by_shape: dict[tuple[int, ...], list[tuple[SSAValue, list[SSAValue]]]] = {}
        for value, buffers in homes.items():
            by_shape.setdefault(shape_of(value), []).append((value, buffers))
        for shape, group in by_shape.items():
            concat = len(group) == 1 and isinstance(group[0][0].owner, graph.ConcatOp)
            if concat and not self.elements.row_buffers:
                self._stage_concat(group[0])
            else:
                self._stage(shape, group)

    def _stage_concat(self, stored: _Stored) -> None:
        """A concat result stored by one loop per operand over the operand's own shape, at
        its offset along the axis. One loop over the whole result computes every operand at
        each point and selects one (a clamp and a compare per operand and point, scalar
        code): Swin's patch merging, four strided slices side by side, ran at a third of
        the memory bandwidth."""
        value, buffers = stored
        concat = value.owner
        assert isinstance(concat, graph.ConcatOp)
        axis = rules.normalize_axis(concat.axis.value.data, len(shape_of(value)))
        offset = 0
        for piece in concat.inputs:
            shape = shape_of(piece)
            if 0 not in shape:
                nest = loop.ParallelOp(shape)
                self.em.add(nest)
                with self.em.inside(nest.body.block):
                    local = point_index(nest)
                    at = list(local)
                    at[axis] = self.em.iadd(local[axis], offset)
                    self._write(value, self.elements.value_at(piece, local), buffers, at)
                    self.em.add(loop.YieldOp())
            offset += shape[axis]

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
            for kept in self.elements.row_buffers:
                if shape_of(kept) == shape_of(group[0][0]):
                    self.elements.value_at(kept, index)
            self._store(group, index)
            self.em.add(loop.YieldOp())

    def _store(self, group: Sequence[_Stored], index: tuple[Index, ...]) -> None:
        for value, buffers in group:
            self._write(value, self.elements.value_at(value, index), buffers, index)

    def _write(
        self, value: SSAValue, scalar: SSAValue, buffers: list[SSAValue], index: Sequence[Index]
    ) -> None:
        """`scalar`, an element of `value`, stored at `index` of each of `buffers`."""
        element = tensor_type_of(value).get_element_type()
        stored = self._to_storage(scalar, element)
        indices = [self.em.index_value(i) for i in index]
        for buffer in buffers:
            # A kept value already lies in its own output buffer.
            if self.elements.row_buffers.get(value) is not buffer:
                self.em.add(loop.StoreOp(stored, buffer, indices))

    def build_rows(self, plan: RowPlan) -> None:
        """One loop over the rows; per row its scalars, then its results (see
        row_stitching)."""
        em = self.em
        nest = loop.ParallelOp(plan.rows)
        em.add(nest)
        with em.inside(nest.body.block):
            row = point_index(nest)
            for value in plan.row_values:
                owner = value.owner
                if isinstance(owner, graph.ReduceOp) and owner.input in plan.kept:
                    self._keep_row(plan, owner.input)
                self.elements.value_at(value, plan.row_index(row, value))
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
        if value not in self.elements.row_buffers:
            self.elements.unkept_rows[value] = self.output_args[plan.kept[value]]

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
                value = self.elements.guarded(copy.value, shifted, zero, checked)
            elif copy.layout == "nchw_subsampled":
                n, c, h, w = source
                rows, columns = copy.strides
                at = (n, c, em.imul(h, rows), em.imul(w, columns))
                value = self.elements.value_at(copy.value, at)
            else:
                value = self.elements.value_at(copy.value, source)
            indices = [em.index_value(i) for i in index]
            em.add(loop.StoreOp(self._to_storage(value, element), buffer, indices))
            em.add(loop.YieldOp())

    def _to_storage(self, scalar: SSAValue, element: Attribute) -> SSAValue:
        if scalar.type == loop.signless(element):
            return scalar
        widened = scalar.owner
        if isinstance(widened, arith.ExtFOp) and widened.input.type == element:
            return widened.input  # rounded already (round_result)
        return self.em.emit(arith.TruncFOp(scalar, element))
