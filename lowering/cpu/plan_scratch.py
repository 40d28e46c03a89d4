"""loop-plan-scratch: scratch buffers that are never in use at the same time share memory.

convert-graph-to-loop gives every value that crosses kernels a scratch buffer of its own,
and the CPU rewrites add more (packed GEMM operands, channels-last copies): a MobileNetV2
at 224x224 takes 186 buffers, 63 MB, so each kernel writes its result into memory no
kernel has touched since the last call, twice the last-level cache of a server core. Here
each entry function's scratch buffers get byte offsets in one block, planned from their
live ranges over the function's straight-line sequence of calls, as onnxruntime's and
TFLite's memory planners do: the same model then needs 9 MB, and a kernel's result is read
back from cache by the next one.

A buffer is live from the first top-level op of the function that uses it (a call, a copy,
or a loop holding either) to the last: a kernel writes every scratch buffer it reads in the
same call before reading it, except the arguments its kernel lists in `abi.PERSISTENT`
(operands packed on the first call only), which are live for the whole run and share
nothing. Offsets are assigned greedily by size, largest first, each at the lowest
cache-line-aligned offset that overlaps no buffer live at the same time (TFLite's "greedy
by size" arena planner). The runtimes (graphfuse.runtime.compiled, the C interface) lay the
buffers out at these offsets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FixedBitwidthType,
    IndexType,
    IntegerAttr,
    ModuleOp,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation
from xdsl.passes import ModulePass

from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi

_FOREVER = 1 << 62


def buffer_bytes(typ: Attribute) -> int:
    """Bytes a scratch buffer of memref type `typ` takes (i1 as one byte, as stored)."""
    buffer = loop.memref_type(typ)
    assert buffer is not None, typ
    element = buffer.get_element_type()
    if isinstance(element, IndexType):
        size = 8
    else:
        assert isinstance(element, FixedBitwidthType), element
        size = max(1, element.size)
    return math.prod(buffer.get_shape()) * size


@dataclass(frozen=True)
class LiveRange:
    """One scratch buffer: its size and the first and last top-level op using it."""

    bytes: int
    first: int
    last: int

    @property
    def used(self) -> bool:
        return self.first <= self.last


def live_ranges(function: func.FuncOp) -> list[LiveRange]:
    """Each scratch argument's live range over `function`'s top-level ops."""
    block = function.body.block
    count = _count(function, abi.SCRATCH)
    scratch = list(block.args[len(block.args) - count :])
    position = {op: n for n, op in enumerate(block.ops)}
    persistent = _persistent_arguments(function)
    ranges: list[LiveRange] = []
    for arg in scratch:
        size = buffer_bytes(arg.type)
        if arg in persistent:
            ranges.append(LiveRange(size, -1, _FOREVER))
            continue
        places = [position[_top(block, use.operation)] for use in arg.uses]
        ranges.append(LiveRange(size, min(places, default=0), max(places, default=-1)))
    return ranges


def plan_offsets(ranges: list[LiveRange], alignment: int = abi.SCRATCH_ALIGNMENT) -> list[int]:
    """Byte offsets for `ranges`: buffers live at the same time never overlap, each starts
    on `alignment`; greedy by size, largest first, at the lowest offset that fits."""
    offsets = [0] * len(ranges)
    order = sorted(
        (n for n, r in enumerate(ranges) if r.used and r.bytes > 0),
        key=lambda n: (-ranges[n].bytes, ranges[n].first, n),
    )
    firsts = np.empty(len(order), np.int64)
    lasts = np.empty(len(order), np.int64)
    starts = np.empty(len(order), np.int64)
    ends = np.empty(len(order), np.int64)
    for placed, n in enumerate(order):
        r = ranges[n]
        clash = (firsts[:placed] <= r.last) & (lasts[:placed] >= r.first)
        clashing = starts[:placed][clash].tolist(), ends[:placed][clash].tolist()
        taken = sorted(zip(*clashing, strict=True))
        at = 0
        for start, end in taken:
            if at + r.bytes <= start:
                break
            at = max(at, end + -end % alignment)
        offsets[n] = at
        firsts[placed], lasts[placed] = r.first, r.last
        starts[placed], ends[placed] = at, at + r.bytes
    return offsets


def _top(block: Block, op: Operation) -> Operation:
    """The op of `block` (a function's body) that holds `op`."""
    top = block.find_ancestor_op_in_block(op)
    assert top is not None
    return top


def _persistent_arguments(function: func.FuncOp) -> set[BlockArgument]:
    """The function's arguments some call passes at a position its kernel keeps."""
    module = function.parent_op()
    assert isinstance(module, ModuleOp)
    kept: dict[str, list[int]] = {}
    for kernel in module.ops:
        if isinstance(kernel, loop.KernelOp):
            positions = kernel.attributes.get(abi.PERSISTENT)
            if isinstance(positions, DenseArrayBase):
                kept[kernel.sym_name.data] = [int(p) for p in positions.get_values()]
    found: set[BlockArgument] = set()
    for call in function.walk():
        if isinstance(call, loop.CallOp):
            for position in kept.get(call.callee.string_value(), []):
                buffer = call.buffers[position]
                if isinstance(buffer, BlockArgument):
                    found.add(buffer)
    return found


def _count(function: func.FuncOp, name: str) -> int:
    found = function.attributes.get(name)
    return found.value.data if isinstance(found, IntegerAttr) else 0


@dataclass(frozen=True)
class LoopPlanScratchPass(ModulePass):
    """Byte offsets of each entry function's scratch buffers in one shared block, buffers
    live at different times sharing bytes (the `graphfuse.scratch_offsets` attribute)."""

    name = "loop-plan-scratch"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in op.ops:
            if isinstance(function, func.FuncOp) and _count(function, abi.SCRATCH):
                offsets = plan_offsets(live_ranges(function))
                function.attributes[abi.SCRATCH_OFFSETS] = DenseArrayBase.from_list(i64, offsets)
