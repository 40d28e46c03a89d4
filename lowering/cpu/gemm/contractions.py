"""Reading a loop nest as a contraction (a GEMM with batch dimensions), for loop-tile-matmul.

convert-graph-to-loop writes a matmul or convolution as one nest over the output points
with a `loop.reduce add` inside whose body multiplies two factors. A nest is taken when
that reduction is its only region op, is of f32, and each factor is computed from loads by
`arith` ops alone (index arithmetic, the clamp-and-select of padding), so packing can
clone a factor's ops to evaluate it at any (m, k) or (k, n). The nest's indices that only
the first factor reads are the GEMM's rows (m), those only the second reads its columns
(n), the others batch; the reduction's indices are k. A matmul's rows are its m (and a
batch only A has), its columns n; a convolution's rows are its output channels and its
columns (image, y, x): the implicit GEMM of im2col.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import BlockArgument, Operation, SSAValue

from graphfuse.dialects import loop
from graphfuse.lowering.graph_to_loop.operand_layouts import worth_tiling
from graphfuse.lowering.loop_to_upstream.loop_indexing import inside


@dataclass(frozen=True)
class Operand:
    """One factor of the product: the ops inside the nest computing it (index arithmetic,
    loads, padding selects), which packing clones to evaluate it anywhere."""

    value: SSAValue
    chain: tuple[Operation, ...]
    """In program order."""
    depends: frozenset[SSAValue]
    """The nest's and the reduction's indices it reads."""

    @property
    def loads(self) -> list[loop.LoadOp]:
        return [op for op in self.chain if isinstance(op, loop.LoadOp)]

    def direct_load(self) -> loop.LoadOp | None:
        """The operand's only load when its value is that load itself (no padding select
        or arithmetic on it): the packings that copy memory runs as they are need one."""
        loads = self.loads
        if len(loads) != 1 or loads[0].result is not self.value:
            return None
        return loads[0]


def clonable(op: Operation) -> bool:
    """A load or a region-free arith op: what a factor's chain may hold, to be cloned."""
    return not op.regions and (isinstance(op, loop.LoadOp) or op.dialect_name() == "arith")


def factor(value: SSAValue, nest: Operation) -> Operand | None:
    """`value` with the ops in `nest` (a loop nest or reduction) it is computed from, or
    None if one of them is not a load or a region-free arith op (then it cannot be cloned
    to pack it)."""
    chain: list[Operation] = []
    depends: set[SSAValue] = set()
    pending: list[SSAValue] = [value]
    seen: set[Operation] = set()
    while pending:
        current = pending.pop()
        if not inside(current, nest):
            continue
        if isinstance(current, BlockArgument):
            depends.add(current)
            continue
        op = current.owner
        assert isinstance(op, Operation)
        if op in seen:
            continue
        if not clonable(op):
            return None
        seen.add(op)
        chain.append(op)
        pending.extend(op.operands)
    order = {op: n for n, op in enumerate(nest.walk())}
    chain.sort(key=lambda op: order[op])
    return Operand(value, tuple(chain), frozenset(depends))


@dataclass(frozen=True)
class Contraction:
    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    a: Operand
    b: Operand
    rows: tuple[int, ...]
    """Nest dimensions of the GEMM's rows (m), in order."""
    columns: tuple[int, ...]
    batch: tuple[int, ...]

    def extent(self, dims: Sequence[int]) -> int:
        return math.prod(self.nest.shape[d] for d in dims)

    @property
    def m(self) -> int:
        return self.extent(self.rows)

    @property
    def n(self) -> int:
        return self.extent(self.columns)

    @property
    def k(self) -> int:
        return math.prod(self.reduce.shape)

    def args(self, dims: Sequence[int]) -> list[SSAValue]:
        return [self.nest.body.block.args[d] for d in dims]


def reads_constants(operand: Operand, constant_args: set[SSAValue]) -> bool:
    """Whether `operand` reads only constants: `memref.get_global`s, in the kernel or
    passed by every caller (`constant_args`)."""
    loads = operand.loads
    return bool(loads) and all(
        isinstance(op.buffer.owner, memref.GetGlobalOp) or op.buffer in constant_args
        for op in loads
    )


def float_sum(nest: loop.ParallelOp) -> loop.ReduceOp | None:
    """The nest's one nested region when it is an f32 `loop.reduce add` whose init comes
    from outside the nest."""
    regions = [op for op in nest.body.block.ops if op.regions]
    if len(regions) != 1 or not isinstance(regions[0], loop.ReduceOp):
        return None
    reduce = regions[0]
    ok = (
        reduce.kind.data == loop.ReduceKind.ADD
        and isinstance(reduce.result.type, Float32Type)
        and not inside(reduce.init, nest)
    )
    return reduce if ok else None


def summed_product(reduce: loop.ReduceOp) -> arith.MulfOp | None:
    """The product a reduction's body yields, if it yields one."""
    end = reduce.body.block.last_op
    assert isinstance(end, loop.YieldOp)
    product = end.values[0].owner
    return product if isinstance(product, arith.MulfOp) else None


def match_contraction(nest: loop.ParallelOp) -> Contraction | None:
    """The GEMM in `nest`, if it has the shape this pass tiles."""
    reduce = float_sum(nest)
    if reduce is None or not worth_tiling(math.prod(nest.shape), math.prod(reduce.shape)):
        return None
    body = list(reduce.body.block.ops)
    product = summed_product(reduce)
    if product is None:
        return None
    first, second = (factor(v, nest) for v in product.operands)
    if first is None or second is None:
        return None
    a, b = first, second
    used = {product, body[-1], *a.chain, *b.chain}
    if any(op not in used for op in body):
        return None
    args = nest.body.block.args
    rows = tuple(d for d, x in enumerate(args) if x in a.depends and x not in b.depends)
    columns = tuple(d for d, x in enumerate(args) if x in b.depends and x not in a.depends)
    if not rows or not columns:
        return None
    if len(args) - 1 in rows:
        # The output's innermost dimension runs along the 16 columns of a tile, so the
        # epilogue's stores are contiguous.
        a, b = b, a
        rows, columns = columns, rows
    batch = tuple(d for d in range(len(args)) if d not in rows and d not in columns)
    return Contraction(nest, reduce, a, b, rows, columns, batch)
