"""Sibling matmuls with constant weights become one GEMM: the Q/K/V projections.

```mlir
%q = graph.matmul %x, %wq        %y = graph.matmul %x, %wqkv     // %wqkv = concat(wq, wk, wv)
%k = graph.matmul %x, %wk   ->   %q = graph.slice %y starts = [0, 0]
%v = graph.matmul %x, %wv        %k = graph.slice %y starts = [0, 256]  ...
```

Matmuls reading one input through weights [K, N_i] that are constants (a model's weights)
are one matmul with the weights concatenated along N, its result sliced back; when each is
followed by the addition of a constant bias along N (and nothing else reads the product),
the biases are concatenated too and the addition stays in the GEMM's epilogue; a sibling
without a bias (Whisper's key projection) adds zeros there, so the others keep theirs in
the epilogue instead of in a kernel of their own after the slices. The input
is then packed and read once instead of once per projection, one kernel runs instead of
several, and a wider N gives the GEMM's tasks more to share; the slices are read in place
by their consumers (the attention matmuls read Q, K and V through their head reshapes and
transposes). This is Inductor's frozen-weight `concat_linear`; the concatenated weights are
computed here once, at compile time. Weights that are function arguments stay apart (XLA's
dot merger would concatenate them): the copy of every weight on every call cost the bundled
transformer block 19% where it saved two kernels.

Siblings that meet again in one elementwise op (SwiGLU's gate and up projections,
`silu(x @ wg) * (x @ wu)`) stay apart: each runs as a GEMM with its epilogue, the second
reading the first's result, which stores one tensor where the merged GEMM would store two
and read them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind, fusion_kind
from graphfuse.passes.rewrites.folding import constant_value, make_constant


@dataclass
class _Sibling:
    matmul: graph.MatmulOp
    bias_add: graph.AddOp | None = None
    bias: NDArray[Any] | None = None

    @property
    def output(self) -> SSAValue:
        """The value the merged GEMM replaces: the product, or product + bias."""
        return (self.bias_add or self.matmul).result


def _is_constant(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, graph.ConstantOp)


def _weight(matmul: graph.MatmulOp) -> SSAValue | None:
    """Its weight: a constant [K, N] right operand, else None. A constant depends on
    nothing, so the merged GEMM can never read a sibling's result (a cycle)."""
    rhs = matmul.rhs
    return rhs if len(graph.shape_of(rhs)) == 2 and _is_constant(rhs) else None


def _bias_of(sibling: _Sibling) -> tuple[graph.AddOp, NDArray[Any]] | None:
    """The add of a constant bias along N ([N] or [1, ..., N]) that alone reads the
    product, and the bias as an [N] vector."""
    result = sibling.matmul.result
    if not result.has_one_use():
        return None
    add = next(iter(result.uses)).operation
    if not isinstance(add, graph.AddOp) or add.lhs is not result:
        return None
    bias, columns = constant_value(add.rhs), graph.shape_of(result)[-1]
    if bias is None or bias.ndim == 0 or bias.ndim > len(graph.shape_of(result)):
        return None
    if bias.shape[-1] != columns or any(size != 1 for size in bias.shape[:-1]):
        return None
    return add, bias.reshape(columns)


def _width(sibling: _Sibling) -> int:
    return graph.shape_of(sibling.matmul.result)[-1]


def _joined(arrays: Sequence[NDArray[Any]], element: Attribute) -> graph.ConstantOp:
    """The constants concatenated along their last axis."""
    joined = np.concatenate(list(arrays), axis=-1)
    return make_constant(joined, TensorType(element, joined.shape))


def _siblings(op: graph.MatmulOp) -> list[graph.MatmulOp]:
    """Matmuls of op's block reading op's input as their left operand through constant
    [K, N] weights of op's K and element type, each weight once, in block order."""
    weight, block = _weight(op), op.parent_block()
    if weight is None or block is None:
        return []
    k, element = graph.shape_of(weight)[0], graph.tensor_type_of(weight).get_element_type()
    found: dict[SSAValue, graph.MatmulOp] = {}
    for use in op.lhs.uses:
        other = use.operation
        if use.index != 0 or not isinstance(other, graph.MatmulOp):
            continue
        rhs = _weight(other)
        if rhs is None or other.parent_block() is not block or rhs in found:
            continue
        if graph.shape_of(rhs)[0] == k and graph.tensor_type_of(rhs).get_element_type() == element:
            found[rhs] = other
    if len(found) < 2:
        return []
    order = {o: i for i, o in enumerate(block.ops)}
    return sorted(found.values(), key=order.__getitem__)


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
        siblings = [_Sibling(m) for m in matmuls]
        biases = [_bias_of(s) for s in siblings]
        for sibling, found in zip(siblings, biases, strict=True):
            if found is not None:
                sibling.bias_add, sibling.bias = found
        if _meet_again([s.output for s in siblings]):
            return
        self._merge(siblings, rewriter)

    @staticmethod
    def _merge(siblings: list[_Sibling], rewriter: PatternRewriter) -> None:
        first = siblings[0].matmul
        element = graph.tensor_type_of(first.rhs).get_element_type()
        weights = [constant_value(s.matmul.rhs) for s in siblings]
        weight_op = _joined([w for w in weights if w is not None], element)
        columns = graph.shape_of(weight_op.result)[-1]
        matmul = graph.MatmulOp.create(
            operands=[first.lhs, weight_op.result],
            result_types=[TensorType(element, (*graph.shape_of(first.result)[:-1], columns))],
        )
        new_ops: list[Operation] = [weight_op, matmul]
        merged: SSAValue = matmul.results[0]
        names = "_".join(s.output.name_hint or "mm" for s in siblings)
        weight_op.result.name_hint = f"{names}_weight"
        merged.name_hint = f"{names}_merged"
        present = [s.bias for s in siblings if s.bias is not None]
        if present:
            biases = [
                s.bias if s.bias is not None else np.zeros(_width(s), present[0].dtype)
                for s in siblings
            ]
            bias_op = _joined(biases, element)
            add = graph.AddOp(merged, bias_op.result)
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
