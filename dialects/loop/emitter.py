"""The builders every lowering emits ops with: `BlockBuilder`, and `Emitter` for kernels.

`BlockBuilder` appends ops to a block in the order written (the CPU passes' GEMM tiles and
math expansions). The graph→loop conversion computes every tensor value at an index tuple;
`Emitter`, a `BlockBuilder`, also keeps a stack of scopes (values defined in an outer block
are visible inside nested loop bodies, never the reverse) so the same value at the same
index is computed once, hoists constants to the kernel's entry block, and folds index
arithmetic on known integers so a static index map costs no instructions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Hashable
from contextlib import contextmanager

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.hints import isa

from graphfuse.dialects import loop

Index = int | SSAValue
"""An index: a known integer, or an `index` value computed in the kernel."""

f32 = Float32Type()
INDEX = IndexType()


def compute_type(element: Attribute) -> Attribute:
    """Kernels compute f16 and bf16 in f32 (as the reference does) and round on store;
    unsigned integers are signless scalars (their ops say how to read them)."""
    if isinstance(element, Float16Type | BFloat16Type):
        return f32
    return loop.signless(element)


def is_float(typ: Attribute) -> bool:
    return isinstance(typ, AnyFloat)


def constant_attr(value: float | int | bool, typ: Attribute) -> FloatAttr | IntegerAttr:
    """The attribute of an `arith.constant` of `typ` holding `value`."""
    if isinstance(typ, AnyFloat):
        return FloatAttr(float(value), typ)
    assert isa(typ, IntegerType | IndexType)
    return IntegerAttr(_wrap(int(value), typ), typ)


class BlockBuilder:
    """Appends ops to one block: the one builder every lowering emits with.

    It reuses nothing and hoists nothing (`Emitter` below adds both, for whole kernels):
    every `constant` is a new op at the end of the block, so the code that replaces a loop
    nest or an op (tiled GEMMs, math expansions) comes out in exactly the order it is
    written. A builder made without a block fills a fresh one, whose ops `take` hands to a
    rewriter.
    """

    def __init__(self, block: Block | None = None):
        self.block = block if block is not None else Block()

    def emit(self, op: Operation) -> SSAValue:
        """Appends `op` and returns its (single or first) result."""
        self.block.add_op(op)
        return op.results[0]

    def add(self, op: Operation) -> None:
        """Appends an op with no result used further (stores, yields, loops)."""
        self.block.add_op(op)

    def constant(self, value: float | int | bool, typ: Attribute) -> SSAValue:
        """A new `arith.constant` of `typ`, appended here."""
        return self.emit(arith.ConstantOp(constant_attr(value, typ)))

    def index(self, value: int) -> SSAValue:
        """A new `index` constant, appended here."""
        return self.constant(value, INDEX)

    def take(self) -> list[Operation]:
        """Detaches the block's ops and returns them, in order."""
        ops = list(self.block.ops)
        for op in ops:
            op.detach()
        return ops


class Emitter(BlockBuilder):
    """A `BlockBuilder` for a whole kernel: values computed earlier in an enclosing scope
    are reused, constants are made once at the top of the kernel."""

    def __init__(self, entry: Block):
        super().__init__(entry)
        self.entry = entry
        self._scopes: list[dict[Hashable, SSAValue]] = [{}]
        self._constants: dict[tuple[Attribute, float | int, bool], SSAValue] = {}

    # ---- insertion --------------------------------------------------------------------

    @contextmanager
    def inside(self, block: Block) -> Generator[None, None, None]:
        """Emit into `block` (a loop body) with a fresh scope for reused values."""
        saved = self.block
        self.block = block
        self._scopes.append({})
        try:
            yield
        finally:
            self._scopes.pop()
            self.block = saved

    def cached(self, key: Hashable, make: Callable[[], SSAValue]) -> SSAValue:
        """The value computed for `key` in this scope or an enclosing one, else `make()`."""
        found = self.lookup(key)
        return found if found is not None else self.remember(key, make())

    def lookup(self, key: Hashable) -> SSAValue | None:
        """The value computed for `key` in this scope or an enclosing one, if any."""
        for scope in reversed(self._scopes):
            if key in scope:
                return scope[key]
        return None

    def remember(self, key: Hashable, value: SSAValue) -> SSAValue:
        """Records `value` as computed for `key` in the current scope; returns it."""
        self._scopes[-1][key] = value
        return value

    # ---- constants --------------------------------------------------------------------

    def constant(self, value: float | int | bool, typ: Attribute) -> SSAValue:
        """A scalar constant of `typ`, created once at the top of the kernel."""
        # The sign tells -0.0 from 0.0, which compare (and hash) equal.
        key = (typ, value, math.copysign(1.0, value) < 0)
        if key in self._constants:
            return self._constants[key]
        result = self.hoist(arith.ConstantOp(constant_attr(value, typ)))
        self._constants[key] = result
        return result

    def hoist(self, op: Operation) -> SSAValue:
        """Puts `op` (side-effect free, operand-less) at the top of the kernel."""
        first = self.entry.first_op
        if first is None:
            self.entry.add_op(op)
        else:
            self.entry.insert_op_before(op, first)
        return op.results[0]

    def index_value(self, value: Index) -> SSAValue:
        return self.constant(value, INDEX) if isinstance(value, int) else value

    def lowest(self, typ: Attribute, unsigned: bool = False) -> SSAValue:
        """-inf for floats, the minimum for integers (0 read `unsigned`): the identity of
        max."""
        if is_float(typ):
            return self.constant(-math.inf, typ)
        return self.constant(0 if unsigned else _int_min(typ), typ)

    def highest(self, typ: Attribute, unsigned: bool = False) -> SSAValue:
        """+inf for floats, the maximum for integers (all ones read `unsigned`): the
        identity of min."""
        if is_float(typ):
            return self.constant(math.inf, typ)
        return self.constant(-1 if unsigned else -_int_min(typ) - 1, typ)

    # ---- index arithmetic (folded when both sides are known) --------------------------

    def iadd(self, a: Index, b: Index) -> Index:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if b == 0:
            return a
        if a == 0:
            return b
        return self._ibin(arith.AddiOp, a, b)

    def isub(self, a: Index, b: int) -> Index:
        return self.iadd(a, -b)

    def imul(self, a: Index, b: int) -> Index:
        if isinstance(a, int):
            return a * b
        if b == 1:
            return a
        if b == 0:
            return 0
        return self._ibin(arith.MuliOp, a, b)

    def idiv(self, a: Index, b: int) -> Index:
        """Floor division of a non-negative index by a positive constant."""
        if isinstance(a, int):
            return a // b
        return a if b == 1 else self._ibin(arith.DivUIOp, a, b)

    def irem(self, a: Index, b: int) -> Index:
        if isinstance(a, int):
            return a % b
        return 0 if b == 1 else self._ibin(arith.RemUIOp, a, b)

    def iclamp(self, a: Index, upper: int) -> Index:
        """min(max(a, 0), upper - 1): keeps a guarded load inside its buffer."""
        if isinstance(a, int):
            return min(max(a, 0), upper - 1)
        low = self._ibin(arith.MaxSIOp, a, 0)
        return self._ibin(arith.MinSIOp, low, upper - 1)

    def in_range(self, a: Index, lower: int, upper: int) -> SSAValue | bool:
        """lower <= a < upper, as an i1 value (or a known bool)."""
        if isinstance(a, int):
            return lower <= a < upper
        ge = self.cached(("ge", a, lower), lambda: self._cmp(a, lower, "sge"))
        lt = self.cached(("lt", a, upper), lambda: self._cmp(a, upper, "slt"))
        return self.emit(arith.AndIOp(ge, lt))

    def both(self, a: SSAValue | bool, b: SSAValue | bool) -> SSAValue | bool:
        if isinstance(a, bool):
            return b if a else False
        if isinstance(b, bool):
            return a if b else False
        return self.emit(arith.AndIOp(a, b))

    def _cmp(self, a: SSAValue, b: int, predicate: str) -> SSAValue:
        return self.emit(arith.CmpiOp(a, self.index_value(b), predicate))

    def _ibin(
        self, op_type: type[arith.SignlessIntegerBinaryOperation], a: Index, b: Index
    ) -> SSAValue:
        lhs, rhs = self.index_value(a), self.index_value(b)
        return self.cached((op_type.name, lhs, rhs), lambda: self.emit(op_type(lhs, rhs)))


def _int_min(typ: Attribute) -> int:
    assert isa(typ, IntegerType)
    width = typ.width.data
    return 0 if width == 1 else -(1 << (width - 1))


def _wrap(value: int, typ: IntegerType | IndexType) -> int:
    """Integers as the attribute wants them: i1 as 0/-1 is awkward, so keep 0/1."""
    if isinstance(typ, IntegerType) and typ.width.data == 1:
        return 1 if value else 0
    return value


def point_index(nest: loop.ParallelOp | loop.ReduceOp) -> tuple[Index, ...]:
    """The loop's index tuple, with the known 0 for every dimension of extent 1 (so index
    maps fold instead of computing with a value that is always 0)."""
    return tuple(
        0 if bound == 1 else arg
        for bound, arg in zip(nest.shape, nest.body.block.args, strict=True)
    )
