"""loop-tile-matmul: a matmul or convolution loop nest becomes a register-tiled, vectorised
GEMM micro-kernel, with the kernel's fused epilogue applied to each tile while it is in cache.

convert-graph-to-loop writes `C = epilogue(A @ B)`, and a convolution, as one nest over the
output points with a `loop.reduce add` inside: a dot product per point, which reuses nothing
between points. This pass computes such a nest as a GEMM, the way BLAS libraries do (Goto's
algorithm): the nest is read as a contraction (contractions.py; a convolution is the implicit
GEMM of im2col), its sizes and task split decided (tile_plan.py), the operands packed into
panels (operand_packing.py) and the output computed in MR x NR register tiles by tasks of one
`scf.parallel`, the epilogue run on each finished tile (tile_kernels.py). Packed operands are
scratch buffers the caller allocates once; an operand that reads only constants (a model's
weights) is packed on the first call only. Nests contractions.py does not take, and those
too small to be worth tiling, are left for convert-loop-to-upstream. Before the GEMMs the
pass runs the CPU rewrites of other nests, in order: depthwise convolutions at stride 2,
or on rows of several vectors, computed from the input rows in registers without their
padded copy (depthwise_rows.py), zero-padded operand copies split into a fill and an
interior copy (padded_copies.py), pools split down the rows then along the
columns (separable_pools.py), gathered columns read from a pass over the rows
(separable_gathers.py), depthwise convolutions vectorised across channels (depthwise.py),
padded copies run plane by plane with their reader (image_copies.py) and stored in column
phases for a strided reader (strided_phases.py), transposing copies by register
transposes (transposed_copies.py), and 3x3 convolutions at stride 1 with constant weights
turned into Winograd's transforms around 16 GEMMs (winograd.py), which this pass then
tiles like any other. Threaded tasks are cut for the compiled team (task_balance.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IntegerAttr, ModuleOp, i64
from xdsl.ir import BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable

from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi
from graphfuse.dialects.loop.calls import constant_arguments, scratch_arguments
from graphfuse.lowering.cpu.depthwise import vectorise_depthwise
from graphfuse.lowering.cpu.depthwise_rows import depthwise_rows
from graphfuse.lowering.cpu.first_call import keep_between_calls, on_first_call
from graphfuse.lowering.cpu.gemm.contractions import (
    Contraction,
    match_contraction,
)
from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder
from graphfuse.lowering.cpu.gemm.operand_packing import OperandPacker
from graphfuse.lowering.cpu.gemm.split_reductions import split_reductions
from graphfuse.lowering.cpu.gemm.tile_kernels import TaskEmitter
from graphfuse.lowering.cpu.gemm.tile_plan import plan_tiling
from graphfuse.lowering.cpu.image_copies import interleave_image_copies
from graphfuse.lowering.cpu.lanes import DEFAULT_LANES, check_lanes
from graphfuse.lowering.cpu.padded_copies import split_padded_copies
from graphfuse.lowering.cpu.separable_gathers import separate_gathers
from graphfuse.lowering.cpu.separable_pools import separate_pools
from graphfuse.lowering.cpu.strided_phases import split_strided_phases
from graphfuse.lowering.cpu.transposed_copies import transpose_copies
from graphfuse.lowering.cpu.winograd import winograd_convolutions
from graphfuse.parsing import check_at_least

Pack = Callable[[GemmBuilder], None]


def tile_contraction(
    found: Contraction, threads: bool, constant_positions: set[int], lanes: int, workers: int
) -> None:
    """Emits the tiled computation of `found` in place of its nest: plan (tasks balanced
    for `workers` threads), then the packing of every operand not packed inside the tasks,
    then the tasks."""
    nest = found.nest
    parent = nest.parent_block()
    kernel = nest.parent_op()
    assert parent is not None and isinstance(kernel, loop.KernelOp)
    entry = kernel.body.block
    constants: set[SSAValue] = {entry.args[n] for n in constant_positions}
    plan = plan_tiling(found, threads, constants, lanes, workers)
    a_type, b_type = plan.packed_types()
    packed_a = entry.insert_arg(a_type, len(entry.args)) if plan.a_in_place is None else None
    packer = OperandPacker(plan, packed_a, entry.insert_arg(b_type, len(entry.args)))
    em = GemmBuilder()
    packs: list[tuple[bool, Pack, SSAValue]] = []
    if packed_a is not None:
        packs.append((plan.a_constant, packer.pack_all_a, packed_a))
    if not plan.b_in_task:
        packs.append((plan.b_constant, packer.pack_all_b, packer.packed_b))
    for constant, pack, _ in packs:
        if not constant:
            pack(em)
    once = [(pack, buffer) for constant, pack, buffer in packs if constant]
    if once:
        _pack_once(em, kernel, once)
    em.parallel(plan.tasks, plan.threads, TaskEmitter(plan, packer).task)
    for op in em.take():
        parent.insert_op_before(op, nest)
    nest.detach()
    nest.erase()


def _pack_once(
    em: GemmBuilder, kernel: loop.KernelOp, once: Sequence[tuple[Pack, SSAValue]]
) -> None:
    """Packs the operands that read nothing but constants (a model's weights) on the first
    call only, into buffers kept between calls (first_call.py)."""

    def fill(then: GemmBuilder) -> None:
        for pack, _ in once:
            pack(then)

    flag = on_first_call(em, kernel.body.block, fill)
    keep_between_calls(kernel, [flag, *(cast(BlockArgument, buffer) for _, buffer in once)])


@dataclass(frozen=True)
class LoopTileMatmulPass(ModulePass):
    """Matmul and convolution nests of loop kernels to tiled, vectorised GEMM micro-kernels
    (CPU)."""

    name = "loop-tile-matmul"

    threads: bool = False
    """Split packing and row blocks over threads (scf.parallel)."""

    lanes: int = DEFAULT_LANES
    """f32 lanes of the target's vector registers: 8 (AVX2), 16 (AVX-512)."""

    workers: int = 2
    """Threads of the team the tasks run on (the compiled code's), with `threads`: the
    split of rows and panels into tasks is balanced for it (task_balance.py)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_lanes(self.name, self.lanes)
        check_at_least(self.name, "workers", self.workers, 1)
        added: dict[str, int] = {}
        constants = constant_arguments(op)
        scratch = scratch_arguments(op)
        for kernel in [k for k in op.ops if isinstance(k, loop.KernelOp)]:
            before = len(kernel.body.block.args)
            positions = constants.get(kernel.sym_name.data, set())
            split_reductions(kernel)
            depthwise_rows(kernel, self.lanes, self.threads)
            split_padded_copies(kernel)
            separate_pools(kernel)
            separate_gathers(kernel)
            vectorise_depthwise(kernel, self.lanes, self.threads, positions)
            interleave_image_copies(kernel)
            split_strided_phases(kernel, scratch.get(kernel.sym_name.data, set()))
            transpose_copies(kernel, self.threads)
            winograd_convolutions(kernel, self.threads, positions)
            for nest in [n for n in kernel.body.block.ops if isinstance(n, loop.ParallelOp)]:
                found = match_contraction(nest)
                if found is not None:
                    tile_contraction(found, self.threads, positions, self.lanes, self.workers)
            if len(kernel.body.block.args) > before:
                added[kernel.sym_name.data] = before
        for call in [c for c in op.walk() if isinstance(c, loop.CallOp)]:
            first = added.get(call.callee.string_value())
            if first is not None:
                _pass_scratch(call, first)


def _pass_scratch(call: loop.CallOp, first: int) -> None:
    """Gives `call` host scratch buffers for its kernel's arguments from `first` on (the
    packed operands): new arguments of the calling function, counted in its
    `graphfuse.scratch`, so the caller allocates them once, not every call."""
    function = call.parent_op()
    assert isinstance(function, func.FuncOp)
    kernel = SymbolTable.lookup_symbol(call, call.callee)
    assert isinstance(kernel, loop.KernelOp)
    block = function.body.block
    buffers = list(call.buffers)
    for typ in kernel.arg_types[first:]:
        buffers.append(block.insert_arg(typ, len(block.args)))
    Rewriter.replace_op(call, loop.CallOp(call.callee.string_value(), buffers))
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [])
    count = function.attributes.get(abi.SCRATCH)
    if isinstance(count, IntegerAttr):
        added = len(kernel.arg_types) - first
        function.attributes[abi.SCRATCH] = IntegerAttr(count.value.data + added, i64)
