"""Timers around every kernel call of an entry function, for the profiling build only.

After convert-loop-to-upstream the entry calls each kernel through `func.call`. This adds
calls to the profiling runtime (profile_runtime.c) around each, numbered by call site in
IR order, and around the whole body:

    func.func @main(...) { func.call @k(%a, %b) ; func.return }
 -> func.func @main(...) {
      func.call @graphfuse_profile_run_begin()
      %s = arith.constant 0 : i32
      func.call @graphfuse_profile_enter(%s) ; func.call @k(%a, %b)
      func.call @graphfuse_profile_exit(%s)
      func.call @graphfuse_profile_run_end() ; func.return }

Only the entry function changes, so when graphfuse.runtime.build splits the module, every
kernel's module (and object, and cache entry) is the one the normal build has, and the
entry module's text, hence its object and the library, differ from the normal build's.
"""

from __future__ import annotations

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Operation

from graphfuse.profiling.runtime import PREFIX

ENTER, EXIT = PREFIX + "enter", PREFIX + "exit"
RUN_BEGIN, RUN_END = PREFIX + "run_begin", PREFIX + "run_end"


def kernel_calls(module: ModuleOp, entry: str) -> list[func.CallOp]:
    """The calls of `entry` to functions `module` defines (its kernels), in IR order."""
    defined = {
        op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks
    }
    function = _function(module, entry)
    return [
        op
        for op in function.body.walk()
        if isinstance(op, func.CallOp) and op.callee.string_value() in defined
    ]


def instrument(module: ModuleOp, entry: str) -> list[str]:
    """Add the timers to `entry` in place; returns the callee of each call site."""
    calls = kernel_calls(module, entry)
    for site, call in enumerate(calls):
        block = call.parent_block()
        assert block is not None
        number = arith.ConstantOp(IntegerAttr(site, i32))
        block.insert_ops_before([number, func.CallOp(ENTER, [number], [])], call)
        block.insert_op_after(func.CallOp(EXIT, [number], []), call)
    function = _function(module, entry)
    first = function.body.block.first_op
    assert first is not None, f"@{entry} has an empty body"
    function.body.block.insert_op_before(func.CallOp(RUN_BEGIN, [], []), first)
    for op in list(function.body.walk()):
        if isinstance(op, func.ReturnOp):
            _before(op, func.CallOp(RUN_END, [], []))
    declarations = [
        func.FuncOp.external(ENTER, [i32], []),
        func.FuncOp.external(EXIT, [i32], []),
        func.FuncOp.external(RUN_BEGIN, [], []),
        func.FuncOp.external(RUN_END, [], []),
    ]
    module.body.block.insert_ops_before(declarations, function)
    return [call.callee.string_value() for call in calls]


def _before(anchor: Operation, op: Operation) -> None:
    block = anchor.parent_block()
    assert block is not None
    block.insert_op_before(op, anchor)


def _function(module: ModuleOp, name: str) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    raise AssertionError(f"the lowered module has no @{name}")
