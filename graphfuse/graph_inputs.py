"""What graphfuse takes as an input graph, checked once before any pass runs.

The graph dialect's verifiers check each op; what they cannot see is the module as a
whole: ops must sit inside functions, and every tensor must be static, non-empty and of an
element type the graph ops take (`func.func` accepts any argument type, so an unused f64
argument would otherwise slip through to the lowering). A function that is run or compiled
must also have a body (`check_entry`), as must the functions it calls (`check_calls`); a
declaration elsewhere in the module is left alone.
Each problem is one line naming the function, argument or op, and its location.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Operation
from xdsl.traits import SymbolTable
from xdsl.utils.hints import isa

from graphfuse.dialects.graph.shape_rules import DYNAMIC_DIMENSIONS
from graphfuse.parsing import GraphfuseError, location_of, op_error

ELEMENT_TYPES = "f32, f16, bf16, f64, i8..i64, ui8..ui64 or i1"
"""The element types graph ops take, as diagnostics list them."""


def check_graph_module(module: ModuleOp) -> None:
    """Raise a `GraphfuseError` for the first thing graphfuse cannot take as input."""
    for op in module.ops:
        if not isinstance(op, func.FuncOp):
            raise op_error(op, "is at module top level: graph ops belong inside a func.func")
        check_function(op)


def check_function(function: func.FuncOp) -> None:
    """A function whose arguments, results and values are all supported tensors (a
    declaration is checked where it is run: `check_entry`)."""
    name = f"@{function.sym_name.data}"
    # An empty argument or result holds no data; the importer folds what is computed from
    # one (a reduction over an empty set is a constant), so only ops' values must be
    # non-empty (an empty constant, returned as it is, is no computation either).
    for index, typ in enumerate(function.function_type.inputs.data):
        _check_type(typ, f"{location_of(function)}: {name} argument #{index}", empty=True)
    for index, typ in enumerate(function.function_type.outputs.data):
        _check_type(typ, f"{location_of(function)}: {name} result #{index}", empty=True)
    for op in function.body.walk():
        for index, result in enumerate(op.results):
            empty = op.name == "graph.constant"
            _check_type(result.type, _op_where(op, index), empty)
        if op.name == "func.return":
            continue
        for index, operand in enumerate(op.operands):
            if isa(operand.type, TensorType) and 0 in operand.type.get_shape():
                raise GraphfuseError(
                    f"{location_of(op)}: '{op.name}' op operand #{index} is empty "
                    f"({operand.type}): ops on empty tensors are not supported (an ONNX "
                    "model's are folded at import)"
                )


def check_entry(function: func.FuncOp) -> func.FuncOp:
    """`function`, to be run or compiled: it must have a body."""
    if function.is_declaration:
        raise GraphfuseError(
            f"{location_of(function)}: function @{function.sym_name.data} is a declaration "
            "without a body: graphfuse runs and compiles functions of graph ops"
        )
    return function


def check_calls(function: func.FuncOp) -> func.FuncOp:
    """`function`, a graph function to be run or compiled: every function it calls,
    directly or through its callees, has a body. A declaration would otherwise reach the
    interpreter or the tools as a symbol nothing defines. Checked on the graph module
    only: a lowered one calls runtime functions that are declarations by design."""
    reached = {function.sym_name.data}
    callers = [function]
    while callers:
        for callee in _callees(callers.pop()):
            if callee.sym_name.data not in reached:
                reached.add(callee.sym_name.data)
                callers.append(callee)
    return function


def _callees(caller: func.FuncOp) -> Iterator[func.FuncOp]:
    """The functions `caller`'s `func.call`s name; a declaration among them is refused."""
    for call in caller.body.walk():
        if not isinstance(call, func.CallOp):
            continue
        callee = SymbolTable.lookup_symbol(call, call.callee)
        if not isinstance(callee, func.FuncOp):
            continue  # the call's verifier names a callee that is not a function
        if callee.is_declaration:
            raise GraphfuseError(
                f"{location_of(call)}: 'func.call' op in @{caller.sym_name.data} calls "
                f"@{callee.sym_name.data}, a declaration without a body: graphfuse runs and "
                "compiles functions of graph ops (give it a body of graph ops)"
            )
        yield callee


def _op_where(op: Operation, index: int) -> str:
    return f"{location_of(op)}: '{op.name}' op result #{index}"


def _check_type(typ: Attribute, where: str, empty: bool = False) -> None:
    problem = type_problem(typ, empty)
    if problem is not None:
        raise GraphfuseError(f"{where} {problem}")


def type_problem(typ: Attribute, empty: bool = False) -> str | None:
    """Why graphfuse cannot take a value of this type (`empty`: a zero-size one is fine),
    or None."""
    if not isinstance(typ, TensorType):
        return f"has type {typ}: graphfuse takes ranked tensors only"
    shape = typ.get_shape()
    for dim, size in enumerate(shape):
        if size < 0:
            return (
                f"has a dynamic dimension (#{dim} of {typ}): {DYNAMIC_DIMENSIONS} (an ONNX "
                "model's are bound by --input-shape)"
            )
        if size == 0 and not empty:
            return f"is empty (dimension #{dim} of {typ} is 0): empty tensors are not supported"
    element = cast(TensorType[Attribute], typ).get_element_type()
    if not _supported_element(element):
        return f"has element type {element} ({typ}): graph ops take {ELEMENT_TYPES}"
    return None


def _supported_element(element: Attribute) -> bool:
    if isinstance(element, Float32Type | Float16Type | BFloat16Type | Float64Type):
        return True
    if not isa(element, IntegerType):
        return False
    width, signedness = element.width.data, element.signedness.data
    if signedness is Signedness.UNSIGNED:
        return width in (8, 16, 32, 64)
    return signedness is Signedness.SIGNLESS and width in (1, 8, 16, 32, 64)
