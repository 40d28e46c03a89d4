"""Splitting an upstream module into one module per kernel and one for the entry."""

from __future__ import annotations

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ModuleOp, UnitAttr

from graphfuse.runtime.kernel_split import split_kernels
from tests.conftest import parse

UPSTREAM = """
"memref.global"() <{sym_name = "w", sym_visibility = "private", type = memref<4xf32>, initial_value = dense<1.0> : tensor<4xf32>, constant, alignment = 64 : i64}> : () -> ()
"memref.global"() <{sym_name = "b", sym_visibility = "private", type = memref<4xf32>, initial_value = dense<2.0> : tensor<4xf32>, constant}> : () -> ()
func.func private @expf(f32) -> f32
func.func private @helper(%x: memref<4xf32>) {
  func.return
}
func.func @scale(%x: memref<4xf32>, %y: memref<4xf32>) {
  %w = memref.get_global @w : memref<4xf32>
  func.call @helper(%w) : (memref<4xf32>) -> ()
  func.return
}
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>) attributes {llvm.emit_c_interface} {
  %b = memref.get_global @b : memref<4xf32>
  func.call @scale(%x, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
"""


def _module() -> ModuleOp:
    return parse(UPSTREAM)


def _functions(module: ModuleOp) -> dict[str, func.FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}


def _globals(module: ModuleOp) -> dict[str, memref.GlobalOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, memref.GlobalOp)}


def test_split_kernels_are_the_called_functions() -> None:
    split = split_kernels(_module())
    assert list(split.kernels) == ["helper", "scale"]


def test_split_kernel_module_declares_what_it_refers_to() -> None:
    scale = split_kernels(_module()).kernels["scale"]
    functions = _functions(scale)
    assert functions["scale"].body.blocks and functions["scale"].sym_visibility is None
    assert not functions["helper"].body.blocks
    assert functions["helper"].sym_visibility is not None
    assert functions["helper"].sym_visibility.data == "private"
    # A small constant is copied in, private, where LLVM sees its values.
    (weight,) = _globals(scale).values()
    assert (
        weight.sym_name.data == "w"
        and weight.initial_value == _globals(_module())["w"].initial_value
    )
    assert weight.sym_visibility is not None and weight.sym_visibility.data == "private"


def test_split_kernel_module_declares_large_constants() -> None:
    scale = split_kernels(_module(), detached={"w"}).kernels["scale"]
    (weight,) = _globals(scale).values()
    assert weight.sym_name.data == "w" and "initial_value" not in weight.properties
    assert weight.sym_visibility.data == "public" and weight.constant is not None
    assert "initial_value" not in str(scale)


def test_split_entry_module_declares_kernels_and_makes_globals_public() -> None:
    entry = split_kernels(_module()).entry
    functions = _functions(entry)
    assert not functions["scale"].body.blocks and not functions["helper"].body.blocks
    assert "llvm.emit_c_interface" not in functions["scale"].attributes
    assert "llvm.emit_c_interface" in functions["main"].attributes
    assert not functions["expf"].body.blocks
    globals_ = _globals(entry)
    assert all(g.sym_visibility.data == "public" for g in globals_.values())
    assert globals_["b"].initial_value != UnitAttr()


def test_split_detached_globals_are_declared_or_reserved() -> None:
    declared = _globals(split_kernels(_module(), detached={"w"}).entry)["w"]
    assert "initial_value" not in declared.properties and declared.constant is not None
    reserved = _globals(split_kernels(_module(), {"w"}, reserve_detached=True).entry)["w"]
    assert reserved.initial_value == UnitAttr() and reserved.constant is None


def test_split_leaves_the_module_unchanged() -> None:
    module = _module()
    before = str(module)
    split_kernels(module, detached={"w"}, reserve_detached=True)
    assert str(module) == before


TASKS = """
"memref.global"() <{sym_name = "w", sym_visibility = "private", type = memref<4xf32>, initial_value = dense<1.0> : tensor<4xf32>, constant}> : () -> ()
func.func private @expf(f32) -> f32
func.func @scale(%x: memref<4xf32>, %y: memref<4xf32>) {
  func.call @scale__task0(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
func.func private @scale__task0(%x: memref<4xf32>, %y: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<"internal">} {
  %w = memref.get_global @w : memref<4xf32>
  %c0 = arith.constant 0 : index
  %v = memref.load %w[%c0] : memref<4xf32>
  %e = func.call @expf(%v) : (f32) -> f32
  func.return
}
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>) attributes {llvm.emit_c_interface} {
  func.call @scale(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
"""


def test_split_keeps_a_kernels_own_functions_in_its_module() -> None:
    split = split_kernels(parse(TASKS))
    assert list(split.kernels) == ["scale"]
    part = split.kernels["scale"]
    functions = _functions(part)
    # Defined there, with what it reads and calls declared beside it.
    assert functions["scale__task0"].body.blocks
    assert not functions["expf"].body.blocks
    assert list(_globals(part)) == ["w"]
    assert "scale__task0" not in _functions(split.entry)
