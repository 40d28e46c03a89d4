"""Which constants leave the printed modules: large ones, and ones xDSL misprints.

A model's weights become `memref.global` constants. Printed, every byte would travel as hex
through mlir-opt, mlir-translate, opt and llc (BERT-base: 440 MB of weights, minutes and
gigabytes in each tool). So the build prints each constant global larger than a limit as a
declaration, and its bytes reach the library as binary data: linked from an object of raw
bytes into a library written out, or copied into reserved space after a library is loaded
(graphfuse.runtime.build). Small constants stay inline, where LLVM may fold them, unless
xDSL would print them as other bytes: zeros of both signs, which its splat test (comparing
values, -0.0 == 0.0) prints as a splat of the first.
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import AnyFloat, DenseIntOrFPElementsAttr, ModuleOp

from graphfuse.dialects.graph.elements import dense_to_numpy, same_bits

EMBEDDED_CONSTANT_LIMIT = 1 << 16
"""Constants up to this many bytes stay in the printed modules."""


def large_constants(module: ModuleOp, limit: int = EMBEDDED_CONSTANT_LIMIT) -> dict[str, bytes]:
    """Each constant global of `module` over `limit` bytes, or that xDSL would print as
    other bytes, by name: its bytes (its storage layout, as MLIR's dense attribute holds
    it). The module is not changed."""
    found: dict[str, bytes] = {}
    for op in module.ops:
        if not isinstance(op, memref.GlobalOp) or op.constant is None:
            continue
        value = op.initial_value
        if not isinstance(value, DenseIntOrFPElementsAttr):
            continue
        if len(value.data.data) > limit or _printed_as_splat(value):
            found[op.sym_name.data] = value.data.data
    return found


def _printed_as_splat(value: DenseIntOrFPElementsAttr) -> bool:
    """Zeros of both signs: xDSL prints them as a splat of the first element, so an MLIR
    tool reading the text would build a global of other bytes."""
    if not isinstance(value.get_element_type(), AnyFloat):
        return False
    array = dense_to_numpy(value)
    return not array.any() and not same_bits(array)
