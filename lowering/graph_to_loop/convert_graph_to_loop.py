"""convert-graph-to-loop: every `graph.fused` kernel becomes a `loop.kernel`; each function
becomes calls of those kernels on buffers.

A function `(tensors) -> (tensors)` becomes `(inputs, outputs, scratch) -> ()` on memrefs,
in destination-passing style: the caller passes a buffer for every result, and one scratch
buffer for every value that crosses kernels without being returned (and for values a kernel
materialises inside itself), so running the function allocates nothing. The attributes
`graphfuse.outputs` and `graphfuse.scratch` say how many buffers of each kind it takes.
Ops outside kernels other than constants are refused: run graph-fuse first (a call between
functions is refused too: graph-fuse leaves it outside any kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException
from xdsl.utils.hints import isa

from graphfuse.dialects import graph, loop
from graphfuse.dialects.graph import functions
from graphfuse.dialects.loop import abi
from graphfuse.lowering.graph_to_loop.buffers import GlobalPool, memref_of
from graphfuse.lowering.graph_to_loop.kernel_lowering import kernel_signature, lower_kernel
from graphfuse.lowering.graph_to_loop.operand_layouts import OPERAND_COPIES


def _call_problem(call: func.CallOp, caller: str) -> str:
    """Why a call cannot be lowered: graph-fuse leaves calls between kernels, and kernels
    are all this pass makes (running graph-fuse again would not help)."""
    callee = SymbolTable.lookup_symbol(call, call.callee)
    name = call.callee.string_value()
    if isinstance(callee, func.FuncOp) and callee.is_declaration:
        return (
            f"'func.call' in @{caller} calls @{name}, a declaration without a body: "
            "graphfuse compiles functions of graph ops (give it a body of graph ops)"
        )
    return (
        f"'func.call' in @{caller} calls @{name}: calls between graph functions are not "
        f"compiled yet (inline @{name} into @{caller})"
    )


@dataclass(frozen=True)
class ConvertGraphToLoopPass(ModulePass):
    """Lower fused graph functions to loop kernels called on buffers.

      func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
        %k = graph.fused "fused_exp"(%x) kind = elemwise
            : (tensor<8xf32>) -> tensor<8xf32> {...}
        func.return %k : tensor<8xf32>
      }
    becomes
      loop.kernel @fused_exp {...}
      func.func @f(%x: memref<8xf32>, %out: memref<8xf32>)
          attributes {graphfuse.outputs = 1 ...} {
        loop.call @fused_exp(%x, %out) : memref<8xf32>, memref<8xf32>
        func.return
      }
    """

    name = "convert-graph-to-loop"

    operand_copies: bool = OPERAND_COPIES
    """Copy matmul and convolution operands into reduction-contiguous layouts first (see
    operand_layouts): right for a CPU core walking a reduction, wrong for a GPU, whose
    neighbouring threads already read neighbouring elements of the original layout."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pool = GlobalPool()
        names = _KernelNames(op)
        for function in list(functions(op)):
            kernels = _FunctionLowering(function, pool, names, self.operand_copies).run()
            for kernel in kernels:
                op.body.block.insert_op_before(kernel, function)
        for global_op in reversed(pool.ops):
            first = op.body.block.first_op
            assert first is not None
            op.body.block.insert_op_before(global_op, first)


class _KernelNames:
    """Unique kernel symbols: a name already taken (by a kernel or any other symbol of the
    module) gets the first free `_1`, `_2`, ... suffix."""

    def __init__(self, module: ModuleOp) -> None:
        self.taken: set[str] = set()
        for op in module.ops:
            name = op.properties.get("sym_name") or op.attributes.get("sym_name")
            if isinstance(name, StringAttr):
                self.taken.add(name.data)

    def fresh(self, name: str) -> str:
        candidate, count = name, 0
        while candidate in self.taken:
            count += 1
            candidate = f"{name}_{count}"
        self.taken.add(candidate)
        return candidate


class _FunctionLowering:
    def __init__(
        self, function: func.FuncOp, pool: GlobalPool, names: _KernelNames, operand_copies: bool
    ):
        self.function = function
        self.pool = pool
        self.names = names
        self.operand_copies = operand_copies
        self.buffers: dict[SSAValue, SSAValue] = {}
        self.scratch_types: list[Attribute] = []
        self.scratch_uses: list[tuple[SSAValue, int]] = []

    def run(self) -> list[loop.KernelOp]:
        function = self.function
        old = function.body.block
        returned = old.last_op
        if not isinstance(returned, func.ReturnOp):
            raise PassFailedException(f"@{function.sym_name.data} does not end with func.return")
        input_types = [_buffer_type(a.type, function) for a in old.args]
        output_types = [_buffer_type(v.type, function) for v in returned.arguments]
        new = Block(arg_types=[*input_types, *output_types])
        self.block = new
        self.buffers.update(zip(old.args, new.args[: len(input_types)], strict=True))
        self.outputs = list(new.args[len(input_types) :])
        self.home: dict[SSAValue, SSAValue] = {}
        for value, buffer in zip(returned.arguments, self.outputs, strict=True):
            self.home.setdefault(value, buffer)
        kernels = [self._lower(op) for op in list(old.ops)[:-1]]
        self._copy_results(returned.arguments)
        new.add_op(func.ReturnOp())
        self._finish(new, input_types, output_types)
        return [k for k in kernels if k is not None]

    def _lower(self, op: object) -> loop.KernelOp | None:
        if isinstance(op, graph.ConstantOp):
            name, typ = self.pool.add(op.value)
            get = memref.GetGlobalOp(name, typ)
            self.block.add_op(get)
            self.buffers[op.result] = get.memref
            return None
        if isinstance(op, graph.FusedOp):
            return self._lower_kernel(op)
        caller = self.function.sym_name.data
        if isinstance(op, func.CallOp):
            raise PassFailedException(_call_problem(op, caller))
        name = getattr(op, "name", type(op).__name__)
        raise PassFailedException(
            f"'{name}' in @{caller} is outside any graph.fused kernel; "
            "run graph-fuse before convert-graph-to-loop"
        )

    def _lower_kernel(self, fused: graph.FusedOp) -> loop.KernelOp:
        name = self.names.fresh(fused.sym_name.data)
        kernel = lower_kernel(fused, name, self.pool, self.operand_copies)
        signature = kernel_signature(fused, self.operand_copies)
        operands = [self.buffers[v] for v in fused.inputs]
        for result in fused.outputs:
            buffer = self.home.get(result) or self._scratch(memref_of(result))
            self.buffers[result] = buffer
            operands.append(buffer)
        operands += [self._scratch(t) for t in signature.scratch]
        self.block.add_op(loop.CallOp(kernel.sym_name.data, operands))
        return kernel

    def _scratch(self, typ: Attribute) -> SSAValue:
        arg = self.block.insert_arg(typ, len(self.block.args))
        self.scratch_types.append(typ)
        return arg

    def _copy_results(self, returned: tuple[SSAValue, ...] | list[SSAValue]) -> None:
        """Results the kernels did not write in place (arguments, constants, repeats)."""
        for value, buffer in zip(returned, self.outputs, strict=True):
            source = self.buffers[value]
            if source is not buffer:
                self.block.add_op(memref.CopyOp(source, buffer))

    def _finish(self, new: Block, inputs: list[Attribute], outputs: list[Attribute]) -> None:
        function = self.function
        old = function.body.block
        # The buffers keep the tensors' names (a C header names its arguments by them).
        for tensor, buffer in zip(old.args, new.args, strict=False):
            buffer.name_hint = tensor.name_hint
        function.body.add_block(new)
        function.body.detach_block(old)
        old.drop_all_references()
        old.erase(safe_erase=False)
        function.function_type = FunctionType.from_lists(
            [*inputs, *outputs, *self.scratch_types], []
        )
        # Argument attributes stay on the inputs (the output and scratch buffers get
        # none); the results are buffers now, so their attributes go.
        if function.arg_attrs is not None:
            kept = list(function.arg_attrs.data[: len(inputs)])
            added = len(outputs) + len(self.scratch_types) + len(inputs) - len(kept)
            function.arg_attrs = ArrayAttr([*kept, *[DictionaryAttr({})] * added])
        function.res_attrs = None
        function.attributes[abi.OUTPUTS] = IntegerAttr(len(outputs), i64)
        function.attributes[abi.SCRATCH] = IntegerAttr(len(self.scratch_types), i64)


def _buffer_type(typ: Attribute, function: func.FuncOp) -> Attribute:
    if not isa(typ, TensorType[Attribute]):
        raise PassFailedException(
            f"@{function.sym_name.data} takes or returns {typ}; graph functions use ranked tensors"
        )
    return memref_of(typ)
