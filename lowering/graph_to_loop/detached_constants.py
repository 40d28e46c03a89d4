"""Large constants leave the library: their bytes are written in after it is loaded.

A model's weights become `memref.global` constants. Kept in the module, every byte travels
as text through mlir-opt, mlir-translate, opt and llc (BERT-base: 440 MB of weights) and
ends up in the shared library. Instead, each constant global larger than a limit becomes
an uninitialised public global: the library only reserves its space (in .bss), and the
runtime copies the bytes in after loading it (`CompiledFunction`). Small constants stay
inline, where LLVM may fold them.

    "memref.global"() <{sym_name = "w", ..., initial_value = dense<"0x...">, constant}>
 -> "memref.global"() <{sym_name = "w", ..., initial_value, sym_visibility = "public"}>
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, UnitAttr

EMBEDDED_CONSTANT_LIMIT = 1 << 16
"""Constants up to this many bytes stay in the library."""


def detach_large_constants(
    module: ModuleOp, limit: int = EMBEDDED_CONSTANT_LIMIT
) -> dict[str, bytes]:
    """Make every constant global over `limit` bytes uninitialised and public; return
    each one's bytes (its storage layout, as MLIR's dense attribute holds it) by name."""
    detached: dict[str, bytes] = {}
    for op in module.walk():
        if not isinstance(op, memref.GlobalOp):
            continue
        value = op.initial_value
        if not isinstance(value, DenseIntOrFPElementsAttr) or len(value.data.data) <= limit:
            continue
        detached[op.sym_name.data] = value.data.data
        op.initial_value = UnitAttr()
        op.constant = None
        op.sym_visibility = StringAttr("public")
    return detached
