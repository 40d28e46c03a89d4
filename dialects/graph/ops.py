"""The graph dialect: one op per neural-network operator, on builtin ranked tensors.

Ops follow NumPy semantics (binary ops broadcast), verify their result types against the
shape rules in `shape_rules`, and declare their fusion kind (TVM's op pattern kinds) through
`FusionKindTrait`, which passes read with `fusion_kind(op)`. Compound ops (softmax,
layer_norm, ...) carry `CompoundOp` and are opened into primitives before fusion.
`graph.fused` holds one kernel: an isolated region with explicit inputs and results.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

from typing_extensions import TypeVar  # the TypeVar xDSL's mapping_type_vars is typed with
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FixedBitwidthType,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    SignednessAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AnyOf,
    AttrConstraint,
    EqAttrConstraint,
    IntConstraint,
    IntSetConstraint,
    IRDLOperation,
    MessageConstraint,
    ParamAttrConstraint,
    VarConstraint,
    VerificationContext,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import (
    ConstantLike,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    OpTrait,
    Pure,
)
from xdsl.utils.exceptions import PassFailedException, VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.constant_format import ConstantValue

# ---------------------------------------------------------------------------------------
# Fusion kinds
# ---------------------------------------------------------------------------------------


class FusionKind(StrEnum):
    """TVM's op pattern kinds, from most to least fusable.

    The order matters: a group's kind is the largest kind of its members (TVM combines
    patterns with max), so `rank` gives TVM's numbering.
    """

    ELEMWISE = "elemwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    OUT_ELEMWISE_FUSABLE = "out_elemwise_fusable"
    TUPLE = "tuple"
    OPAQUE = "opaque"

    @property
    def rank(self) -> int:
        """TVM's `OpPatternKind` value (kElemWise=0 ... kOpaque=8)."""
        return _KIND_RANK[self]


_KIND_RANK = {
    FusionKind.ELEMWISE: 0,
    FusionKind.BROADCAST: 1,
    FusionKind.INJECTIVE: 2,
    FusionKind.REDUCTION: 3,
    FusionKind.OUT_ELEMWISE_FUSABLE: 4,
    FusionKind.TUPLE: 7,
    FusionKind.OPAQUE: 8,
}


@dataclass(frozen=True)
class FusionKindTrait(OpTrait):
    """Declares how an op may fuse with its neighbours (TVM FuseOps pattern kind).

    Every op with a kind computes on static tensors: its verifier refuses a dynamic
    dimension here, before the op's own shape rules (traits are verified first), which
    would compare or print xDSL's placeholder size.
    """

    kind: FusionKind

    def verify(self, op: Operation) -> None:
        for what, values in (("operand", op.operands), ("result", op.results)):
            for index, value in enumerate(values):
                if isinstance(value.type, TensorType):
                    rules.check_static(tensor_type_of(value), f"{what} #{index}")


class CompoundOp(OpTrait):
    """Marks ops that front-end rewrites open into primitives before fusion (APOLLO)."""


def fusion_kind(op: Operation) -> FusionKind:
    """The fusion kind of any op; ops that do not declare one (other dialects) are opaque."""
    trait = op.get_trait(FusionKindTrait)
    return trait.kind if trait is not None else FusionKind.OPAQUE


@irdl_attr_definition
class FusionKindAttr(EnumAttribute[FusionKind], SpacedOpaqueSyntaxAttribute):
    """The kind recorded on a `graph.fused` kernel."""

    name = "graph.kind"


class ComparePredicate(StrEnum):
    """Predicates of `graph.compare`; signed for integers, ordered for floats."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


@irdl_attr_definition
class ComparePredicateAttr(EnumAttribute[ComparePredicate], SpacedOpaqueSyntaxAttribute):
    """The predicate of `graph.compare`."""

    name = "graph.predicate"


class GeluApproximation(StrEnum):
    """`none` is the exact erf form; `tanh` is the tanh approximation (as PyTorch)."""

    NONE = "none"
    TANH = "tanh"


@irdl_attr_definition
class GeluApproximationAttr(EnumAttribute[GeluApproximation], SpacedOpaqueSyntaxAttribute):
    """The approximation used by `graph.gelu`."""

    name = "graph.gelu_approximation"


# ---------------------------------------------------------------------------------------
# Type constraints
# ---------------------------------------------------------------------------------------

_SIGNLESS = EqAttrConstraint(SignednessAttr(Signedness.SIGNLESS))


def _int_widths(*widths: int) -> ParamAttrConstraint[IntegerType]:
    return ParamAttrConstraint(
        IntegerType, (IntAttr.constr(IntSetConstraint(frozenset(widths))), _SIGNLESS)
    )


@dataclass(frozen=True)
class IntegerElementConstraint(AttrConstraint[IntegerType]):
    """Integer types of the given signless and unsigned widths.

    Signed integers are signless (MLIR's arith is signless and reads them as two's
    complement); unsigned ones are `ui8`..`ui64`, lowered to signless with the unsigned
    arith ops. One constraint for both: xDSL's `AnyOf` takes one constraint per base.
    """

    signless: frozenset[int]
    unsigned: frozenset[int]

    def verify(self, attr: Attribute, constraint_context: VerificationContext) -> None:
        if isa(attr, IntegerType):
            widths = {
                Signedness.SIGNLESS: self.signless,
                Signedness.UNSIGNED: self.unsigned,
            }.get(attr.signedness.data, frozenset[int]())
            if attr.width.data in widths:
                return
        raise VerifyException(f"{attr} should be one of {self._names()}")

    def _names(self) -> str:
        names = [f"i{w}" for w in sorted(self.signless)]
        return ", ".join(names + [f"ui{w}" for w in sorted(self.unsigned)])

    def get_bases(self) -> set[type[Attribute]] | None:
        return {IntegerType}

    def mapping_type_vars(
        self, type_var_mapping: Mapping[TypeVar, AttrConstraint | IntConstraint]
    ) -> IntegerElementConstraint:
        return self


_WIDTHS = frozenset((8, 16, 32, 64))
_FLOATS = (base(Float32Type), base(Float16Type), base(BFloat16Type), base(Float64Type))

FloatElement = AnyOf(_FLOATS)
"""Element types of floating-point tensors: f32, f16, bf16, f64."""
IntElement = IntegerElementConstraint(_WIDTHS, _WIDTHS)
"""Integer element types: i8..i64 (signed, signless in MLIR) and ui8..ui64."""
NumericElement = AnyOf((*_FLOATS, IntElement))
"""Element types arithmetic is defined on."""
AnyElement = AnyOf((*_FLOATS, IntegerElementConstraint(_WIDTHS | {1}, _WIDTHS)))
"""Every element type the dialect supports: floats, integers, i1."""
BoolTensor = TensorType.constr(EqAttrConstraint(IntegerType(1)))
AnyTensor = TensorType.constr(AnyElement)

I64Array = DenseArrayBase.constr(i64)


def tensor_type_of(value: SSAValue | Attribute) -> TensorType[Attribute]:
    """The ranked tensor type of a value (or the type itself); graph values always have one."""
    typ = value.type if isinstance(value, SSAValue) else value
    # A plain isinstance: xDSL's generic `isa(typ, TensorType[Attribute])` builds a
    # constraint on every call, and this runs for every value the cost model measures.
    assert isinstance(typ, TensorType)
    return cast(TensorType[Attribute], typ)


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    """The static shape of a graph value (or of a tensor type)."""
    return tensor_type_of(value).get_shape()


def element_bytes(element_type: Attribute) -> int:
    """Storage size of one element: i1 takes a byte, floats and ints their width."""
    assert isinstance(element_type, FixedBitwidthType), element_type
    return max(1, element_type.bitwidth // 8)


def is_unsigned(element_type: Attribute) -> bool:
    """Whether `element_type` is one of ui8..ui64 (lowered with the unsigned arith ops)."""
    return isa(element_type, IntegerType) and element_type.signedness.data == Signedness.UNSIGNED


def functions(module: ModuleOp) -> Iterator[func.FuncOp]:
    """The module's functions that have a body; a body of several blocks is refused.

    Graph functions are single dataflow blocks; control flow between blocks would need
    kernels that span branches, which fusion does not attempt.
    """
    for op in module.ops:
        if not isinstance(op, func.FuncOp) or not op.body.blocks:
            continue
        if len(op.body.blocks) > 1:
            raise PassFailedException(
                f"@{op.sym_name.data} has {len(op.body.blocks)} blocks; graph passes handle "
                "functions of one block (keep control flow outside graph functions)"
            )
        yield op


def _ints(array: DenseArrayBase[IntegerType]) -> tuple[int, ...]:
    return array.get_values()


def _i64_array(values: Sequence[int]) -> DenseArrayBase[IntegerType]:
    return DenseArrayBase.from_list(i64, values)


def _check_result_shape(op: Operation, expected: Sequence[int], why: str, index: int = 0) -> None:
    actual = shape_of(op.results[index])
    if tuple(actual) != tuple(expected):
        raise VerifyException(
            f"result #{index} has shape {rules.format_shape(actual)}, expected "
            f"{rules.format_shape(expected)} ({why})"
        )


# ---------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------


class UnaryOp(IRDLOperation, abc.ABC):
    """Elementwise op with one operand; the result type equals the operand type."""

    T: ClassVar = VarConstraint("T", TensorType.constr(NumericElement))

    input = operand_def(T)
    result = result_def(T)

    assembly_format = "$input attr-dict `:` type($result)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def __init__(self, input: SSAValue | Operation):
        super().__init__(operands=[input], result_types=[SSAValue.get(input).type])


class FloatUnaryOp(UnaryOp, abc.ABC):
    """Elementwise transcendental op, defined on floating-point tensors only."""

    T: ClassVar = VarConstraint("T", TensorType.constr(FloatElement))

    input = operand_def(T)
    result = result_def(T)


@irdl_op_definition
class NegOp(UnaryOp):
    """Elementwise -x; fusion kind: elemwise."""

    name = "graph.neg"


@irdl_op_definition
class AbsOp(UnaryOp):
    """Elementwise |x|; fusion kind: elemwise."""

    name = "graph.abs"


@irdl_op_definition
class ReluOp(UnaryOp):
    """Elementwise max(x, 0); fusion kind: elemwise."""

    name = "graph.relu"


@irdl_op_definition
class ExpOp(FloatUnaryOp):
    """Elementwise e**x; fusion kind: elemwise."""

    name = "graph.exp"


@irdl_op_definition
class LogOp(FloatUnaryOp):
    """Elementwise natural logarithm; fusion kind: elemwise."""

    name = "graph.log"


@irdl_op_definition
class SqrtOp(FloatUnaryOp):
    """Elementwise square root; fusion kind: elemwise."""

    name = "graph.sqrt"


@irdl_op_definition
class RsqrtOp(FloatUnaryOp):
    """Elementwise 1/sqrt(x); fusion kind: elemwise."""

    name = "graph.rsqrt"


@irdl_op_definition
class TanhOp(FloatUnaryOp):
    """Elementwise tanh; fusion kind: elemwise."""

    name = "graph.tanh"


@irdl_op_definition
class SigmoidOp(FloatUnaryOp):
    """Elementwise 1/(1+e**-x); fusion kind: elemwise."""

    name = "graph.sigmoid"


@irdl_op_definition
class ErfOp(FloatUnaryOp):
    """Elementwise Gauss error function; fusion kind: elemwise."""

    name = "graph.erf"


class IntUnaryOp(UnaryOp, abc.ABC):
    """Elementwise bit op, defined on integer tensors only."""

    T: ClassVar = VarConstraint("T", TensorType.constr(IntElement))

    input = operand_def(T)
    result = result_def(T)


@irdl_op_definition
class SinOp(FloatUnaryOp):
    """Elementwise sine; fusion kind: elemwise."""

    name = "graph.sin"


@irdl_op_definition
class CosOp(FloatUnaryOp):
    """Elementwise cosine; fusion kind: elemwise."""

    name = "graph.cos"


@irdl_op_definition
class TanOp(FloatUnaryOp):
    """Elementwise tangent; fusion kind: elemwise."""

    name = "graph.tan"


@irdl_op_definition
class AsinOp(FloatUnaryOp):
    """Elementwise arcsine (NaN outside [-1, 1]); fusion kind: elemwise."""

    name = "graph.asin"


@irdl_op_definition
class AcosOp(FloatUnaryOp):
    """Elementwise arccosine (NaN outside [-1, 1]); fusion kind: elemwise."""

    name = "graph.acos"


@irdl_op_definition
class AtanOp(FloatUnaryOp):
    """Elementwise arctangent; fusion kind: elemwise."""

    name = "graph.atan"


@irdl_op_definition
class SinhOp(FloatUnaryOp):
    """Elementwise hyperbolic sine; fusion kind: elemwise."""

    name = "graph.sinh"


@irdl_op_definition
class CoshOp(FloatUnaryOp):
    """Elementwise hyperbolic cosine; fusion kind: elemwise."""

    name = "graph.cosh"


@irdl_op_definition
class AsinhOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic sine; fusion kind: elemwise."""

    name = "graph.asinh"


@irdl_op_definition
class AcoshOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic cosine (NaN below 1); fusion kind: elemwise."""

    name = "graph.acosh"


@irdl_op_definition
class AtanhOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic tangent; fusion kind: elemwise."""

    name = "graph.atanh"


@irdl_op_definition
class FloorOp(FloatUnaryOp):
    """Elementwise round toward -inf; fusion kind: elemwise."""

    name = "graph.floor"


@irdl_op_definition
class CeilOp(FloatUnaryOp):
    """Elementwise round toward +inf; fusion kind: elemwise."""

    name = "graph.ceil"


@irdl_op_definition
class RoundOp(FloatUnaryOp):
    """Elementwise round to the nearest integer, halves to even (ONNX Round, numpy.round);
    fusion kind: elemwise."""

    name = "graph.round"


@irdl_op_definition
class SignOp(UnaryOp):
    """Elementwise -1, 0 or 1 by the sign of x (NaN stays NaN); fusion kind: elemwise."""

    name = "graph.sign"


@irdl_op_definition
class BitwiseNotOp(IntUnaryOp):
    """Elementwise bitwise complement; fusion kind: elemwise."""

    name = "graph.bitwise_not"


@irdl_op_definition
class CastOp(IRDLOperation):
    """Elementwise conversion of the element type; shape unchanged. Fusion kind: elemwise.

    Float to integer truncates toward zero; anything to i1 is `x != 0`.
    """

    name = "graph.cast"

    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def __init__(self, input: SSAValue | Operation, result_type: TensorType[Attribute]):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        _check_result_shape(self, shape_of(self.input), "a cast keeps the shape")


@irdl_op_definition
class BitcastOp(IRDLOperation):
    """Elementwise reinterpretation of an element's bits as another element type of the
    same width (i1 as a byte, 0 or 1: ONNX BitCast of bool to uint8). Fusion: elemwise."""

    name = "graph.bitcast"

    input = operand_def(AnyTensor)
    result = result_def(AnyTensor)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def verify_(self) -> None:
        _check_result_shape(self, shape_of(self.input), "a bitcast keeps the shape")
        source = tensor_type_of(self.input).get_element_type()
        target = tensor_type_of(self.result).get_element_type()
        if element_bytes(source) != element_bytes(target) or IntegerType(1) == target:
            raise VerifyException(
                f"result element type {target} has {element_bytes(target)} bytes, expected "
                f"{element_bytes(source)} (the input's {source}; not i1)"
            )


class BinaryOp(IRDLOperation, abc.ABC):
    """Elementwise op on two tensors of one element type, with NumPy broadcasting."""

    E: ClassVar = VarConstraint("E", NumericElement)

    lhs = operand_def(TensorType.constr(E))
    rhs = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))

    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs_type = tensor_type_of(SSAValue.get(lhs))
        shape = rules.broadcast_shapes(lhs_type.get_shape(), shape_of(SSAValue.get(rhs)))
        result_type = TensorType(lhs_type.get_element_type(), shape)
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        expected = rules.broadcast_shapes(shape_of(self.lhs), shape_of(self.rhs))
        _check_result_shape(self, expected, "broadcast of the operand shapes")


@irdl_op_definition
class AddOp(BinaryOp):
    """Elementwise lhs + rhs; fusion kind: elemwise."""

    name = "graph.add"


@irdl_op_definition
class SubOp(BinaryOp):
    """Elementwise lhs - rhs; fusion kind: elemwise."""

    name = "graph.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """Elementwise lhs * rhs; fusion kind: elemwise."""

    name = "graph.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """Elementwise lhs / rhs; integers divide truncating toward zero. Fusion: elemwise."""

    name = "graph.div"


@irdl_op_definition
class MaxOp(BinaryOp):
    """Elementwise maximum; fusion kind: elemwise."""

    name = "graph.max"


@irdl_op_definition
class MinOp(BinaryOp):
    """Elementwise minimum; fusion kind: elemwise."""

    name = "graph.min"


class IntBinaryOp(BinaryOp, abc.ABC):
    """Elementwise bit op on two integer tensors of one element type, broadcasting."""

    E: ClassVar = VarConstraint("E", IntElement)

    lhs = operand_def(TensorType.constr(E))
    rhs = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))


@irdl_op_definition
class ModOp(BinaryOp):
    """Elementwise remainder; fusion kind: elemwise.

    Without `fmod` the result takes the divisor's sign (Python's %, numpy.mod, for floats
    too); with `fmod` the dividend's (C's fmod, numpy.fmod). An integer remainder by 0 is
    0, as by 1 (no trap; ONNX leaves it open).
    """

    name = "graph.mod"

    fmod = opt_prop_def(UnitAttr)

    assembly_format = (
        "$lhs `,` $rhs (`fmod` $fmod^)? attr-dict `:` functional-type(operands, results)"
    )


@irdl_op_definition
class BitwiseAndOp(IntBinaryOp):
    """Elementwise lhs & rhs; fusion kind: elemwise."""

    name = "graph.bitwise_and"


@irdl_op_definition
class BitwiseOrOp(IntBinaryOp):
    """Elementwise lhs | rhs; fusion kind: elemwise."""

    name = "graph.bitwise_or"


@irdl_op_definition
class BitwiseXorOp(IntBinaryOp):
    """Elementwise lhs ^ rhs; fusion kind: elemwise."""

    name = "graph.bitwise_xor"


@irdl_op_definition
class ShiftLeftOp(IntBinaryOp):
    """Elementwise lhs << rhs; a count of at least the width (read unsigned) gives 0, as
    NumPy. Fusion kind: elemwise."""

    name = "graph.shift_left"


@irdl_op_definition
class ShiftRightOp(IntBinaryOp):
    """Elementwise lhs >> rhs, arithmetic for signed and logical for unsigned elements; a
    count of at least the width (read unsigned) gives 0, or -1 for a negative signed lhs,
    as NumPy. Fusion kind: elemwise."""

    name = "graph.shift_right"


@irdl_op_definition
class PowOp(BinaryOp):
    """Elementwise lhs ** rhs; fusion kind: elemwise.

    On integers a negative exponent gives 0 unless lhs is 1 or -1 (1 / lhs**-rhs
    truncated toward zero; 0 ** negative gives 0 too, where C would trap).
    """

    name = "graph.pow"


@irdl_op_definition
class CompareOp(IRDLOperation):
    """Elementwise comparison with broadcasting, giving an i1 tensor. Fusion: elemwise."""

    name = "graph.compare"

    E: ClassVar = VarConstraint("E", AnyElement)

    predicate = prop_def(ComparePredicateAttr)
    lhs = operand_def(TensorType.constr(E))
    rhs = operand_def(TensorType.constr(E))
    result = result_def(BoolTensor)

    assembly_format = (
        "$predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def verify_(self) -> None:
        expected = rules.broadcast_shapes(shape_of(self.lhs), shape_of(self.rhs))
        _check_result_shape(self, expected, "broadcast of the operand shapes")


@irdl_op_definition
class SelectOp(IRDLOperation):
    """Elementwise `cond ? on_true : on_false`, all three broadcast. Fusion: elemwise."""

    name = "graph.select"

    E: ClassVar = VarConstraint("E", AnyElement)

    condition = operand_def(BoolTensor)
    on_true = operand_def(TensorType.constr(E))
    on_false = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))

    assembly_format = (
        "$condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.ELEMWISE))

    def verify_(self) -> None:
        shapes = (shape_of(self.condition), shape_of(self.on_true), shape_of(self.on_false))
        expected = rules.broadcast_shapes(*shapes)
        _check_result_shape(self, expected, "broadcast of the operand shapes")


# ---------------------------------------------------------------------------------------
# Broadcast and injective ops
# ---------------------------------------------------------------------------------------


class ShapeOp(IRDLOperation, abc.ABC):
    """One tensor in, one tensor of the same element type out, target shape in the type."""

    E: ClassVar = VarConstraint("E", AnyElement)

    input = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    # No FusionKindTrait here: xDSL unions the traits of base classes with a subclass's,
    # so each subclass declares its own kind, exactly once.


@irdl_op_definition
class BroadcastToOp(ShapeOp):
    """Broadcast to the result shape, NumPy rules; fusion kind: broadcast."""

    name = "graph.broadcast_to"

    traits = traits_def(Pure(), FusionKindTrait(FusionKind.BROADCAST))

    def verify_(self) -> None:
        rules.check_broadcastable_to(shape_of(self.input), shape_of(self.result))


@irdl_op_definition
class ReshapeOp(ShapeOp):
    """Row-major reshape to the result shape; fusion kind: injective."""

    name = "graph.reshape"

    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        element = tensor_type_of(SSAValue.get(input)).get_element_type()
        super().__init__(operands=[input], result_types=[TensorType(element, shape)])

    def verify_(self) -> None:
        rules.reshape_check(shape_of(self.input), shape_of(self.result))


@irdl_op_definition
class TransposeOp(ShapeOp):
    """Permute dimensions: result dim i is input dim perm[i]. Fusion kind: injective."""

    name = "graph.transpose"

    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    perm = prop_def(I64Array)

    assembly_format = "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, perm: Sequence[int]):
        in_type = tensor_type_of(SSAValue.get(input))
        shape = rules.transpose_shape(in_type.get_shape(), perm)
        super().__init__(
            operands=[input],
            properties={"perm": _i64_array(perm)},
            result_types=[TensorType(in_type.get_element_type(), shape)],
        )

    def verify_(self) -> None:
        perm = _ints(self.perm)
        expected = rules.transpose_shape(shape_of(self.input), perm)
        _check_result_shape(self, expected, f"input transposed by perm {list(perm)}")


@irdl_op_definition
class SliceOp(ShapeOp):
    """Strided slice: result[i] = input[starts + i * strides], sizes from the result type.

    Fusion kind: injective.
    """

    name = "graph.slice"

    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    starts = prop_def(I64Array)
    strides = prop_def(I64Array)

    assembly_format = (
        "$input `starts` `=` $starts `strides` `=` $strides attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def verify_(self) -> None:
        in_shape, out_shape = shape_of(self.input), shape_of(self.result)
        if len(in_shape) != len(out_shape):
            raise VerifyException(
                f"result rank {len(out_shape)} differs from input rank {len(in_shape)}"
            )
        rules.slice_shape(in_shape, _ints(self.starts), out_shape, _ints(self.strides))


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Concatenate tensors along `axis`; fusion kind: injective."""

    name = "graph.concat"

    E: ClassVar = VarConstraint("E", AnyElement)

    inputs = var_operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))
    axis = prop_def(IntegerAttr[I64])

    assembly_format = "$inputs `axis` `=` $axis attr-dict `:` functional-type(operands, results)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("concat needs at least one input")
        shapes = [shape_of(v) for v in self.inputs]
        expected = rules.concat_shape(shapes, self.axis.value.data)
        _check_result_shape(self, expected, f"concatenation along axis {self.axis.value.data}")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """numpy.take(data, indices, axis) (ONNX Gather): result shape is data.shape[:axis] +
    indices.shape + data.shape[axis + 1:], indices of any rank (rank 0 drops the axis).

    A negative index counts from the end (index + dim, as ONNX says). ONNX leaves an index
    still outside [0, dim) undefined; graphfuse clamps it into [0, dim - 1], in the
    reference interpreter and in compiled kernels alike, so a kernel never reads outside
    its buffer. Fusion kind: injective (each result element reads one data element and
    one index).
    """

    name = "graph.gather"

    E: ClassVar = VarConstraint("E", AnyElement)

    data = operand_def(TensorType.constr(E))
    indices = operand_def(
        MessageConstraint(
            TensorType.constr(_int_widths(32, 64)), "indices must be a tensor of i32 or i64"
        )
    )
    result = result_def(TensorType.constr(E))
    axis = prop_def(IntegerAttr[I64])

    assembly_format = (
        "$data `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    def __init__(self, data: SSAValue | Operation, indices: SSAValue | Operation, axis: int = 0):
        data_type = tensor_type_of(SSAValue.get(data))
        shape = rules.gather_shape(data_type.get_shape(), shape_of(SSAValue.get(indices)), axis)
        super().__init__(
            operands=[data, indices],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[TensorType(data_type.get_element_type(), shape)],
        )

    def verify_(self) -> None:
        axis = self.axis.value.data
        expected = rules.gather_shape(shape_of(self.data), shape_of(self.indices), axis)
        _check_result_shape(self, expected, f"gather along axis {axis}")


@irdl_op_definition
class PadOp(ShapeOp):
    """Pad with the constant `value`: `low[i]` before and `high[i]` after dimension i.

    Fusion kind: injective.
    """

    name = "graph.pad"

    traits = traits_def(Pure(), FusionKindTrait(FusionKind.INJECTIVE))

    low = prop_def(I64Array)
    high = prop_def(I64Array)
    value = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(0.0, Float64Type()))

    assembly_format = (
        "$input `low` `=` $low `high` `=` $high (`value` `=` $value^)? attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def verify_(self) -> None:
        low, high = _ints(self.low), _ints(self.high)
        expected = rules.pad_shape(shape_of(self.input), low, high)
        _check_result_shape(self, expected, f"input padded by {list(low)}, {list(high)}")


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------


class ReduceOp(IRDLOperation, abc.ABC):
    """Reduce over `axes` (negative allowed); `keepdims` keeps them as size 1."""

    E: ClassVar = VarConstraint("E", NumericElement)

    input = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))
    axes = prop_def(I64Array)
    keepdims = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` "
        "type($input) `->` type($result)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.REDUCTION))

    def __init__(self, input: SSAValue | Operation, axes: Sequence[int], keepdims: bool = False):
        in_type = tensor_type_of(SSAValue.get(input))
        shape = rules.reduce_shape(in_type.get_shape(), axes, keepdims)
        properties: dict[str, Attribute] = {"axes": _i64_array(axes)}
        if keepdims:
            properties["keepdims"] = UnitAttr()
        super().__init__(
            operands=[input],
            properties=properties,
            result_types=[TensorType(in_type.get_element_type(), shape)],
        )

    def verify_(self) -> None:
        axes = _ints(self.axes)
        expected = rules.reduce_shape(shape_of(self.input), axes, self.keepdims is not None)
        _check_result_shape(self, expected, f"reduction over axes {list(axes)}")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum over axes; fusion kind: reduction."""

    name = "graph.reduce_sum"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Maximum over axes; fusion kind: reduction."""

    name = "graph.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    """Minimum over axes; fusion kind: reduction."""

    name = "graph.reduce_min"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    """Product over axes; fusion kind: reduction."""

    name = "graph.reduce_prod"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Arithmetic mean over axes, floats only; fusion kind: reduction."""

    name = "graph.reduce_mean"

    E: ClassVar = VarConstraint("E", FloatElement)

    input = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))


# ---------------------------------------------------------------------------------------
# Out-elemwise-fusable ops: matmul, conv2d, pooling
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """Batched matmul as NumPy: [..., M, K] x [..., K, N]; fusion: out_elemwise_fusable."""

    name = "graph.matmul"

    E: ClassVar = VarConstraint("E", NumericElement)

    lhs = operand_def(TensorType.constr(E))
    rhs = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))

    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.OUT_ELEMWISE_FUSABLE))

    def verify_(self) -> None:
        expected = rules.matmul_shape(shape_of(self.lhs), shape_of(self.rhs))
        _check_result_shape(self, expected, "batched matmul of the operand shapes")


@irdl_op_definition
class Conv2dOp(IRDLOperation):
    """2-D convolution, NCHW input and OIHW weight; no bias (a following add fuses).

    padding is [top, left, bottom, right]. Fusion kind: out_elemwise_fusable.
    """

    name = "graph.conv2d"

    E: ClassVar = VarConstraint("E", NumericElement)

    input = operand_def(TensorType.constr(E))
    weight = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))
    strides = prop_def(I64Array, default_value=_i64_array((1, 1)))
    padding = prop_def(I64Array, default_value=_i64_array((0, 0, 0, 0)))
    dilations = prop_def(I64Array, default_value=_i64_array((1, 1)))
    groups = prop_def(IntegerAttr[I64], default_value=IntegerAttr(1, 64))

    assembly_format = (
        "$input `,` $weight (`strides` `=` $strides^)? (`padding` `=` $padding^)? "
        "(`dilations` `=` $dilations^)? (`groups` `=` $groups^)? attr-dict `:` "
        "functional-type(operands, results)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.OUT_ELEMWISE_FUSABLE))

    def verify_(self) -> None:
        expected = rules.conv2d_shape(
            shape_of(self.input),
            shape_of(self.weight),
            _ints(self.strides),
            _ints(self.padding),
            _ints(self.dilations),
            self.groups.value.data,
        )
        _check_result_shape(self, expected, "conv2d of the input and weight shapes")


class Pool2dOp(IRDLOperation, abc.ABC):
    """2-D pooling over NCHW windows of `kernel`; padding is [top, left, bottom, right]."""

    E: ClassVar = VarConstraint("E", NumericElement)

    input = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))
    kernel = prop_def(I64Array)
    strides = prop_def(I64Array, default_value=_i64_array((1, 1)))
    padding = prop_def(I64Array, default_value=_i64_array((0, 0, 0, 0)))

    assembly_format = (
        "$input `kernel` `=` $kernel (`strides` `=` $strides^)? "
        "(`padding` `=` $padding^)? attr-dict `:` type($input) `->` type($result)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.OUT_ELEMWISE_FUSABLE))

    def verify_(self) -> None:
        expected = rules.pool2d_shape(
            shape_of(self.input), _ints(self.kernel), _ints(self.strides), _ints(self.padding)
        )
        _check_result_shape(self, expected, "pooling of the input shape")


@irdl_op_definition
class MaxPool2dOp(Pool2dOp):
    """Max pooling; padded positions never win. Fusion kind: out_elemwise_fusable."""

    name = "graph.max_pool2d"


@irdl_op_definition
class AvgPool2dOp(Pool2dOp):
    """Average pooling, floats only. Fusion kind: out_elemwise_fusable.

    Padded positions are left out of the divisor unless `count_include_pad` (ONNX default).
    """

    name = "graph.avg_pool2d"

    E: ClassVar = VarConstraint("E", FloatElement)

    input = operand_def(TensorType.constr(E))
    result = result_def(TensorType.constr(E))
    count_include_pad = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `kernel` `=` $kernel (`strides` `=` $strides^)? "
        "(`padding` `=` $padding^)? (`count_include_pad` $count_include_pad^)? "
        "attr-dict `:` type($input) `->` type($result)"
    )


# ---------------------------------------------------------------------------------------
# Compound ops (opened into primitives before fusion)
# ---------------------------------------------------------------------------------------


class CompoundUnaryOp(IRDLOperation, abc.ABC):
    """A compound op on one float tensor whose result has the operand's type."""

    T: ClassVar = VarConstraint("T", TensorType.constr(FloatElement))

    input = operand_def(T)
    result = result_def(T)

    assembly_format = "$input attr-dict `:` type($result)"
    traits = traits_def(Pure(), CompoundOp(), FusionKindTrait(FusionKind.OPAQUE))


class AxisCompoundOp(CompoundUnaryOp, abc.ABC):
    """A compound op normalising along one axis (negative allowed)."""

    axis = prop_def(IntegerAttr[I64])

    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($result)"

    def verify_(self) -> None:
        rules.normalize_axis(self.axis.value.data, len(shape_of(self.input)))


@irdl_op_definition
class SoftmaxOp(AxisCompoundOp):
    """exp(x - max) / sum(exp(x - max)) along `axis`; compound."""

    name = "graph.softmax"


@irdl_op_definition
class LogSoftmaxOp(AxisCompoundOp):
    """x - max - log(sum(exp(x - max))) along `axis`; compound."""

    name = "graph.log_softmax"


@irdl_op_definition
class GeluOp(CompoundUnaryOp):
    """x * Phi(x), exact (erf) or tanh-approximated; compound."""

    name = "graph.gelu"

    approximate = prop_def(
        GeluApproximationAttr, default_value=GeluApproximationAttr(GeluApproximation.NONE)
    )

    assembly_format = "$input (`approximate` `=` $approximate^)? attr-dict `:` type($result)"


@irdl_op_definition
class SiluOp(CompoundUnaryOp):
    """x * sigmoid(x); compound."""

    name = "graph.silu"


@irdl_op_definition
class LayerNormOp(IRDLOperation):
    """Normalise over dimensions axis.. (mean 0, variance 1), then * scale + bias.

    scale and bias have the normalised shape input.shape[axis:]. Compound.
    """

    name = "graph.layer_norm"

    # E ties the parameters' element type to the input's; T ties the result to the input.
    E: ClassVar = VarConstraint("E", FloatElement)
    T: ClassVar = VarConstraint("T", TensorType.constr(E))

    input = operand_def(T)
    scale = operand_def(TensorType.constr(E))
    bias = operand_def(TensorType.constr(E))
    result = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    epsilon = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(1e-5, Float64Type()))

    assembly_format = (
        "$input `,` $scale `,` $bias `axis` `=` $axis (`epsilon` `=` $epsilon^)? "
        "attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), CompoundOp(), FusionKindTrait(FusionKind.OPAQUE))

    def verify_(self) -> None:
        shape = shape_of(self.input)
        axis = rules.normalize_axis(self.axis.value.data, len(shape))
        for index, operand in ((1, self.scale), (2, self.bias)):
            if shape_of(operand) != shape[axis:]:
                raise VerifyException(
                    f"operand #{index} has shape {rules.format_shape(shape_of(operand))}, "
                    f"expected {rules.format_shape(shape[axis:])} (the normalised dims)"
                )


@irdl_op_definition
class BatchNormOp(IRDLOperation):
    """Inference batch norm on NCHW (or NC...): (x - mean) / sqrt(var + eps) * scale + bias.

    scale, bias, mean and var have shape [C]. Compound.
    """

    name = "graph.batch_norm"

    # E ties the parameters' element type to the input's; T ties the result to the input.
    E: ClassVar = VarConstraint("E", FloatElement)
    T: ClassVar = VarConstraint("T", TensorType.constr(E))

    input = operand_def(T)
    scale = operand_def(TensorType.constr(E))
    bias = operand_def(TensorType.constr(E))
    mean = operand_def(TensorType.constr(E))
    variance = operand_def(TensorType.constr(E))
    result = result_def(T)
    epsilon = prop_def(FloatAttr[Float64Type], default_value=FloatAttr(1e-5, Float64Type()))

    assembly_format = (
        "$input `,` $scale `,` $bias `,` $mean `,` $variance (`epsilon` `=` $epsilon^)? "
        "attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), CompoundOp(), FusionKindTrait(FusionKind.OPAQUE))

    def verify_(self) -> None:
        shape = shape_of(self.input)
        if len(shape) < 2:
            raise VerifyException(f"input has rank {len(shape)}, expected at least 2 (N, C, ...)")
        for index, operand in enumerate(self.operands[1:], start=1):
            if shape_of(operand) != (shape[1],):
                raise VerifyException(
                    f"operand #{index} has shape {rules.format_shape(shape_of(operand))}, "
                    f"expected {shape[1]} (the channel count)"
                )


# ---------------------------------------------------------------------------------------
# Opaque ops (never fused)
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class SortOp(IRDLOperation):
    """Sort along `axis`, ascending unless `descending`; fusion kind: opaque."""

    name = "graph.sort"

    T: ClassVar = VarConstraint("T", TensorType.constr(NumericElement))

    input = operand_def(T)
    result = result_def(T)
    axis = prop_def(IntegerAttr[I64])
    descending = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `axis` `=` $axis (`descending` $descending^)? attr-dict `:` type($result)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.OPAQUE))

    def verify_(self) -> None:
        rules.normalize_axis(self.axis.value.data, len(shape_of(self.input)))


@irdl_op_definition
class TopKOp(IRDLOperation):
    """The k largest values along `axis` (sorted, descending) and their i64 indices.

    Fusion kind: opaque.
    """

    name = "graph.top_k"

    E: ClassVar = VarConstraint("E", NumericElement)

    input = operand_def(TensorType.constr(E))
    values = result_def(TensorType.constr(E))
    indices = result_def(TensorType.constr(EqAttrConstraint(i64)))
    k = prop_def(IntegerAttr[I64])
    axis = prop_def(IntegerAttr[I64])

    assembly_format = (
        "$input `k` `=` $k `axis` `=` $axis attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure(), FusionKindTrait(FusionKind.OPAQUE))

    def verify_(self) -> None:
        shape = shape_of(self.input)
        axis = rules.normalize_axis(self.axis.value.data, len(shape))
        k = self.k.value.data
        if not 1 <= k <= shape[axis]:
            raise VerifyException(f"k={k} must be in [1, {shape[axis]}] (extent of axis)")
        expected = tuple(k if i == axis else d for i, d in enumerate(shape))
        for index in range(2):
            _check_result_shape(self, expected, f"top {k} along axis {axis}", index)


@irdl_op_definition
class ExternalOp(IRDLOperation):
    """A call to an externally provided kernel `callee`; fusion never enters it.

    The reference interpreter runs it through
    `graphfuse.dialects.graph.interpreter.register_external`.
    """

    name = "graph.external"

    callee = prop_def(StringAttr)
    inputs = var_operand_def(AnyTensor)
    outputs = var_result_def(AnyTensor)

    assembly_format = "$callee `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)"
    traits = traits_def(FusionKindTrait(FusionKind.OPAQUE))


# ---------------------------------------------------------------------------------------
# Structure: constants and kernels
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A dense tensor constant (weights, scalars); fusion kind: elemwise (TVM).

    The property holds the bytes (`dense<...>`) or MLIR's handle to bytes held elsewhere
    (`dense_resource<w>`, graphfuse.resources), of the result's type either way. `value`
    is always the bytes: a handle is read when a pass first asks, so passes that never
    look at values never load a weight.
    """

    name = "graph.constant"

    T: ClassVar = VarConstraint("T", AnyTensor)

    stored = prop_def(
        ParamAttrConstraint(DenseIntOrFPElementsAttr, (T, AnyAttr()))
        | ParamAttrConstraint(DenseResourceAttr, (AnyAttr(), T)),
        prop_name="value",
    )
    """The property as written: the bytes or a `dense_resource` handle."""
    result = result_def(T)

    # A directive, not `$value`: xDSL's printer writes -inf, +inf and NaN as hex elements
    # its parser reads as integer values; ConstantValue writes a hex blob instead.
    assembly_format = "attr-dict custom<ConstantValue>($value)"
    custom_directives = (ConstantValue,)
    traits = traits_def(Pure(), ConstantLike(), FusionKindTrait(FusionKind.ELEMWISE))

    def __init__(self, value: DenseIntOrFPElementsAttr | DenseResourceAttr):
        super().__init__(properties={"value": value}, result_types=[value.get_type()])

    @property
    def value(self) -> DenseIntOrFPElementsAttr:
        """The constant's bytes, read from where a handle points (once per process)."""
        stored = self.stored
        if isinstance(stored, DenseIntOrFPElementsAttr):
            return stored
        from graphfuse.resources import resolve

        return resolve(stored, self)


@irdl_op_definition
class FusedOp(IRDLOperation):
    """One kernel: an isolated region over explicit inputs, yielding its results.

    `sym_name` names the kernel after its ops (`fused_conv2d_add_relu`) and `kind` records
    the group's fusion kind. The entry block takes one argument per input, of its type.
    """

    name = "graph.fused"

    sym_name = prop_def(StringAttr)
    kind = prop_def(FusionKindAttr)
    pattern = opt_prop_def(StringAttr)
    """Set on kernels pre-formed by a fusion pattern: the partitioner may still grow them."""
    inputs = var_operand_def(AnyTensor)
    outputs = var_result_def(AnyTensor)
    body = region_def("single_block")

    assembly_format = (
        "$sym_name `(` $inputs `)` `kind` `=` $kind (`pattern` `=` $pattern^)? attr-dict `:` "
        "functional-type($inputs, $outputs) $body"
    )
    traits = traits_def(IsolatedFromAbove())

    def verify_(self) -> None:
        block = self.body.block
        arg_types = tuple(arg.type for arg in block.args)
        input_types = tuple(v.type for v in self.inputs)
        if arg_types != input_types:
            raise VerifyException(
                f"region arguments have types ({_types(arg_types)}), expected "
                f"({_types(input_types)}) (the input types)"
            )
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException("region must end with graph.yield")
        yielded = tuple(v.type for v in terminator.values)
        output_types = tuple(self.result_types)
        if yielded != output_types:
            raise VerifyException(
                f"graph.yield gives ({_types(yielded)}), expected ({_types(output_types)}) "
                "(the result types)"
            )


def _types(types: Sequence[Attribute]) -> str:
    return ", ".join(str(t) for t in types)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a `graph.fused` region, giving its results."""

    name = "graph.yield"

    values = var_operand_def(AnyTensor)

    assembly_format = "($values^ `:` type($values))? attr-dict"
    traits = traits_def(Pure(), IsTerminator(), HasParent(FusedOp))


Graph = Dialect(
    "graph",
    [
        NegOp,
        AbsOp,
        ReluOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        TanhOp,
        SigmoidOp,
        ErfOp,
        SinOp,
        CosOp,
        TanOp,
        AsinOp,
        AcosOp,
        AtanOp,
        SinhOp,
        CoshOp,
        AsinhOp,
        AcoshOp,
        AtanhOp,
        FloorOp,
        CeilOp,
        RoundOp,
        SignOp,
        BitwiseNotOp,
        CastOp,
        BitcastOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaxOp,
        MinOp,
        PowOp,
        ModOp,
        BitwiseAndOp,
        BitwiseOrOp,
        BitwiseXorOp,
        ShiftLeftOp,
        ShiftRightOp,
        CompareOp,
        SelectOp,
        BroadcastToOp,
        ReshapeOp,
        TransposeOp,
        SliceOp,
        ConcatOp,
        GatherOp,
        PadOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceProdOp,
        ReduceMeanOp,
        MatmulOp,
        Conv2dOp,
        MaxPool2dOp,
        AvgPool2dOp,
        SoftmaxOp,
        LogSoftmaxOp,
        GeluOp,
        SiluOp,
        LayerNormOp,
        BatchNormOp,
        SortOp,
        TopKOp,
        ExternalOp,
        ConstantOp,
        FusedOp,
        YieldOp,
    ],
    [FusionKindAttr, ComparePredicateAttr, GeluApproximationAttr],
)
