"""Per-kernel memory traffic of a function, before or after fusion (an analysis only).

Every `graph.fused` is one kernel; so is every graph op left outside one (before fusion,
each op is its own kernel). A kernel reads its inputs (and constants cloned into it) once
and writes its results once; the values computed and consumed inside it are never stored,
which is what fusion saves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import element_bytes, fusion_kind, tensor_type_of


def elements(value: SSAValue) -> int:
    """Elements of a tensor value (0 for anything else)."""
    if not isinstance(value.type, TensorType):
        return 0
    return math.prod(tensor_type_of(value).get_shape())


def value_bytes(value: SSAValue) -> int:
    """Bytes of a tensor value."""
    count = elements(value)
    return count * element_bytes(tensor_type_of(value).get_element_type()) if count else 0


def _total(values: Iterable[SSAValue]) -> int:
    return sum(value_bytes(v) for v in values)


def _read(value: SSAValue, reader: Operation | None = None) -> int:
    """Bytes a kernel reads of `value`: all of it, except a table only gathered from (an
    embedding), of which it reads at most the rows gathered. `reader`: the one op reading
    it (an unfused op), else its uses inside the kernel."""
    readers = [(reader, reader.operands.index(value))] if reader else []
    readers = readers or [(use.operation, use.index) for use in value.uses]
    gathers = [op for op, index in readers if isinstance(op, graph.GatherOp) and index == 0]
    if not readers or len(gathers) != len(readers):
        return value_bytes(value)
    return min(value_bytes(value), sum(value_bytes(g.result) for g in gathers))


@dataclass(frozen=True)
class KernelStats:
    """What one kernel holds and moves."""

    name: str
    kind: str
    ops: tuple[str, ...]
    bytes_read: int
    bytes_written: int
    bytes_internal: int
    """Bytes of values produced and consumed inside the kernel: never stored."""


def _fused_stats(op: graph.FusedOp) -> KernelStats:
    body = [inner for inner in op.body.block.ops if not isinstance(inner, graph.YieldOp)]
    constants = [inner for inner in body if isinstance(inner, graph.ConstantOp)]
    computing = [inner for inner in body if not isinstance(inner, graph.ConstantOp)]
    terminator = op.body.block.last_op
    assert terminator is not None
    yielded = set(terminator.operands)
    internal = [r for inner in computing for r in inner.results if r not in yielded]
    return KernelStats(
        name=op.sym_name.data,
        kind=op.kind.data.value,
        ops=tuple(inner.name.removeprefix("graph.") for inner in computing),
        bytes_read=sum(_read(a) for a in op.body.block.args)
        + sum(_read(c.result) for c in constants),
        bytes_written=_total(op.results),
        bytes_internal=_total(internal),
    )


def _single_op_stats(op: Operation) -> KernelStats:
    short = op.name.removeprefix("graph.")
    return KernelStats(
        name=short,
        kind=fusion_kind(op).value,
        ops=(short,),
        bytes_read=sum(_read(v, op) for v in dict.fromkeys(op.operands)),
        bytes_written=_total(op.results),
        bytes_internal=0,
    )


def kernel_stats(function: func.FuncOp) -> list[KernelStats]:
    """One entry per kernel of the function, in IR order."""
    stats: list[KernelStats] = []
    for op in function.body.block.ops:
        if isinstance(op, graph.FusedOp):
            stats.append(_fused_stats(op))
        elif op.dialect_name() == "graph" and not isinstance(op, graph.ConstantOp):
            stats.append(_single_op_stats(op))
    return stats


@dataclass(frozen=True)
class Summary:
    """Totals over a function's kernels."""

    kernels: int
    ops: int
    bytes_read: int
    bytes_written: int
    bytes_internal: int

    @staticmethod
    def of(stats: Iterable[KernelStats]) -> Summary:
        items = list(stats)
        return Summary(
            kernels=len(items),
            ops=sum(len(k.ops) for k in items),
            bytes_read=sum(k.bytes_read for k in items),
            bytes_written=sum(k.bytes_written for k in items),
            bytes_internal=sum(k.bytes_internal for k in items),
        )
