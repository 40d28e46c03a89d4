"""Entry functions callable with one argument: `void graphfuse_packed_<name>(void **args)`.

`llvm.emit_c_interface` gives `_mlir_ciface_<name>` one pointer per memref (inputs,
results, scratch buffers), but ctypes calls at most 1024 arguments, fewer than a 30-layer
model's entry takes. Next to each C-interface function of the entry module this adds a
wrapper taking one pointer to an array of descriptor pointers, in the same order: it
loads each descriptor (an `!llvm.struct` of allocated and aligned pointers, offset, sizes
and strides), casts it back to its memref (convert-func-to-llvm and
reconcile-unrealized-casts fold the cast into the call's own) and calls the entry.

    func.func @main(%a: memref<4xf32>, %b: memref<4xf32>) attributes {llvm.emit_c_interface}
 -> func.func @graphfuse_packed_main(%args: !llvm.ptr) {
      %0 = llvm.getelementptr %args[0] ...; %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
      %2 = llvm.load %1 : ... -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, ...)> ...
      func.call @main(%m0, %m1)
    }
"""

from __future__ import annotations

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnrealizedConversionCastOp, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.hints import isa

C_INTERFACE = "llvm.emit_c_interface"
PACKED_PREFIX = "graphfuse_packed_"
"""`graphfuse_packed_<name>` is `<name>` taking its memref descriptors through one array."""

_POINTER = llvm.LLVMPointerType()


def packed_name(function: str) -> str:
    return PACKED_PREFIX + function


def descriptor_struct(rank: int) -> llvm.LLVMStructType:
    """The LLVM struct of a rank-`rank` memref descriptor (memref_abi.descriptor_type)."""
    fields: list[Attribute] = [_POINTER, _POINTER, i64]
    if rank:
        fields += [llvm.LLVMArrayType(rank, i64)] * 2
    return llvm.LLVMStructType.from_type_list(fields)


def add_packed_entries(module: ModuleOp) -> None:
    """A packed wrapper after every defined C-interface function of `module`."""
    for function in list(module.ops):
        if isinstance(function, func.FuncOp) and _has_c_interface(function):
            module.body.block.insert_op_after(_packed_wrapper(function), function)


def _has_c_interface(function: func.FuncOp) -> bool:
    return C_INTERFACE in function.attributes and bool(function.body.blocks)


def _packed_wrapper(function: func.FuncOp) -> func.FuncOp:
    block = Block(arg_types=[_POINTER])
    args = block.args[0]
    memrefs = [_load_memref(block, args, i, t) for i, t in enumerate(function.function_type.inputs)]
    block.add_op(func.CallOp(function.sym_name.data, memrefs, []))
    block.add_op(func.ReturnOp())
    return func.FuncOp(packed_name(function.sym_name.data), ((_POINTER,), ()), Region(block))


def _load_memref(block: Block, args: SSAValue, index: int, typ: Attribute) -> SSAValue:
    """Argument #index of the packed array as the memref `typ`."""
    assert isa(typ, MemRefType[Attribute]), f"an entry takes memrefs, got {typ}"
    slot = llvm.GEPOp(args, [index], _POINTER)
    pointer = llvm.LoadOp(slot, _POINTER)
    struct = llvm.LoadOp(pointer, descriptor_struct(typ.get_num_dims()))
    memref = UnrealizedConversionCastOp.get([struct], [typ])
    block.add_ops([slot, pointer, struct, memref])
    return memref.results[0]
