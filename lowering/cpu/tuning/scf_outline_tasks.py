"""scf-outline-tasks: the kernels' loop bodies as functions whose buffers do not alias.

A kernel's buffers are distinct: the entry functions pass each kernel separate graph
values, weights and scratch buffers (loop-plan-scratch gives buffers in use at the same
call disjoint memory). LLVM cannot know that. Its memref arguments are plain pointers, so
it must assume a store through one may change what a load through another reads: it keeps
the loads of a padded copy's row after the stores before them, and it will not vectorise
the row (a 28-wide row, fully unrolled first, became 56 scalar moves: 40% of a depthwise
[1,192,28,28] kernel), nor hoist a load out of a loop that stores elsewhere. `noalias` on
a function's pointer arguments says it; but the memref-to-LLVM conversion drops
`llvm.noalias` from a memref argument, and the body of an `scf.parallel` runs in a function
the OpenMP lowering outlines, which reads its buffers from a context struct.

So here the body of each outermost `scf.parallel` of a kernel (of the whole kernel where it
has none) becomes a private function `@<kernel>__task<N>`, called with the loop's indices,
the kernel's buffers and the scalars the body reads. Constants, globals and views of buffers
(reshapes, subviews) defined outside the body are cloned into it, so its memref arguments
are the buffers themselves, each one once. The function has internal linkage: it stays
in its kernel's module (kernel_split.py), its pointer arguments are marked `noalias` in the
LLVM IR (llvm_lowering.mark_own_arguments: MLIR has no way to say it of a memref), and
LLVM inlines the single call, turning the marks into alias scopes of the loads and stores.
A kernel that some call passes one buffer twice, or two views of one buffer, keeps its
body as it is. (The Python runtime runs a call whose out= array overlaps an input through
new arrays; the C interface asks its callers for outputs that overlap nothing.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, memref, scf
from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from graphfuse.dialects.loop import abi
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside

TASK_MARK = "__task"
"""Between a kernel's name and its task's number."""

_VIEWS = (
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    memref.ReinterpretCastOp,
    memref.CastOp,
)
"""Ops whose result is a view of their first operand's memory."""


def _root(value: SSAValue) -> SSAValue:
    """The buffer `value` views (itself when it is not a view)."""
    while isinstance(value.owner, _VIEWS):
        value = value.owner.operands[0]
    return value


def _clonable(op: Operation) -> bool:
    """Defined outside a task and cloned into it rather than passed: constants, globals
    (their values stay visible to LLVM, and a global is never an argument) and views."""
    return isinstance(op, (arith.ConstantOp, memref.GetGlobalOp, *_VIEWS))


def _entries(module: ModuleOp) -> list[func.FuncOp]:
    return [f for f in module.ops if isinstance(f, func.FuncOp) and abi.OUTPUTS in f.attributes]


def _distinct_buffers(module: ModuleOp) -> set[str]:
    """Kernels every call of which passes buffers that do not overlap: no buffer, and no
    two views of one, passed twice."""
    called: dict[str, bool] = {}
    for entry in _entries(module):
        for call in entry.walk():
            if not isinstance(call, func.CallOp):
                continue
            roots = [_root(a) for a in call.arguments if isinstance(a.type, MemRefType)]
            name = call.callee.root_reference.data
            called[name] = called.get(name, True) and len(set(roots)) == len(roots)
    return {name for name, distinct in called.items() if distinct}


def _outermost_parallels(kernel: func.FuncOp) -> list[scf.ParallelOp]:
    found: list[scf.ParallelOp] = []
    for op in kernel.walk():
        if isinstance(op, scf.ParallelOp) and not op.res and not op.initVals:
            enclosing = op.parent_op()
            while enclosing is not None and not isinstance(enclosing, scf.ParallelOp):
                enclosing = enclosing.parent_op()
            if enclosing is None:
                found.append(op)
    return found


@dataclass
class _Captures:
    """What a body reads from outside it: values passed as the task's arguments (each
    once), and ops cloned into it, in an order that defines operands first."""

    passed: list[SSAValue]
    cloned: list[Operation]


def _captures(ops: Sequence[Operation], owner: Operation) -> _Captures:
    """What `ops` (the body of `owner`) read from outside `owner`."""
    passed: list[SSAValue] = []
    cloned: list[Operation] = []
    seen: set[SSAValue] = set()

    def take(value: SSAValue) -> None:
        if value in seen or inside(value, owner):
            return
        seen.add(value)
        definer = value.owner
        if isinstance(definer, Operation) and _clonable(definer):
            for operand in definer.operands:
                take(operand)
            cloned.append(definer)
        else:
            passed.append(value)

    for op in ops:
        for inner in op.walk():
            for operand in inner.operands:
                take(operand)
    return _Captures(passed, cloned)


def _outline(
    name: str, owner: Operation, ops: Sequence[Operation], indices: Sequence[SSAValue]
) -> tuple[func.FuncOp, list[SSAValue]]:
    """A private function `name` running `ops` (the body of `owner`), its arguments
    `indices` then what the ops read from outside; returns it and the values to call it
    with."""
    captures = _captures(ops, owner)
    arguments = [*indices, *captures.passed]
    block = Block(arg_types=[a.type for a in arguments])
    mapping: dict[SSAValue, SSAValue] = dict(zip(arguments, block.args, strict=True))
    for op in captures.cloned:
        block.add_op(op.clone(value_mapper=mapping))
    # The body itself moves (cloning it was most of the pass's time); only its reads
    # of what is outside change, to the arguments and the clones.
    for op in ops:
        op.detach()
        block.add_op(op)
        _redirect(op, mapping)
    block.add_op(func.ReturnOp())
    typ = FunctionType.from_lists([a.type for a in arguments], [])
    task = func.FuncOp(name, typ, Region(block), visibility="private")
    # Internal linkage: LLVM inlines a function that has one call and no other users.
    task.attributes["llvm.linkage"] = llvm.LinkageAttr("internal")
    return task, arguments


def _redirect(op: Operation, mapping: dict[SSAValue, SSAValue]) -> None:
    """Each operand of `op` and of the ops in it that `mapping` names, replaced."""
    for inner in op.walk():
        for i, operand in enumerate(inner.operands):
            if operand in mapping:
                inner.operands[i] = mapping[operand]


def _outline_kernel(kernel: func.FuncOp) -> list[func.FuncOp]:
    """The tasks of `kernel` (see the module's doc), their calls put in its place."""
    name = kernel.sym_name.data
    tasks: list[func.FuncOp] = []
    parallels = _outermost_parallels(kernel)
    # The whole kernel's body is passed the kernel's arguments, a loop's its indices.
    owners: Iterable[scf.ParallelOp | func.FuncOp] = parallels or [kernel]
    for owner in owners:
        body = owner.body.block
        ops = list(body.ops)[:-1]  # scf.reduce or func.return stays
        if not ops:
            continue
        task, arguments = _outline(f"{name}{TASK_MARK}{len(tasks)}", owner, ops, body.args)
        tasks.append(task)
        terminator = body.last_op
        assert terminator is not None
        call = func.CallOp(task.sym_name.data, arguments, [])
        body.insert_op_before(call, terminator)
    return tasks


@dataclass(frozen=True)
class ScfOutlineTasksPass(ModulePass):
    """Kernel loop bodies as functions whose buffer arguments are marked not to alias."""

    name = "scf-outline-tasks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        distinct = _distinct_buffers(op)
        for kernel in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if kernel.sym_name.data in distinct and not kernel.is_declaration:
                after: Operation = kernel
                for task in _outline_kernel(kernel):
                    op.body.block.insert_op_after(task, after)
                    after = task
