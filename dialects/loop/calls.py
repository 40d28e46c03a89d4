"""Queries over a module's `loop.call`s that several lowerings share."""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import ModuleOp

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
