"""Rewriting each TOSA function of a module into a graph-dialect function.

A function holding any `tosa.*` op gets a new body: its ops are converted in order, one
converter per TOSA op name (tosa_elementwise, tosa_tensor, tosa_nn), each reading its
operands as converted values (SSA tensors or known NumPy arrays). Every result is checked
against the type the TOSA op declares, so a converter that computes another shape is a
diagnostic, not a wrong graph. Functions without TOSA ops are left as they are.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    AnyFloat,
    FileLineColLoc,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.hints import isa

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Value, shape_of
from graphfuse.frontend.tosa.tosa_builder import TosaBuilder, TosaImportError, TosaOp, tosa_name
from graphfuse.frontend.tosa.tosa_builder import where as where_is
from graphfuse.frontend.tosa.tosa_elementwise import CONVERTERS as ELEMENTWISE
from graphfuse.frontend.tosa.tosa_elementwise import Converter
from graphfuse.frontend.tosa.tosa_nn import CONVERTERS as NN
from graphfuse.frontend.tosa.tosa_tensor import CONVERTERS as TENSOR

CONVERTERS: dict[str, Converter] = {**ELEMENTWISE, **TENSOR, **NN}
"""The TOSA ops graphfuse imports, by name (docs/tosa.md has the table)."""

_QUANTISED_OPS = frozenset({"tosa.rescale", "tosa.table", "tosa.apply_scale"})


def convert_module(module: ModuleOp) -> None:
    """Convert every function of `module` that holds TOSA ops; raise `TosaImportError`
    naming the first op that cannot be converted."""
    for op in list(module.ops):
        if isinstance(op, func.FuncOp) and op.body.blocks and _holds_tosa(op):
            _convert_function(op)


def _holds_tosa(function: func.FuncOp) -> bool:
    return any(tosa_name(op).startswith("tosa.") for op in function.walk())


def _convert_function(function: func.FuncOp) -> None:
    name = f"@{function.sym_name.data}"
    if isinstance(function.location, FileLineColLoc):
        loc = function.location
        name = f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: {name}"
    if len(function.body.blocks) > 1:
        raise TosaImportError(f"{name} has {len(function.body.blocks)} blocks; expected one")
    old = function.body.block
    for index, arg in enumerate(old.args):
        problem = _type_problem(arg.type)
        if problem is not None:
            raise TosaImportError(f"{name} argument #{index} {problem}")
    for index, typ in enumerate(function.function_type.outputs.data):
        problem = _type_problem(typ)
        if problem is not None:
            raise TosaImportError(f"{name} result #{index} {problem}")
    new = Block(arg_types=old.arg_types)
    builder = TosaBuilder(new)
    values: dict[SSAValue, Value] = dict(zip(old.args, new.args, strict=True))
    for index, op in enumerate(old.ops):
        builder.node = where_is(op, index)
        if isinstance(op, func.ReturnOp):
            results = [
                builder.tensor(_operand(op, number, values, builder))
                for number in range(len(op.operands))
            ]
            new.add_op(func.ReturnOp(*results))
        else:
            _convert_op(op, builder, values)
    _drop_unused(new)
    function.body.detach_block(old)
    function.body.add_block(new)
    # Producers' argument and result attributes (TFLite's ml_program.identifier) mean
    # nothing to graphfuse, and the CPU build does not take them on an entry function.
    function.arg_attrs = None
    function.res_attrs = None


def _drop_unused(block: Block) -> None:
    """Erase graph ops whose results nothing uses (a transpose an activation moved past,
    `TosaBuilder.through_transpose`), last first so their operands' ops follow."""
    for op in reversed(list(block.ops)):
        if op.results and not any(result.uses for result in op.results):
            block.erase_op(op)


def _operand(
    op: Operation, number: int, values: dict[SSAValue, Value], builder: TosaBuilder
) -> Value:
    found = values.get(op.operands[number])
    if found is None:
        raise builder.fail(f"operand #{number} is used before it is defined")
    return found


def _convert_op(op: Operation, builder: TosaBuilder, values: dict[SSAValue, Value]) -> None:
    name = tosa_name(op)
    converter = CONVERTERS.get(name)
    if converter is None:
        raise builder.fail(_why_unsupported(name))
    for kind, types in (("operand", op.operand_types), ("result", op.result_types)):
        for number, typ in enumerate(types):
            problem = _type_problem(typ)
            if problem is not None:
                raise builder.fail(f"{kind} #{number} {problem}")
    operands = [_operand(op, number, values, builder) for number in range(len(op.operands))]
    results = converter(TosaOp(op, name, operands, builder))
    for number, (old, new) in enumerate(zip(op.results, results, strict=True)):
        _check_result(builder, number, old.type, new)
        values[old] = new


def _why_unsupported(name: str) -> str:
    if name in _QUANTISED_OPS:
        return "is quantised arithmetic, which graphfuse does not import (float TOSA only)"
    if name.startswith("tosa."):
        return "is not supported by graphfuse's TOSA import (docs/tosa.md lists the ops it takes)"
    return "is not a TOSA op: a TOSA function holds tosa.* ops and func.return only"


def _type_problem(typ: Attribute) -> str | None:
    """Why a TOSA value of this type cannot be imported, or None (`!tosa.shape` values
    are shapes known at import)."""
    if not isa(typ, TensorType[Attribute]):
        known_shape = str(typ).startswith("!tosa.shape")
        return None if known_shape else f"has type {typ}: graphfuse takes ranked tensors only"
    shape = typ.get_shape()
    if any(size < 0 for size in shape):
        return f"has a dynamic dimension ({typ}): graphfuse compiles static shapes only"
    element: Attribute = typ.get_element_type()
    if not isinstance(element, AnyFloat) and not isa(element, IntegerType):
        return (
            f"has element type {element} ({typ}): quantised types are not supported "
            "(float and integer TOSA only)"
        )
    return None


def _check_result(builder: TosaBuilder, number: int, typ: Attribute, value: Value) -> None:
    if not isa(typ, TensorType[Attribute]):
        return
    expected = graph.tensor_type_of(typ).get_shape()
    if tuple(shape_of(value)) != tuple(expected):
        raise builder.fail(
            f"result #{number} converts to shape {rules.format_shape(shape_of(value))}, but "
            f"the op's type says {typ}"
        )
    if isinstance(value, SSAValue):
        element = graph.tensor_type_of(value).get_element_type()
        if element != graph.tensor_type_of(typ).get_element_type():
            raise builder.fail(f"result #{number} converts to element type {element}, not {typ}")
