"""The loop dialect: one kernel per fused group, as loops over buffers with a scalar body.

`convert-graph-to-loop` produces it; `convert-loop-to-upstream` (CPU) and
`convert-loop-to-gpu` (NVPTX) consume it. A `loop.kernel` is a symbol taking buffers
(builtin memrefs: inputs, outputs and scratch); its body is iteration spaces
(`loop.parallel`: every point independent, so a backend may split them over threads or GPU
blocks), reductions with accumulators (`loop.reduce`, carrying its combiner so a GPU backend
can pick shuffles), and loads and stores whose indices the kernel computes with `arith` on
`index` values (the index maps of broadcast, transpose, reshape, slice, pad and concat).
Scalar arithmetic is upstream `arith`/`math`, so nothing here duplicates what MLIR already
has. Examples: lit_tests/dialects/loop/ops.mlir and docs/dialects.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, cast

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FlatSymbolRefAttrConstr,
    IndexType,
    IntegerType,
    MemRefType,
    Signedness,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum


class ReduceKind(StrEnum):
    """How `loop.reduce` combines the values its body yields."""

    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"
    UMAX = "umax"
    """max of integers read unsigned (the elements of ui8..ui64 tensors)."""
    UMIN = "umin"
    """min of integers read unsigned."""


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """The combiner of a `loop.reduce`."""

    name = "loop.reduce_kind"


def signless(typ: Attribute) -> Attribute:
    """The signless integer type of an unsigned one (others unchanged).

    Buffers may hold `ui8`..`ui64` elements (so a function's signature says what its
    callers pass), but scalars are signless, as `arith` wants them: a load gives, and a
    store takes, the signless type of its buffer's elements.
    """
    if isa(typ, IntegerType) and typ.signedness.data == Signedness.UNSIGNED:
        return IntegerType(typ.width.data)
    return typ


def _bounds(values: Sequence[int]) -> DenseArrayBase[IntegerType]:
    return DenseArrayBase.from_list(i64, values)


def _check_index_args(block: Block, bounds: Sequence[int], what: str) -> None:
    if len(block.args) != len(bounds):
        raise VerifyException(
            f"{what} body has {len(block.args)} arguments, expected {len(bounds)} (one index "
            "per bound)"
        )
    for i, arg in enumerate(block.args):
        if not isinstance(arg.type, IndexType):
            raise VerifyException(f"{what} body argument #{i} has type {arg.type}, expected index")
    for i, bound in enumerate(bounds):
        if bound < 1:
            raise VerifyException(f"bound #{i} is {bound}, expected at least 1")


def memref_type(typ: Attribute) -> MemRefType[Attribute] | None:
    """`typ` as a memref type, or None when it is another type.

    A plain isinstance: xDSL's generic `isa(typ, MemRefType[Attribute])` builds a type
    constraint on every call, and the lowerings ask this of every value of a module."""
    return cast(MemRefType[Attribute], typ) if isinstance(typ, MemRefType) else None


def _memref(value: SSAValue) -> MemRefType[Attribute]:
    typ = memref_type(value.type)
    assert typ is not None
    return typ


def _check_indices(buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
    rank = _memref(buffer).get_num_dims()
    if len(indices) != rank:
        raise VerifyException(f"{len(indices)} indices for a buffer of rank {rank}")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One kernel: a symbol whose entry block takes its buffers (inputs, outputs, scratch)."""

    name = "loop.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")

    assembly_format = "$sym_name attr-dict-with-keyword $body"
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, arg_types: Sequence[Attribute]):
        super().__init__(
            properties={"sym_name": StringAttr(name)},
            regions=[Region(Block(arg_types=arg_types))],
        )

    def verify_(self) -> None:
        for i, arg in enumerate(self.body.block.args):
            if memref_type(arg.type) is None:
                raise VerifyException(f"argument #{i} has type {arg.type}, expected a memref")
        if not isinstance(self.body.block.last_op, YieldOp):
            raise VerifyException("body must end with loop.yield")

    @property
    def arg_types(self) -> tuple[Attribute, ...]:
        return tuple(arg.type for arg in self.body.block.args)


@irdl_op_definition
class ParallelOp(IRDLOperation):
    """A box of independent points: the body runs once per index tuple below `bounds`."""

    name = "loop.parallel"

    bounds = prop_def(DenseArrayBase.constr(i64))
    body = region_def("single_block")

    assembly_format = "$bounds attr-dict-with-keyword $body"

    def __init__(self, bounds: Sequence[int]):
        block = Block(arg_types=[IndexType()] * len(bounds))
        super().__init__(properties={"bounds": _bounds(bounds)}, regions=[Region(block)])

    @property
    def shape(self) -> tuple[int, ...]:
        return self.bounds.get_values()

    def verify_(self) -> None:
        _check_index_args(self.body.block, self.shape, "loop.parallel")
        if not isinstance(self.body.block.last_op, YieldOp) or self.body.block.last_op.values:
            raise VerifyException("body must end with a loop.yield of no values")


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Combines the value the body yields at every point below `bounds`, starting at `init`.

    The order of combination is unspecified (a backend may reassociate, split over threads
    or use warp shuffles), as for any parallel reduction. The body runs once per point, so
    it may also store that point's element (a stitched row kernel keeps a row this way).
    """

    name = "loop.reduce"

    T: ClassVar = VarConstraint("T", AnyAttr())
    kind = prop_def(ReduceKindAttr)
    bounds = prop_def(DenseArrayBase.constr(i64))
    init = operand_def(T)
    result = result_def(T)
    body = region_def("single_block")

    assembly_format = (
        "$kind $bounds `init` `(` $init `:` type($init) `)` attr-dict-with-keyword $body"
    )

    def __init__(self, kind: ReduceKind, bounds: Sequence[int], init: SSAValue):
        block = Block(arg_types=[IndexType()] * len(bounds))
        super().__init__(
            operands=[init],
            result_types=[init.type],
            properties={"kind": ReduceKindAttr(kind), "bounds": _bounds(bounds)},
            regions=[Region(block)],
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return self.bounds.get_values()

    def verify_(self) -> None:
        _check_index_args(self.body.block, self.shape, "loop.reduce")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp) or len(last.values) != 1:
            raise VerifyException("body must end with a loop.yield of one value")
        if last.values[0].type != self.result.type:
            raise VerifyException(
                f"body yields {last.values[0].type}, expected {self.result.type} (the init type)"
            )


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element of a buffer (unsigned elements as signless: see `signless`)."""

    name = "loop.load"

    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def()

    assembly_format = "$buffer `[` $indices `]` attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(
            operands=[buffer, indices],
            result_types=[signless(_memref(buffer).get_element_type())],
        )

    def verify_(self) -> None:
        _check_indices(self.buffer, self.indices)
        element = signless(_memref(self.buffer).get_element_type())
        if self.result.type != element:
            raise VerifyException(f"result has type {self.result.type}, expected {element}")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes one element of a buffer (unsigned elements as signless: see `signless`)."""

    name = "loop.store"

    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    assembly_format = (
        "$value `,` $buffer `[` $indices `]` attr-dict `:` type($value) `,` type($buffer)"
    )

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, indices])

    def verify_(self) -> None:
        _check_indices(self.buffer, self.indices)
        element = signless(_memref(self.buffer).get_element_type())
        if self.value.type != element:
            raise VerifyException(f"stored value has type {self.value.type}, expected {element}")


@irdl_op_definition
class CallOp(IRDLOperation):
    """Runs a `loop.kernel` on the given buffers."""

    name = "loop.call"

    callee = prop_def(FlatSymbolRefAttrConstr)
    buffers = var_operand_def(MemRefType)

    assembly_format = "$callee `(` $buffers `)` attr-dict `:` type($buffers)"

    def __init__(self, callee: str, buffers: Sequence[SSAValue]):
        super().__init__(operands=[buffers], properties={"callee": SymbolRefAttr(callee)})

    def verify_(self) -> None:
        kernel = SymbolTable.lookup_symbol(self, self.callee)
        if not isinstance(kernel, KernelOp):
            raise VerifyException(f"'{self.callee.string_value()}' is not a loop.kernel")
        given = tuple(b.type for b in self.buffers)
        if given != kernel.arg_types:
            raise VerifyException(
                f"buffers have types ({', '.join(map(str, given))}), expected "
                f"({', '.join(map(str, kernel.arg_types))}) (the kernel's arguments)"
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a kernel, a parallel box (no values) or a reduction body (the element)."""

    name = "loop.yield"

    values = var_operand_def()

    assembly_format = "($values^ `:` type($values))? attr-dict"
    traits = traits_def(IsTerminator(), HasParent(KernelOp, ParallelOp, ReduceOp))

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


Loop = Dialect(
    "loop",
    [KernelOp, ParallelOp, ReduceOp, LoadOp, StoreOp, CallOp, YieldOp],
    [ReduceKindAttr],
)
