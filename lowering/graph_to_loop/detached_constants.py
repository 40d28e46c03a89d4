"""Which constants are large enough to leave the printed modules.

A model's weights become `memref.global` constants. Printed, every byte would travel as hex
through mlir-opt, mlir-translate, opt and llc (BERT-base: 440 MB of weights, minutes and
gigabytes in each tool). So the build prints each constant global larger than a limit as a
declaration, and its bytes reach the library as binary data: linked from an object of raw
bytes into a library written out, or copied into reserved space after a library is loaded
(graphfuse.runtime.build). Small constants stay inline, where LLVM may fold them.
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp

EMBEDDED_CONSTANT_LIMIT = 1 << 16
"""Constants up to this many bytes stay in the printed modules."""


def large_constants(module: ModuleOp, limit: int = EMBEDDED_CONSTANT_LIMIT) -> dict[str, bytes]:
    """Each constant global of `module` over `limit` bytes, by name: its bytes (its
    storage layout, as MLIR's dense attribute holds it). The module is not changed."""
    found: dict[str, bytes] = {}
    for op in module.ops:
        if not isinstance(op, memref.GlobalOp) or op.constant is None:
            continue
        value = op.initial_value
        if isinstance(value, DenseIntOrFPElementsAttr) and len(value.data.data) > limit:
            found[op.sym_name.data] = value.data.data
    return found
