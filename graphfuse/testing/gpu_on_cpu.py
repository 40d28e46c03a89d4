"""Running a GPU build on the CPU, so CI (which has no GPU) checks what convert-loop-to-gpu
makes: its mapping of points and rows to blocks and threads, bounds checks, reductions
through gpu.all_reduce and barriers.

Each `gpu.launch_func` becomes a call of a CPU function that runs the kernel's body for
every block and every thread of the launch, as the GPU would. A kernel's top level is a
straight line whose only synchronisation is `gpu.all_reduce` and `gpu.barrier` (that is
how convert-loop-to-gpu emits them), so it is cut at those points into segments; each
segment runs for all threads of a block before the next starts. A value one segment makes
and a later one uses is kept per thread in a stack buffer; an all-reduce combines the
threads' values with the op's own body, in thread order, and hands every thread the result.
What this does not check is MLIR's lowering of the gpu ops to NVVM and PTX: ptxas checks
that the PTX is valid, and a GPU runs it (tests/lowering/gpu/test_nvptx.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import Rewriter

from graphfuse.compiler import CompileOptions, _entry, fuse, load, to_gpu
from graphfuse.lowering.loop_to_upstream.loop_indexing import index
from graphfuse.runtime.build import CpuTarget, build_shared_library
from graphfuse.runtime.compiled import CompiledFunction

_SYNC = (gpu.AllReduceOp, gpu.BarrierOp)
_IDS = (gpu.ThreadIdOp, gpu.BlockIdOp)


def _top(op: Operation, body: Block) -> Operation:
    while op.parent_block() is not body:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


class _Emulation:
    """One launch of a gpu.func as a CPU function."""

    def __init__(self, kernel: gpu.FuncOp, grid: int, block: int):
        self.body = kernel.body.block
        self.grid, self.block = grid, block
        ops = [op for op in self.body.ops if not isinstance(op, gpu.ReturnOp)]
        self.segments: list[list[Operation]] = [[]]
        self.syncs: list[Operation] = []
        for op in ops:
            if isinstance(op, _SYNC):
                self.syncs.append(op)
                self.segments.append([])
            else:
                self.segments[-1].append(op)
        where = {op: k for k, segment in enumerate(self.segments) for op in segment}
        where.update({op: -1 for op in self.syncs})
        self.crossing = [
            result
            for k, segment in enumerate(self.segments)
            for op in segment
            if not isinstance(op, _IDS)
            for result in op.results
            if any(where[_top(use.operation, self.body)] != k for use in result.uses)
        ]

    def function(self, name: str) -> func.FuncOp:
        entry = Block(arg_types=[a.type for a in self.body.args])
        uniform: dict[SSAValue, SSAValue] = dict(zip(self.body.args, entry.args, strict=True))
        c0, c1 = index(0), index(1)
        grid, block = index(self.grid), index(self.block)
        entry.add_ops([c0, c1, grid, block])
        self.buffers: dict[SSAValue, SSAValue] = {}
        for value in self.crossing:
            alloca = memref.AllocaOp.get(value.type, shape=[self.block])
            entry.add_op(alloca)
            self.buffers[value] = alloca.memref
        blocks = Block(arg_types=[IndexType()])
        block_id = blocks.args[0]
        for k, segment in enumerate(self.segments):
            blocks.add_op(self._segment(segment, uniform, block_id, (c0, c1, block)))
            if k < len(self.syncs) and isinstance(self.syncs[k], gpu.AllReduceOp):
                reduce = self.syncs[k]
                assert isinstance(reduce, gpu.AllReduceOp)
                uniform[reduce.result] = self._all_reduce(reduce, blocks, c0, c1, block)
        blocks.add_op(scf.YieldOp())
        entry.add_ops([scf.ForOp(c0, grid, c1, [], blocks), func.ReturnOp()])
        types = [a.type for a in entry.args]
        return func.FuncOp(name, (types, []), Region(entry), visibility="private")

    def _segment(
        self,
        segment: Sequence[Operation],
        uniform: dict[SSAValue, SSAValue],
        block_id: SSAValue,
        bounds: tuple[Operation, Operation, Operation],
    ) -> scf.ForOp:
        threads = Block(arg_types=[IndexType()])
        thread_id = threads.args[0]
        local = dict(uniform)
        for op in self.body.ops:
            if isinstance(op, _IDS):
                local[op.results[0]] = thread_id if isinstance(op, gpu.ThreadIdOp) else block_id
        for value, buffer in self.buffers.items():
            load = memref.LoadOp.get(buffer, [thread_id])
            threads.add_op(load)
            local[value] = load.res
        for op in segment:
            if isinstance(op, _IDS):
                continue
            threads.add_op(op.clone(value_mapper=local))
            for result in op.results:
                if result in self.buffers:
                    store = memref.StoreOp.get(local[result], self.buffers[result], [thread_id])
                    threads.add_op(store)
        threads.add_op(scf.YieldOp())
        c0, c1, block = bounds
        return scf.ForOp(c0, block, c1, [], threads)

    def _all_reduce(
        self, reduce: gpu.AllReduceOp, target: Block, c0: Operation, c1: Operation, block: Operation
    ) -> SSAValue:
        buffer = self.buffers[reduce.operand]
        first = memref.LoadOp.get(buffer, [c0])
        body = Block(arg_types=[IndexType(), reduce.result.type])
        value = memref.LoadOp.get(buffer, [body.args[0]])
        body.add_op(value)
        combine = reduce.body.block
        mapping: dict[SSAValue, SSAValue] = {
            combine.args[0]: body.args[1],
            combine.args[1]: value.res,
        }
        for op in combine.ops:
            if isinstance(op, gpu.YieldOp):
                body.add_op(scf.YieldOp(mapping[op.values[0]]))
            else:
                body.add_op(op.clone(value_mapper=mapping))
        combined = scf.ForOp(c1, block, c1, [first.res], body)
        target.add_ops([first, combined])
        return combined.results[0]


def emulate_on_cpu(module: ModuleOp, c_interface: bool = False) -> dict[tuple[str, str], str]:
    """Rewrite a GPU build in place into CPU code; returns the CPU function standing in
    for each (gpu.module, gpu.func) launched. With `c_interface` those functions are
    public and callable from C (for a fake driver to launch)."""
    emulated: dict[tuple[str, str], str] = {}
    kernels = {
        (m.sym_name.data, f.sym_name.data): f
        for m in module.ops
        if isinstance(m, gpu.ModuleOp)
        for f in m.body.block.ops
        if isinstance(f, gpu.FuncOp)
    }
    launches = [op for op in module.walk() if isinstance(op, gpu.LaunchFuncOp)]
    for number, launch in enumerate(launches):
        symbol = launch.kernel
        kernel = kernels[(symbol.root_reference.data, symbol.nested_references.data[0].data)]
        grid, block = (_constant(v) for v in (launch.gridSizeX, launch.blockSizeX))
        name = f"__emulated_{number}"
        function = _Emulation(kernel, grid, block).function(name)
        if c_interface:
            function.sym_visibility = None
            function.attributes["llvm.emit_c_interface"] = UnitAttr()
        module.body.block.add_op(function)
        emulated[(symbol.root_reference.data, symbol.nested_references.data[0].data)] = name
        Rewriter.replace_op(launch, func.CallOp(name, list(launch.kernelOperands), []))
    for op in list(module.ops):
        if isinstance(op, gpu.ModuleOp):
            op.detach()
            op.erase()
    del module.attributes["gpu.container_module"]
    return emulated


def _constant(value: SSAValue) -> int:
    op = value.owner
    assert isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr)
    return op.value.value.data


def compile_gpu_on_cpu(
    module: ModuleOp, entry: str = "main", options: CompileOptions | None = None
) -> CompiledFunction:
    """The GPU build of `entry` (as graphfuse.compile(target='cuda') makes it), emulated on
    the CPU, as a callable on NumPy arrays."""
    options = options or CompileOptions()
    module = load(module)
    fuse(module, options)
    signature = to_gpu(module, options, entry)
    assert signature is not None
    kernels = sum(1 for op in module.ops if isinstance(op, gpu.ModuleOp))
    scratch = signature.scratch(_entry(module, entry))
    emulate_on_cpu(module)
    library = build_shared_library(str(module), CpuTarget(threads=1))
    return CompiledFunction(library, entry, signature.inputs, signature.outputs, scratch, kernels)
