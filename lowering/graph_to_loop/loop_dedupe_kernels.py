"""loop-dedupe-kernels: identical loop kernels become one, called from every site.

A transformer's Q, K and V projections, or the same layer repeated N times, fuse into
kernels that differ only in their names, or in which module constants they read: a bias
small enough to be cloned into its kernel (passes/fusion/outline.py) is read there by
`memref.get_global @name`. Every later stage (GEMM tiling, the upstream conversion,
mlir-opt, opt, llc) would build each copy again; after this pass it builds one. Kernels
are identical when their bodies are structurally equal up to the globals they read (same
ops, attributes, types and use-def structure), their attributes are equal, and their calls
agree on which buffers are module constants. Calls keep their buffers, so each site still
passes its own weights. Where the kernels of a class read different globals at one place,
the kept kernel takes that global as one more argument, after its others, and each call
passes its own; a global they all read stays inside, as it does in a kernel without twins,
where LLVM folds its values into the code (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from graphfuse.dialects import loop
from graphfuse.dialects.loop.calls import constant_arguments

_ANY_GLOBAL = SymbolRefAttr("__graphfuse_any_global")
"""The one symbol every `memref.get_global` of a kernel names in its blind copy."""


def _shape_key(kernel: loop.KernelOp, constants: frozenset[int]) -> Hashable:
    """A cheap key that identical kernels share: argument types, the ops' names and result
    types in order, and which arguments every call fills with a module constant
    (loop-tile-matmul packs those once, so kernels whose calls disagree stay apart). Only
    kernels with one key are compared op by op. The result types are part of the key
    because xDSL's structural equivalence does not compare them: a global of another
    shape, read at the same places, would pass."""
    ops = tuple((op.name, tuple(r.type for r in op.results)) for op in kernel.body.walk())
    return (kernel.arg_types, constants, ops)


def _globals(kernel: loop.KernelOp) -> list[memref.GetGlobalOp]:
    """The kernel's reads of module constants, in walk order (the same order in kernels
    that are structurally equal)."""
    return [op for op in kernel.body.walk() if isinstance(op, memref.GetGlobalOp)]


def _blind(kernel: loop.KernelOp) -> loop.KernelOp:
    """A copy of `kernel` that reads every global as `_ANY_GLOBAL`: two kernels that
    differ only in which constants they read have equal blind copies."""
    copy = kernel.clone()
    for op in _globals(copy):
        op.name_ = _ANY_GLOBAL
    return copy


@dataclass
class _Class:
    """Kernels found identical up to their globals; the first is kept."""

    members: list[loop.KernelOp] = field(default_factory=list[loop.KernelOp])
    first_blind: loop.KernelOp | None = None
    """The first member's blind copy, made when a second kernel of its key is compared
    (most kernels have a key of their own, and a copy is a clone of the whole kernel)."""

    def admits(self, kernel: loop.KernelOp, blind: loop.KernelOp) -> bool:
        if kernel.attributes != self.members[0].attributes:
            return False
        if self.first_blind is None:
            self.first_blind = _blind(self.members[0])
        return blind.body.is_structurally_equivalent(self.first_blind.body)

    def varying(self) -> list[int]:
        """Places (in `_globals` order) where members read different globals."""
        reads = [[op.name_ for op in _globals(k)] for k in self.members]
        return [p for p in range(len(reads[0])) if len({r[p] for r in reads}) > 1]


def _parameterise(kernel: loop.KernelOp, places: Sequence[int]) -> None:
    """The globals `kernel` reads at `places` become new arguments, after its others."""
    block = kernel.body.block
    reads = _globals(kernel)
    for place in places:
        read = reads[place]
        read.memref.replace_all_uses_with(block.insert_arg(read.memref.type, len(block.args)))
        read.detach()
        read.erase()


@dataclass
class _Plan:
    """What calls change: the kernel each erased one maps to, and the globals each
    kernel's calls now pass (symbol and type, in argument order)."""

    replaced: dict[str, str] = field(default_factory=dict[str, str])
    passed: dict[str, list[tuple[SymbolRefAttr, Attribute]]] = field(
        default_factory=dict[str, list[tuple[SymbolRefAttr, Attribute]]]
    )

    def merge(self, module: ModuleOp, group: _Class) -> None:
        kept, *others = group.members
        places = group.varying()
        for member in group.members:
            reads = _globals(member)
            self.passed[member.sym_name.data] = [
                (reads[p].name_, reads[p].memref.type) for p in places
            ]
        _parameterise(kept, places)
        for other in others:
            self.replaced[other.sym_name.data] = kept.sym_name.data
            module.body.block.erase_op(other)

    def rewrite(self, call: loop.CallOp) -> None:
        name = call.callee.string_value()
        passed = self.passed.get(name, [])
        reads = [memref.GetGlobalOp(symbol, typ) for symbol, typ in passed]
        block = call.parent_block()
        assert block is not None
        for read in reads:
            block.insert_op_before(read, call)
        buffers = [*call.buffers, *(read.memref for read in reads)]
        Rewriter.replace_op(call, loop.CallOp(self.replaced.get(name, name), buffers))


def _classes(module: ModuleOp) -> list[_Class]:
    """The module's kernels in classes of identical ones, in module order."""
    by_key: dict[Hashable, list[_Class]] = {}
    found: list[_Class] = []
    constants = constant_arguments(module)
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        positions = frozenset(constants.get(kernel.sym_name.data, set()))
        candidates = by_key.setdefault(_shape_key(kernel, positions), [])
        blind = _blind(kernel) if candidates else None
        group = next((c for c in candidates if blind is not None and c.admits(kernel, blind)), None)
        if group is None:
            group = _Class(first_blind=blind)
            candidates.append(group)
            found.append(group)
        group.members.append(kernel)
    return found


def dedupe_kernels(module: ModuleOp) -> dict[str, str]:
    """Erases every kernel identical to an earlier one (up to its globals); returns the
    erased names, each mapped to the kept kernel that now serves its calls."""
    plan = _Plan()
    for group in _classes(module):
        if len(group.members) > 1:
            plan.merge(module, group)
    changed = plan.replaced.keys() | {n for n, p in plan.passed.items() if p}
    for call in [op for op in module.walk() if isinstance(op, loop.CallOp)]:
        if call.callee.string_value() in changed:
            plan.rewrite(call)
    return plan.replaced


@dataclass(frozen=True)
class LoopDedupeKernelsPass(ModulePass):
    """Merge structurally identical `loop.kernel`s: calls to `@fused_matmul_add_1` become
    calls to `@fused_matmul_add` when the two bodies are the same, or differ only in the
    constants they read, which each call then passes:

      loop.kernel @k {^bb0(%x, %y): %b = memref.get_global @b0 ...}
      loop.kernel @k_1 {^bb0(%x, %y): %b = memref.get_global @b1 ...}
      loop.call @k(%p, %q)
      loop.call @k_1(%p, %r)
    becomes
      loop.kernel @k {^bb0(%x, %y, %b): ...}
      %0 = memref.get_global @b0
      loop.call @k(%p, %q, %0)
      %1 = memref.get_global @b1
      loop.call @k(%p, %r, %1)
    """

    name = "loop-dedupe-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dedupe_kernels(op)
