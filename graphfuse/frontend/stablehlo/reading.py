"""Reading StableHLO text through jaxlib's own MLIR bindings: parse, then look.

The text is parsed by MLIR itself (jaxlib's `ir.Module.parse`, with the func, stablehlo
and chlo dialects registered as JAX registers them), never by a parser of ours. This module
turns what the bindings give into what the importer needs: element and tensor types as
xDSL attributes, dense constants as NumPy arrays, integer attributes as lists, and an op's
location as a short label for messages (`jit(f)/add at model.py:12`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from jaxlib.mlir import ir, passmanager
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

from graphfuse.frontend.onnx_builder import ImportFailure

Array = np.ndarray[Any, Any]
IrValue = ir.Value[Any]

stablehlo: Any = importlib.import_module("jaxlib.mlir.dialects.stablehlo")
"""jaxlib's stablehlo dialect module (DotDimensionNumbers, ...): it ships no type stubs."""
chlo: Any = importlib.import_module("jaxlib.mlir.dialects.chlo")
arith: Any = importlib.import_module("jaxlib.mlir.dialects.arith")
func: Any = importlib.import_module("jaxlib.mlir.dialects.func")

ELEMENT_TYPES: dict[str, Attribute] = {
    "f32": Float32Type(),
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "f64": Float64Type(),
    "i1": IntegerType(1),
    **{f"i{w}": IntegerType(w) for w in (8, 16, 32, 64)},
    **{f"ui{w}": IntegerType(w, Signedness.UNSIGNED) for w in (8, 16, 32, 64)},
}
"""StableHLO element types by their MLIR spelling; StableHLO's signless iN are signed."""


class StablehloImportError(ImportFailure):
    """StableHLO graphfuse cannot import; the message names the op and what is wrong.

    An ImportFailure (a GraphfuseError), as the ONNX importer's: one line, no traceback.
    """


def make_context() -> ir.Context:
    """A context that knows what `jax.jit(f).lower(...).as_text()` prints: the upstream
    dialects JAX registers (func, arith, ...) plus stablehlo and chlo."""
    # jaxlib's own registration of the upstream dialects JAX uses (its `_jax_mlir_ext`,
    # which jax.interpreters.mlir calls); loaded by name, as jaxlib exports no public path.
    extension = importlib.import_module("jaxlib.mlir._mlir_libs._jax_mlir_ext")
    registry = ir.DialectRegistry()
    extension.register_dialects(registry)
    context = ir.Context()
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    stablehlo.register_dialect(context)
    chlo.register_dialect(context)
    return context


def parse_module(context: ir.Context, text: str) -> ir.Module:
    """`text` parsed and verified by MLIR; a failure is one line with MLIR's first error."""
    module: Any = ir.Module  # the stub's `context` parameter names an unknown type
    with context:
        try:
            return module.parse(text)
        except ir.MLIRError as error:
            details = [d for d in error.error_diagnostics if d.message]
            first = details[0] if details else None
            where = f" at {location_label(first.location)}" if first is not None else ""
            what = first.message if first is not None else str(error).splitlines()[0]
            message = " ".join(what.split())
            raise StablehloImportError(f"StableHLO text does not parse{where}: {message}") from None


# ---- structure: jaxlib's stubs leave these lists' items untyped --------------------------


def operands_of(op: ir.Operation) -> list[IrValue]:
    untyped: Any = op
    return list(untyped.operands)


def results_of(op: ir.Operation) -> list[IrValue]:
    untyped: Any = op
    return list(untyped.results)


def body_of(op: ir.Operation) -> ir.Block | None:
    """The first block of the op's only region; None without one."""
    untyped: Any = op
    regions = list(untyped.regions)
    if len(regions) != 1 or not regions[0].blocks:
        return None
    return regions[0].blocks[0]


def arguments_of(block: ir.Block) -> list[IrValue]:
    untyped: Any = block
    return list(untyped.arguments)


def ops_of(block: ir.Block) -> list[ir.Operation]:
    return [view.operation for view in block.operations]


def unknown_location() -> ir.Location:
    untyped: Any = ir.Location  # the stub's `context` parameter names an unknown type
    return untyped.unknown()


# ---- locations --------------------------------------------------------------------------


def location_label(location: ir.Location, fallback_place: str = "") -> str:
    """`name at file:line`, `line N` for text without a file, or '' when nothing is known;
    `fallback_place` stands in for a location without a place (an op of an inlined
    function, placed at its call)."""
    name, place = location_parts(location)
    place = place or fallback_place
    if name and place:
        return f"{name} at {place}"
    return name or place


def location_parts(location: ir.Location) -> tuple[str, str]:
    """The name JAX gave an op (`jit(f)/add`) and its place (`file.py:12`, `line 4`)."""
    return _name_and_place(location)


_OWN_CODE = {
    str(Path(__file__).parents[2]) + os.sep,
    str(Path(__file__).resolve().parents[2]) + os.sep,
}
"""graphfuse's package folder, as written and resolved: frames there are not the user's."""


def _file_place(location: ir.FileLineColLoc) -> str:
    """`file.py:12`, `line 4` for text without a file, '' in graphfuse's own files (from_jax's
    frame: the place is its caller's)."""
    if location.filename in ("-", ""):
        return f"line {location.start_line}"
    if any(location.filename.startswith(folder) for folder in _OWN_CODE):
        return ""
    return f"{location.filename}:{location.start_line}"


def _name_and_place(location: ir.Location) -> tuple[str, str]:
    if type(location) is ir.Location:  # diagnostics give the base class: downcast
        untyped: Any = ir.Location  # the stub's `context` parameter names an unknown type
        location = untyped.from_attr(location.attr, location.context)
    if isinstance(location, ir.FileLineColLoc):
        return "", _file_place(location)
    if isinstance(location, ir.NameLoc):
        _, place = _name_and_place(location.child_loc)
        return location.name_str, place
    if isinstance(location, ir.CallSiteLoc):
        # The callee is the innermost frame: the line of the user's code that made the op.
        name, place = _name_and_place(location.callee)
        return (name, place) if place else (name, _name_and_place(location.caller)[1])
    if isinstance(location, ir.FusedLoc):
        for inner in location.locations:
            if isinstance(inner, ir.Location):
                found = _name_and_place(inner)
                if any(found):
                    return found
    return "", ""


# ---- types ------------------------------------------------------------------------------


def tensor_type(typ: ir.Type, what: str) -> TensorType[Attribute]:
    """An MLIR ranked tensor type of static shape as an xDSL TensorType; `what` names the
    value in the message when it is not one."""
    if not isinstance(typ, ir.RankedTensorType):
        raise StablehloImportError(f"{what} has type {typ}; graphfuse needs ranked tensors")
    if not typ.has_static_shape:
        raise StablehloImportError(
            f"{what} has dynamic shape {typ}; graphfuse needs static shapes (lower the "
            "function with concrete example arguments)"
        )
    return TensorType(element_type(typ.element_type, what), list(typ.shape))


def element_type(typ: ir.Type, what: str) -> Attribute:
    found = ELEMENT_TYPES.get(str(typ))
    if found is None:
        supported = ", ".join(ELEMENT_TYPES)
        raise StablehloImportError(
            f"{what} has element type {typ}, which graphfuse does not support (only {supported})"
        )
    return found


# ---- attributes -------------------------------------------------------------------------


def dense_to_numpy(attr: ir.Attribute, what: str) -> Array:
    """A dense elements attribute as an array; a splat stays a broadcast view of one
    element, so a large splat (zeros of an activation's shape) costs nothing."""
    if not isinstance(attr, ir.DenseElementsAttr):
        raise StablehloImportError(f"{what}: value {attr} is not a dense elements attribute")
    typ = attr.type
    assert isinstance(typ, ir.ShapedType)
    shape = tuple(typ.shape)
    name = str(typ.element_type)
    if name == "bf16":  # NumPy has no bf16: the values widened to float32, exactly
        if attr.is_splat:
            value = np.array([ir.FloatAttr(attr.get_splat_value()).value], np.float32)
            return _shaped(value, shape)
        bits = _bf16_bits(attr, typ).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if attr.is_splat:
        first = np.array(_single(attr), copy=True)
        return np.broadcast_to(first.reshape(-1)[:1].reshape(()), shape)
    return np.array(attr, copy=True).reshape(shape)


def _bf16_bits(attr: ir.DenseElementsAttr, typ: ir.ShapedType) -> Array:
    """The bits of a bf16 attribute's elements as a flat uint16 array.

    jaxlib's bindings neither iterate bf16 elements nor expose them as a buffer, so MLIR
    reinterprets them: `arith.bitcast` to i16 of the constant, folded by its canonicalizer
    (DenseElementsAttr's own bitcast), gives an i16 attribute NumPy reads."""
    tensor: Any = ir.RankedTensorType  # the stubs' `context` parameters name unknown types
    integer: Any = ir.IntegerType
    with unknown_location():
        bits_type: ir.Type = tensor.get(list(typ.shape), integer.get_signless(16))
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            function = func.FuncOp("bits", ([], [bits_type]))
            with ir.InsertionPoint(function.add_entry_block()):
                constant = arith.ConstantOp(typ, attr)
                func.ReturnOp([arith.BitcastOp(bits_type, constant.result).result])
    passmanager.PassManager.parse("builtin.module(func.func(canonicalize))").run(module.operation)
    returned = operands_of(list(ops_of(function.entry_block))[-1])[0]
    folded: Any = returned.owner
    if folded.name != "arith.constant":
        raise StablehloImportError(f"MLIR did not fold the bits of the bf16 constant {typ}")
    return (
        np.array(ir.DenseIntElementsAttr(folded.attributes["value"]), copy=True)
        .view(np.uint16)
        .reshape(-1)
    )


def _single(attr: ir.DenseElementsAttr) -> Array:
    """The splat element of `attr`, as an array of its dtype (through a one-element attr)."""
    typ = attr.type
    assert isinstance(typ, ir.ShapedType)
    tensor: Any = ir.RankedTensorType  # the stub's `context` parameter names an unknown type
    one_type: ir.Type = tensor.get_unchecked([1], typ.element_type)
    one = ir.DenseElementsAttr.get_splat(one_type, attr.get_splat_value())
    return np.array(one, copy=True)


def _shaped(values: Array, shape: Sequence[int]) -> Array:
    if values.size == 1:
        return np.broadcast_to(values.reshape(()), tuple(shape))
    return values.reshape(tuple(shape))


def ints(attr: ir.Attribute | None) -> list[int]:
    """An integer array attribute (dense i64 array or dense int elements) as a flat list;
    an absent optional attribute is the empty list."""
    if attr is None:
        return []
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return list(attr)
    if isinstance(attr, ir.DenseIntElementsAttr):
        return [int(v) for v in np.array(attr, copy=True).reshape(-1)]
    if isinstance(attr, ir.IntegerAttr):
        return [attr.value]
    if isinstance(attr, ir.DenseBoolArrayAttr):
        return [int(v) for v in attr]
    raise StablehloImportError(f"attribute {attr} is not an integer array")
