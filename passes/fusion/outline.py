"""Outlining: each group of ops becomes one `graph.fused` kernel.

A kernel's inputs are the values its ops read from outside (in order of first use), its
results every value used outside it (later ops or the function's return). Tiny constants
(scalars, short bias vectors) are cloned into the kernel instead of being passed in, so a
lowering sees their values. Kernels are named after their ops (`fused_conv2d_add_relu`).
After outlining, the block is put back in a topological order, keeping IR order where the
dataflow allows: a kernel sits where its first op was unless an input is computed later.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind, FusionKindAttr

SMALL_CONSTANT_ELEMENTS = 64
"""Constants with at most this many elements are cloned into each kernel that reads them."""

MAX_NAME_LENGTH = 64


def _elements(value: SSAValue) -> int:
    typ = value.type
    assert isinstance(typ, TensorType)
    count = 1
    for dim in typ.get_shape():
        count *= dim
    return count


def is_small_constant(op: Operation | None) -> bool:
    """A constant small enough to clone into every kernel that uses it."""
    return isinstance(op, graph.ConstantOp) and _elements(op.result) <= SMALL_CONSTANT_ELEMENTS


def kernel_name(ops: Sequence[Operation]) -> str:
    """`fused_` and the op names in order, shortened past MAX_NAME_LENGTH characters."""
    parts = [op.name.removeprefix("graph.") for op in ops]
    name = "fused"
    for count, part in enumerate(parts):
        if len(name) + len(part) + 1 > MAX_NAME_LENGTH:
            return f"{name}_and_{len(parts) - count}_more"
        name += "_" + part
    return name


def _kernel_inputs(
    ops: Sequence[Operation], members: set[Operation]
) -> tuple[list[SSAValue], list[graph.ConstantOp]]:
    inputs: list[SSAValue] = []
    constants: list[graph.ConstantOp] = []
    for op in ops:
        for operand in op.operands:
            owner = operand.owner
            if owner in members or operand in inputs:
                continue
            if isinstance(owner, graph.ConstantOp) and is_small_constant(owner):
                if owner not in constants:
                    constants.append(owner)
                continue
            inputs.append(operand)
    return inputs, constants


def _kernel_outputs(ops: Sequence[Operation], members: set[Operation]) -> list[SSAValue]:
    return [
        result
        for op in ops
        for result in op.results
        if any(use.operation not in members for use in result.uses)
    ]


def outline(ops: Sequence[Operation], kind: FusionKind) -> graph.FusedOp:
    """Replace `ops` (a convex group of one block, in IR order) by one `graph.fused`.

    The ops are moved, not copied, into the kernel's region (only tiny constants are
    cloned), so outlining costs a few pointer updates per op.
    """
    members = set(ops)
    inputs, constants = _kernel_inputs(ops, members)
    outputs = _kernel_outputs(ops, members)
    block = ops[0].parent_block()
    assert block is not None
    body = Block(arg_types=[value.type for value in inputs])
    local: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(inputs, body.args, strict=True):
        arg.name_hint = value.name_hint
        local[value] = arg
    for constant in constants:
        clone = constant.clone()
        body.add_op(clone)
        local[constant.result] = clone.result
    fused = graph.FusedOp.create(
        operands=inputs,
        result_types=[v.type for v in outputs],
        properties={"sym_name": StringAttr(kernel_name(ops)), "kind": FusionKindAttr(kind)},
        regions=[Region(body)],
    )
    block.insert_op_before(fused, ops[0])
    for old, new in zip(outputs, fused.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_uses_with_if(new, lambda use: use.operation not in members)
    for op in ops:
        block.detach_op(op)
        for index, operand in enumerate(op.operands):
            if operand in local:
                op.operands[index] = local[operand]
        body.add_op(op)
    body.add_op(graph.YieldOp.create(operands=outputs))
    for constant in constants:
        if not constant.result.uses:
            block.erase_op(constant)
    return fused


def _dependencies(op: Operation, block: Block) -> set[Operation]:
    """Ops of `block` whose results `op` (or anything nested in it) reads."""
    found: set[Operation] = set()
    for inner in op.walk():
        for operand in inner.operands:
            owner = operand.owner
            if isinstance(owner, Operation) and owner.parent_block() is block and owner is not op:
                found.add(owner)
    return found


def sort_block(block: Block) -> None:
    """Reorder a block topologically, keeping the current order wherever it is valid."""
    ops = list(block.ops)
    terminator = ops.pop() if ops and ops[-1].has_trait(IsTerminator) else None
    position = {op: i for i, op in enumerate(ops)}
    dependencies = {op: _dependencies(op, block) for op in ops}
    waiting = {op: len(dependencies[op]) for op in ops}
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op in ops:
        for dependency in dependencies[op]:
            users[dependency].append(op)
    ready = [(position[op], op) for op in ops if waiting[op] == 0]
    heapq.heapify(ready)
    order: list[Operation] = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in users[op]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    assert len(order) == len(ops), "the block's ops form a cycle"
    if order == ops:
        return
    for op in order:
        op.detach()
    for op in order:
        if terminator is not None:
            block.insert_op_before(op, terminator)
        else:
            block.add_op(op)


def inline(kernel: graph.FusedOp) -> list[Operation]:
    """Put a kernel's ops back in its block in its place; returns them (constants too)."""
    block = kernel.parent_block()
    assert block is not None
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(kernel.body.block.args, kernel.inputs, strict=True)
    )
    inlined: list[Operation] = []
    for op in kernel.body.block.ops:
        if isinstance(op, graph.YieldOp):
            for result, value in zip(kernel.results, op.operands, strict=True):
                result.replace_all_uses_with(mapping[value])
            continue
        clone = op.clone(value_mapper=mapping)
        block.insert_op_before(clone, kernel)
        mapping.update(zip(op.results, clone.results, strict=True))
        inlined.append(clone)
    block.erase_op(kernel)
    return inlined
