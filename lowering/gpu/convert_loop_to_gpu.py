"""convert-loop-to-gpu: loop kernels to `gpu.func`s, `loop.call`s to `gpu.launch_func`s.

A GPU has no barrier across the grid inside a kernel, so each top-level nest
(`loop.parallel`) of a loop kernel becomes one `gpu.func`, launched in order (a later nest
may read what an earlier one wrote), and each loop kernel one `gpu.module` of the same name.
Each nest is mapped one of two ways (`map_nest`): *points*, one bounds-checked thread per
point, consecutive threads on consecutive innermost points so loads and stores coalesce; or
*rows*, one block per row whose threads share the row's loops and reductions (`gpu_rows`).
Values hoisted to the kernel's entry are copied into each `gpu.func` that uses them; a
`memref.get_global` becomes one more kernel argument. The host function stays a `func.func`
of `gpu.launch_func`s, the form `gpu-lower-to-nvvm-pipeline` builds and graphfuse's CUDA
runtime replays. The mapping, with an example: docs/gpu.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, gpu, memref, scf
from xdsl.dialects.builtin import (
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import loop
from graphfuse.dialects.loop.emitter import BlockBuilder
from graphfuse.lowering.gpu.gpu_rows import build_rows, use_rows
from graphfuse.lowering.loop_to_upstream.loop_indexing import (
    WARP,
    block_and_thread,
    delinearize,
    inline_body,
)

MAX_BLOCK_SIZE = 1024


def check_block_size(block_size: int) -> None:
    """A CUDA block holds 32 to 1024 threads; whole warps only."""
    if not WARP <= block_size <= MAX_BLOCK_SIZE or block_size % WARP:
        raise PassFailedException(
            f"block size {block_size} is invalid: use a multiple of {WARP} from {WARP} to "
            f"{MAX_BLOCK_SIZE}"
        )


@dataclass(frozen=True)
class Launch:
    """One `gpu.launch_func` of a loop kernel: which function, on how many blocks of how
    many threads, with which globals after the kernel's own buffers."""

    function: SymbolRefAttr
    grid: int
    block: int
    globals: tuple[tuple[SymbolRefAttr, Attribute], ...]


def _map_points(nest: loop.ParallelOp, block_size: int, target: Block) -> tuple[int, int]:
    """One thread per point of `nest`, bounds-checked: appends to `target`, returns
    (grid, block)."""
    points = math.prod(nest.shape)
    threads = min(block_size, -(-points // WARP) * WARP)
    grid = -(-points // threads)
    out = BlockBuilder(target)
    block_id, thread_id = block_and_thread(out)
    linear = thread_id
    if grid != 1:
        base = out.emit(arith.MuliOp(block_id, out.index(threads)))
        linear = out.emit(arith.AddiOp(base, thread_id))
    inner = out
    if grid * threads != points:
        inside = out.emit(arith.CmpiOp(linear, out.index(points), "ult"))
        inner = BlockBuilder()
        out.add(scf.IfOp(inside, [], Region(inner.block)))
    values = delinearize(linear, nest.shape, inner)
    inline_body(nest.body.block, values, inner.block).erase()
    if inner is not out:
        inner.add(scf.YieldOp())
    return grid, threads


def map_nest(nest: loop.ParallelOp, block_size: int, target: Block) -> tuple[int, int]:
    """Maps `nest` (detached, its outer values already in `target`'s scope) into `target`
    as points or as rows; returns (grid, block)."""
    if use_rows(nest):
        return build_rows(nest, block_size, target)
    return _map_points(nest, block_size, target)


class _KernelMapper:
    """One loop kernel to a `gpu.module` with a `gpu.func` per top-level nest."""

    def __init__(self, kernel: loop.KernelOp, block_size: int):
        self.kernel = kernel
        self.name = kernel.sym_name.data
        self.block_size = block_size
        entry = kernel.body.block
        self.globals = [op for op in entry.ops if isinstance(op, memref.GetGlobalOp)]
        self.arg_types = [*kernel.arg_types, *(g.memref.type for g in self.globals)]

    def run(self) -> tuple[gpu.ModuleOp, list[Launch]]:
        functions: list[gpu.FuncOp] = []
        launches: list[Launch] = []
        prelude: list[Operation] = []
        for op in self.kernel.body.block.ops:
            if isinstance(op, loop.YieldOp | memref.GetGlobalOp):
                continue
            if isinstance(op, loop.ParallelOp):
                name = self.name if not functions else f"{self.name}_{len(functions)}"
                function, grid, block = self._function(name, op, prelude)
                functions.append(function)
                symbol = SymbolRefAttr(self.name, [name])
                globals_ = tuple((g.name_, g.memref.type) for g in self.globals)
                launches.append(Launch(symbol, grid, block, globals_))
            elif op.regions or isinstance(op, loop.StoreOp | loop.CallOp):
                raise PassFailedException(
                    f"'{op.name}' at the top of loop kernel @{self.name} is outside any "
                    "loop.parallel; convert-loop-to-gpu maps only loop nests"
                )
            else:
                prelude.append(op)
        module = gpu.ModuleOp(StringAttr(self.name), Region(Block(functions)))  # type: ignore[arg-type]
        return module, launches

    def _function(
        self, name: str, nest: loop.ParallelOp, prelude: Sequence[Operation]
    ) -> tuple[gpu.FuncOp, int, int]:
        block = Block(arg_types=self.arg_types)
        outer = [*self.kernel.body.block.args, *(g.memref for g in self.globals)]
        mapping: dict[SSAValue, SSAValue] = dict(zip(outer, block.args, strict=True))
        for op in prelude:
            block.add_op(op.clone(value_mapper=mapping))
        grid, threads = map_nest(nest.clone(value_mapper=mapping), self.block_size, block)
        block.add_op(gpu.ReturnOp([]))
        region = Region(block)
        region_dce(region)
        function = gpu.FuncOp(name, FunctionType.from_lists(self.arg_types, []), region)
        # MLIR marks kernels with the discardable `gpu.kernel` attribute (xDSL's FuncOp
        # has it as a property, which mlir-opt would not read).
        function.attributes["gpu.kernel"] = UnitAttr()
        function.attributes["workgroup_attributions"] = IntegerAttr(0, i64)
        return function, grid, threads


def _replace_call(call: loop.CallOp, launches: Sequence[Launch]) -> None:
    host = BlockBuilder()
    one = host.index(1)
    for launch in launches:
        globals_ = [host.emit(memref.GetGlobalOp(name, typ)) for name, typ in launch.globals]
        grid, block = host.index(launch.grid), host.index(launch.block)
        host.add(
            gpu.LaunchFuncOp(
                launch.function,
                [grid, one, one],
                [block, one, one],
                kernelOperands=[*call.buffers, *globals_],
            )
        )
    Rewriter.replace_op(call, host.take(), new_results=[])


@dataclass(frozen=True)
class ConvertLoopToGpuPass(ModulePass):
    """Each loop kernel to a `gpu.module`, each `loop.call` to its `gpu.launch_func`s."""

    name = "convert-loop-to-gpu"

    block_size: int = 256
    """Threads per block (a multiple of 32, at most 1024); a row kernel whose rows are
    shorter uses fewer."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_block_size(self.block_size)
        launches: dict[str, list[Launch]] = {}
        for kernel in [k for k in op.ops if isinstance(k, loop.KernelOp)]:
            module, launches[kernel.sym_name.data] = _KernelMapper(kernel, self.block_size).run()
            Rewriter.replace_op(kernel, module)
        for call in [c for c in op.walk() if isinstance(c, loop.CallOp)]:
            _replace_call(call, launches[call.callee.string_value()])
        op.attributes["gpu.container_module"] = UnitAttr()
