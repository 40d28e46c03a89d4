"""loop-dedupe-kernels: identical loop kernels become one, called from every site.

A transformer's Q, K and V projections, or the same layer repeated N times, fuse into
kernels that differ only in their names. Every later stage (GEMM tiling, the upstream
conversion, mlir-opt, opt, llc) would build each copy again; after this pass it builds one.
Kernels are identical when their bodies are structurally equal (same ops, attributes, types
and use-def structure; constants they read by symbol must be the same symbol) and their
attributes are equal, and their calls agree on which buffers are module constants. Calls
keep their buffers, so each site still passes its own weights.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.passes import ModulePass

from graphfuse.dialects import loop
from graphfuse.dialects.loop.calls import constant_arguments


def _shape_key(kernel: loop.KernelOp, constants: frozenset[int]) -> Hashable:
    """A cheap key that identical kernels share: argument types, the ops' names in order,
    and which arguments every call fills with a module constant (loop-tile-matmul packs
    those once, so kernels whose calls disagree stay apart). Only kernels with one key are
    compared op by op."""
    return (kernel.arg_types, constants, tuple(op.name for op in kernel.body.walk()))


def _same(kernel: loop.KernelOp, other: loop.KernelOp) -> bool:
    return kernel.attributes == other.attributes and kernel.body.is_structurally_equivalent(
        other.body
    )


def dedupe_kernels(module: ModuleOp) -> dict[str, str]:
    """Erases every kernel identical to an earlier one; returns the erased names, each
    mapped to the kept kernel that now serves its calls."""
    kept: dict[Hashable, list[loop.KernelOp]] = {}
    replaced: dict[str, str] = {}
    constants = constant_arguments(module)
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        positions = frozenset(constants.get(kernel.sym_name.data, set()))
        candidates = kept.setdefault(_shape_key(kernel, positions), [])
        same = next((k for k in candidates if _same(k, kernel)), None)
        if same is None:
            candidates.append(kernel)
            continue
        replaced[kernel.sym_name.data] = same.sym_name.data
        module.body.block.erase_op(kernel)
    if replaced:
        for call in module.walk():
            if isinstance(call, loop.CallOp) and call.callee.string_value() in replaced:
                call.callee = SymbolRefAttr(replaced[call.callee.string_value()])
    return replaced


@dataclass(frozen=True)
class LoopDedupeKernelsPass(ModulePass):
    """Merge structurally identical `loop.kernel`s: calls to `@fused_matmul_add_1` become
    calls to `@fused_matmul_add` when the two bodies are the same."""

    name = "loop-dedupe-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dedupe_kernels(op)
