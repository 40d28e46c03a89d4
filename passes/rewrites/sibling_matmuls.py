"""Sibling matmuls with constant weights become one GEMM: the Q/K/V projections.

```mlir
%q = graph.matmul %x, %wq        %y = graph.matmul %x, %wqkv     // %wqkv = concat(wq, wk, wv)
%k = graph.matmul %x, %wk   ->   %q = graph.slice %y starts = [0, 0]
%v = graph.matmul %x, %wv        %k = graph.slice %y starts = [0, 256]  ...
```

Matmuls reading one input through weights of one shape [K, N_i] that are constants (a
model's weights) are one matmul with the weights concatenated along N, its result sliced
back; when each is followed by the addition of a constant bias along N (and nothing else
reads the product), the biases are concatenated too and the addition stays in the GEMM's
epilogue. The input is then packed and read once instead of once per projection, one kernel
runs instead of several, and a wider N gives the GEMM's tasks more to share; the slices
are read in place by their consumers (the attention matmuls read Q, K and V through their
head reshapes and transposes). This is what Inductor's frozen-weight `concat_linear` and
XLA's dot merger do. The concatenated weights are computed here once, at compile time.

Siblings that meet again in one elementwise op (SwiGLU's gate and up projections,
`silu(x @ wg) * (x @ wu)`) stay apart: each runs as a GEMM with its epilogue, the second
reading the first's result, which stores one tensor where the merged GEMM would store two
and read them back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind, fusion_kind
from graphfuse.passes.rewrites.folding import constant_value, make_constant

MIN_ROWS_FOR_COPIED_WEIGHTS = 64
"""Weights that are not constants are concatenated on every call; merge them only when the
GEMM has at least this many rows, so the copy (K x N) stays small beside the product's
work (rows x K x N)."""


@dataclass
class _Sibling:
    matmul: graph.MatmulOp
    bias_add: graph.AddOp | None = None
    bias: SSAValue | None = None

    @property
    def output(self) -> SSAValue:
        """The value the merged GEMM replaces: the product, or product + bias."""
        return (self.bias_add or self.matmul).result


def _is_constant(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, graph.ConstantOp)


def _weight_shape(matmul: graph.MatmulOp) -> tuple[int, ...] | None:
    shape = graph.shape_of(matmul.rhs)
    return shape if len(shape) == 2 else None


def _bias_of(sibling: _Sibling) -> tuple[graph.AddOp, SSAValue] | None:
    """The add of a bias along N ([N], or a constant [1, ..., N]) that alone reads the
    product, and the bias."""
    result = sibling.matmul.result
    if not result.has_one_use():
        return None
    add = next(iter(result.uses)).operation
    if not isinstance(add, graph.AddOp) or add.lhs is not result:
        return None
    shape, columns = graph.shape_of(add.rhs), graph.shape_of(result)[-1]
    if shape == (columns,):
        return add, add.rhs
    vector = _is_constant(add.rhs) and shape[-1:] == (columns,) and max(shape[:-1]) == 1
    return (add, add.rhs) if vector and len(shape) <= len(graph.shape_of(result)) else None


def _joined(values: Sequence[SSAValue], rank: int) -> Operation:
    """The values concatenated along their last axis (rank `rank` after reshaping a
    constant [1, ..., N] bias): one constant when all are constants, else a concat."""
    arrays = [constant_value(v) for v in values]
    element: Attribute = graph.tensor_type_of(values[0]).get_element_type()
    if all(a is not None for a in arrays):
        flat = [a.reshape(-1) if rank == 1 else a for a in arrays if a is not None]
        joined = np.concatenate(flat, axis=-1)
        return make_constant(joined, TensorType(element, joined.shape))
    shapes = [graph.shape_of(v) for v in values]
    shape = (*shapes[0][:-1], sum(s[-1] for s in shapes))
    return graph.ConcatOp.create(
        operands=list(values),
        result_types=[TensorType(element, shape)],
        properties={"axis": IntegerAttr(rank - 1, 64)},
    )


def _siblings(op: graph.MatmulOp) -> list[graph.MatmulOp]:
    """Matmuls of op's block reading op's input as their left operand through constant
    [K, N] weights of op's K and element type, in block order."""
    shape = _weight_shape(op)
    block = op.parent_block()
    if shape is None or block is None:
        return []
    element = graph.tensor_type_of(op.rhs).get_element_type()
    found = {
        use.operation
        for use in op.lhs.uses
        if use.index == 0
        and isinstance(use.operation, graph.MatmulOp)
        and use.operation.parent_block() is block
        and (other := _weight_shape(use.operation)) is not None
        and other[0] == shape[0]
        and graph.tensor_type_of(use.operation.rhs).get_element_type() == element
    }
    return sorted(
        (m for m in found if isinstance(m, graph.MatmulOp)),
        key=lambda m: block.get_operation_index(m),
    )


def _elementwise_reach(value: SSAValue) -> set[Operation]:
    """The ops reading `value` through elementwise ops only (its would-be epilogue)."""
    reached: set[Operation] = set()
    pending = [value]
    while pending and len(reached) < _REACH_LIMIT:
        for use in pending.pop().uses:
            op = use.operation
            elementwise = op.dialect_name() == "graph" and fusion_kind(op) in _ELEMENTWISE
            if elementwise and op not in reached:
                reached.add(op)
                pending.extend(op.results)
    return reached


_REACH_LIMIT = 64
_ELEMENTWISE = (FusionKind.ELEMWISE, FusionKind.BROADCAST)


def _meet_again(outputs: Sequence[SSAValue]) -> bool:
    """Whether two of the outputs meet in one elementwise computation (SwiGLU's
    `silu(g) * u`), where each product's epilogue can read the other's result instead."""
    seen: set[Operation] = set()
    for value in outputs:
        reach = _elementwise_reach(value)
        if seen & reach:
            return True
        seen |= reach
    return False


def _slice(value: SSAValue, offset: int, shape: Sequence[int]) -> graph.SliceOp:
    rank = len(shape)
    element: Attribute = graph.tensor_type_of(value).get_element_type()
    return graph.SliceOp.create(
        operands=[value],
        result_types=[TensorType(element, shape)],
        properties={
            "starts": DenseArrayBase.from_list(i64, [0] * (rank - 1) + [offset]),
            "strides": DenseArrayBase.from_list(i64, [1] * rank),
        },
    )


class MergeSiblingMatmuls(RewritePattern):
    """Matmuls sharing their input -> one matmul, sliced (module doc)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MatmulOp, rewriter: PatternRewriter) -> None:
        matmuls = _siblings(op)
        if len(matmuls) < 2 or matmuls[0] is not op:
            return
        rows = math.prod(graph.shape_of(op.lhs)[:-1])
        copied = not all(_is_constant(m.rhs) for m in matmuls)
        if copied and rows < MIN_ROWS_FOR_COPIED_WEIGHTS:
            return
        siblings = [_Sibling(m) for m in matmuls]
        biases = [_bias_of(s) for s in siblings]
        found_all = [b for b in biases if b is not None]
        joinable = all(_is_constant(b) for _, b in found_all) or all(
            len(graph.shape_of(b)) == 1 for _, b in found_all
        )
        if len(found_all) == len(biases) and joinable:
            for sibling, found in zip(siblings, biases, strict=True):
                sibling.bias_add, sibling.bias = found or (None, None)
        if _meet_again([s.output for s in siblings]):
            return
        self._merge(siblings, rewriter)

    @staticmethod
    def _merge(siblings: list[_Sibling], rewriter: PatternRewriter) -> None:
        first = siblings[0].matmul
        element = graph.tensor_type_of(first.rhs).get_element_type()
        weight_op = _joined([s.matmul.rhs for s in siblings], 2)
        columns = graph.shape_of(weight_op.results[0])[-1]
        matmul = graph.MatmulOp.create(
            operands=[first.lhs, weight_op.results[0]],
            result_types=[TensorType(element, (*graph.shape_of(first.result)[:-1], columns))],
        )
        new_ops: list[Operation] = [weight_op, matmul]
        merged: SSAValue = matmul.results[0]
        names = "_".join(s.output.name_hint or "mm" for s in siblings)
        weight_op.results[0].name_hint = f"{names}_weight"
        merged.name_hint = f"{names}_merged"
        if siblings[0].bias is not None:
            bias_op = _joined([s.bias for s in siblings if s.bias is not None], 1)
            add = graph.AddOp(merged, bias_op.results[0])
            add.result.name_hint = merged.name_hint
            new_ops += [bias_op, add]
            merged = add.result
        offset, pieces = 0, list[Operation]()
        for sibling in siblings:
            shape = graph.shape_of(sibling.output)
            pieces.append(_slice(merged, offset, shape))
            pieces[-1].results[0].name_hint = sibling.output.name_hint
            offset += shape[-1]
        rewriter.insert(new_ops + pieces, InsertPoint.before(first))
        for sibling, piece in zip(siblings, pieces, strict=True):
            rewriter.replace_all_uses_with(sibling.output, piece.results[0])
            for dead in (sibling.bias_add, sibling.matmul):
                if dead is not None:
                    rewriter.erase(dead)
