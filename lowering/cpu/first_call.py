"""Work a kernel does on its first call only, into scratch buffers kept between calls.

A packed or reordered copy of an operand that reads nothing but constants (a model's
weights) is the same on every call: loop-tile-matmul's packed GEMM operands and the
channels-last weights of a depthwise convolution are made once. A one-byte scratch flag,
zero as the caller allocates it, says whether they have been; the kernel lists the flag and
the kept buffers in `abi.PERSISTENT`, so loop-plan-scratch never lets another buffer share
their bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DenseArrayBase, IntegerType, MemRefType, i64
from xdsl.ir import Block, BlockArgument, Region

from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi
from graphfuse.dialects.loop.emitter import BlockBuilder

B = TypeVar("B", bound=BlockBuilder)


def on_first_call(em: B, entry: Block, fill: Callable[[B], object]) -> BlockArgument:
    """Emits into `em` what `fill` builds, guarded to run on the kernel's first call only
    (entry: the kernel's block, which gets the flag as a new scratch argument); returns the
    flag."""
    i8 = IntegerType(8)
    flag = entry.insert_arg(MemRefType(i8, [1]), len(entry.args))
    zero = em.index(0)
    done = em.emit(memref.LoadOp.get(flag, [zero]))
    fresh = em.emit(arith.CmpiOp(done, em.constant(0, i8), "eq"))
    then = type(em)()
    fill(then)
    then.add(memref.StoreOp.get(then.constant(1, i8), flag, [then.index(0)]))
    then.add(scf.YieldOp())
    em.add(scf.IfOp(fresh, [], Region(then.block)))
    return flag


def keep_between_calls(kernel: loop.KernelOp, kept: Sequence[BlockArgument]) -> None:
    """Lists `kept` (arguments of `kernel`) in its `abi.PERSISTENT`."""
    old = kernel.attributes.get(abi.PERSISTENT)
    known = [int(p) for p in old.get_values()] if isinstance(old, DenseArrayBase) else []
    positions = sorted({*known, *(arg.index for arg in kept)})
    kernel.attributes[abi.PERSISTENT] = DenseArrayBase.from_list(i64, positions)
