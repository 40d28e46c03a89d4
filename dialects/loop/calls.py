"""Queries over a module's `loop.call`s that several lowerings share."""

from __future__ import annotations

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import SSAValue

from graphfuse.dialects.loop import abi
from graphfuse.dialects.loop.ops import CallOp


def constant_arguments(module: ModuleOp) -> dict[str, set[int]]:
    """Per loop kernel, the argument positions every `loop.call` fills with a
    `memref.get_global` (a constant of the module)."""
    found: dict[str, set[int]] = {}
    for call in module.walk():
        if not isinstance(call, CallOp):
            continue
        positions = {
            n for n, b in enumerate(call.buffers) if isinstance(b.owner, memref.GetGlobalOp)
        }
        name = call.callee.string_value()
        found[name] = found[name] & positions if name in found else positions
    return found


def scratch_arguments(module: ModuleOp) -> dict[str, set[int]]:
    """Per loop kernel, the argument positions every `loop.call` fills with a scratch
    buffer of its function (the ABI's trailing SCRATCH arguments): buffers whose contents
    nobody reads before the kernel writes them or after it returns, so a rewrite may lay
    them out as it likes. A kernel never called has none."""
    found: dict[str, set[int]] = {}
    for call in module.walk():
        if not isinstance(call, CallOp):
            continue
        scratch = _scratch_of(call)
        positions = {n for n, b in enumerate(call.buffers) if b in scratch}
        name = call.callee.string_value()
        found[name] = found[name] & positions if name in found else positions
    return found


def _scratch_of(call: CallOp) -> set[SSAValue]:
    """The scratch arguments of the function `call` is in (none outside a function)."""
    function = call.parent_op()
    while function is not None and not isinstance(function, func.FuncOp):
        function = function.parent_op()
    if function is None or function.body.blocks.first is None:
        return set()
    count = function.attributes.get(abi.SCRATCH)
    if not isinstance(count, IntegerAttr) or count.value.data <= 0:
        return set()
    args = function.body.block.args
    return set(args[len(args) - count.value.data :])
