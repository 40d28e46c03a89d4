"""An upstream module split into one module per kernel and one for the entry functions.

Each part is printed, built and cached on its own (kernel_objects.py), so a changed kernel
rebuilds one object, unchanged kernels are found in the cache, and the parts build in
parallel; the linker joins them again. A kernel is a function another function calls
(`@main` calls `@fused_matmul_add`). Its module holds the kernel, made public, the
functions of its own it calls (internal ones: its loop bodies, scf-outline-tasks), and
declarations of what else it refers to: the globals it and they read (external
`memref.global`s, no bytes) and the other functions they call (`func.func private`).
The entry module holds the rest:
the entry functions, a declaration per kernel, and every global, made public so the
kernels' references resolve at link time.

Large constants (`detached`) keep no bytes in any printed module: the entry module declares
them too (their bytes come from the weights object, weights_object.py) or, with
`reserve_detached`, defines them uninitialised, to be copied in after loading.

    module { memref.global @w = dense<...>; func @k() {get_global @w}; func @main() {call @k} }
 -> module { memref.global @w (external); func @k() {get_global @w} }
    module { memref.global public @w = dense<...>; func private @k(); func @main() {call @k} }
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from xdsl.dialects import func, llvm, memref
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Operation, Region

PUBLIC = StringAttr("public")


@dataclass
class SplitModule:
    """The parts of a module, each a module of its own."""

    entry: ModuleOp
    kernels: dict[str, ModuleOp]
    """By kernel name, in the order of the original module."""


def split_kernels(
    module: ModuleOp, detached: Collection[str] = (), reserve_detached: bool = False
) -> SplitModule:
    """The kernels of `module` (left unchanged) as modules of their own, and the entry
    module. The globals named in `detached` lose their bytes (see the module docstring)."""
    symbols: dict[str, Operation] = {}
    for op in module.ops:
        name = _symbol(op)
        if name is not None:
            symbols[name] = op
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    called = {name for f in functions for name in _callees(f)}
    kernels = [f for f in functions if f.sym_name.data in called and f.body.blocks and not _own(f)]
    kernel_names = {f.sym_name.data for f in kernels}
    parts = {
        f.sym_name.data: _kernel_module(module, f, symbols, kernel_names, detached) for f in kernels
    }
    entry = _entry_module(module, kernel_names, detached, reserve_detached)
    return SplitModule(entry, parts)


def _entry_module(
    module: ModuleOp, kernels: set[str], detached: Collection[str], reserve: bool
) -> ModuleOp:
    ops: list[Operation] = []
    for op in module.ops:
        if isinstance(op, func.FuncOp) and _own(op):
            continue  # in the module of the kernel that calls it
        if isinstance(op, func.FuncOp) and op.sym_name.data in kernels:
            ops.append(declare_function(op))
        elif isinstance(op, memref.GlobalOp):
            ops.append(_entry_global(op, op.sym_name.data in detached, reserve))
        else:
            ops.append(op.clone())
    return _module_like(module, ops)


def _symbol(op: Operation) -> str | None:
    name = op.properties.get("sym_name")
    return name.data if isinstance(name, StringAttr) else None


def _own(function: func.FuncOp) -> bool:
    """A function defined with internal linkage: part of the module of the kernel that
    calls it."""
    linkage = function.attributes.get("llvm.linkage")
    return (
        bool(function.body.blocks)
        and isinstance(linkage, llvm.LinkageAttr)
        and (linkage.linkage.data == "internal")
    )


def _callees(function: func.FuncOp) -> list[str]:
    """The functions `function` calls, each once, in the order of first call."""
    names = (op.callee.string_value() for op in function.walk() if isinstance(op, func.CallOp))
    return list(dict.fromkeys(names))


def _globals_read(functions: list[func.FuncOp]) -> list[str]:
    """The globals `functions` refer to, each once, in the order of first reference."""
    names = (
        op.name_.string_value()
        for function in functions
        for op in function.walk()
        if isinstance(op, memref.GetGlobalOp)
    )
    return list(dict.fromkeys(names))


def _with_own_callees(kernel: func.FuncOp, symbols: dict[str, Operation]) -> list[func.FuncOp]:
    """`kernel` and the functions of its own it calls, directly or through them."""
    found = [kernel]
    for function in found:
        for name in _callees(function):
            callee = symbols[name]
            if isinstance(callee, func.FuncOp) and _own(callee) and callee not in found:
                found.append(callee)
    return found


def _kernel_module(
    module: ModuleOp,
    kernel: func.FuncOp,
    symbols: dict[str, Operation],
    kernels: set[str],
    detached: Collection[str],
) -> ModuleOp:
    ops: list[Operation] = []
    functions = _with_own_callees(kernel, symbols)
    for name in _globals_read(functions):
        found = symbols[name]
        assert isinstance(found, memref.GlobalOp), f"@{name} is read as a global"
        ops.append(_kernel_global(found, name in detached))
    for name in dict.fromkeys(n for f in functions for n in _callees(f)):
        callee = symbols[name]
        assert isinstance(callee, func.FuncOp), f"@{name} is called as a function"
        if callee in functions:
            continue
        defined = callee.body.blocks or name in kernels
        ops.append(declare_function(callee) if defined else callee.clone())
    definition = kernel.clone()
    definition.sym_visibility = None  # public: the entry module's object calls it
    ops.append(definition)
    ops.extend(f.clone() for f in functions[1:])
    return _module_like(module, ops)


def _kernel_global(found: memref.GlobalOp, detached: bool) -> memref.GlobalOp:
    """A global a kernel reads: a small constant is copied in, private, so that LLVM sees
    its values and folds them into the vector code, as it did in the whole module (read
    through a declaration, a 32-element constant cost an elementwise kernel 6%); a large
    one, or a variable, is declared and resolved at link time."""
    if detached or found.constant is None or isinstance(found.initial_value, UnitAttr):
        return declare_global(found)
    copy = found.clone()
    copy.sym_visibility = StringAttr("private")
    return copy


def declare_function(function: func.FuncOp) -> func.FuncOp:
    """`function` as a private declaration (its type and argument attributes; no
    `llvm.emit_c_interface`, which would define a wrapper beside the real definition)."""
    return func.FuncOp(
        function.sym_name.data,
        function.function_type,
        Region(),
        "private",
        arg_attrs=function.arg_attrs,
        res_attrs=function.res_attrs,
    )


def declare_global(found: memref.GlobalOp) -> memref.GlobalOp:
    """An external declaration of `found`: `memref.global "public" constant @w : memref<..>`.
    MLIR reads a global without `initial_value` as external; xDSL's GlobalOp definition
    requires the property, so the op is created, not built (it is printed, never verified)."""
    properties: dict[str, Attribute] = {
        "sym_name": found.sym_name,
        "sym_visibility": PUBLIC,
        "type": found.type,
    }
    if found.constant is not None:
        properties["constant"] = found.constant
    if found.alignment is not None:
        properties["alignment"] = found.alignment
    return memref.GlobalOp.create(properties=properties)


def _entry_global(found: memref.GlobalOp, detached: bool, reserve: bool) -> memref.GlobalOp:
    if detached and not reserve:
        return declare_global(found)
    definition = found.clone()
    definition.sym_visibility = PUBLIC
    if detached:
        # Reserved (.bss) and written once the library is loaded: not constant.
        definition.initial_value = UnitAttr()
        definition.constant = None
    return definition


def _module_like(module: ModuleOp, ops: list[Operation]) -> ModuleOp:
    part = ModuleOp(ops)
    part.attributes.update(module.attributes)
    return part
