"""StableHLO modules (what `jax.jit(f).lower(...).as_text()` prints) to graph-dialect modules.

The public `main` becomes `func.func @main` with one tensor argument per argument and one
result per result. Ops are read in order from jaxlib's parsed module and handed to one
converter per op name (`table.CONVERTERS`); `func.call`s of private functions (JAX emits
them for jitted helpers such as relu or clip) are inlined. Finally an elementwise op
reading a `graph.broadcast_to` reads the unbroadcast value instead where NumPy
broadcasting gives the same result, as an ONNX model's bias add does, so fusion patterns
(matmul + bias, conv + bias + relu) see the same IR from either front end.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Value
from graphfuse.frontend.stablehlo import contractions, elementwise, reductions, shapes
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp
from graphfuse.frontend.stablehlo.reading import (
    IrValue,
    StablehloImportError,
    arguments_of,
    body_of,
    location_label,
    location_parts,
    make_context,
    operands_of,
    ops_of,
    parse_module,
    results_of,
    tensor_type,
    unknown_location,
)
from graphfuse.frontend.stablehlo.table import CONVERTERS

_FAMILIES = (contractions, elementwise, reductions, shapes)  # importing them fills CONVERTERS
_MAX_CALL_DEPTH = 64


def import_text(text: str, name: str = "main") -> ModuleOp:
    """The StableHLO module in `text` as a verified graph-dialect module."""
    context = make_context()
    module = parse_module(context, text)
    with context, unknown_location():
        return _Importer(module).run(name)


def op_label(op: ir.Operation, caller_place: str = "") -> str:
    """`stablehlo.add (jit(f)/add at f.py:4)`: the op, the name JAX gave it and where it
    is (for an op of an inlined function without a place: where it was called)."""
    where = location_label(op.location, caller_place)
    return f"{op.name} ({where})" if where else op.name


class _Importer:
    def __init__(self, module: ir.Module) -> None:
        self.functions: dict[str, ir.Operation] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                symbol = ir.StringAttr(op.operation.attributes["sym_name"]).value
                self.functions[symbol] = op.operation
        self.block = Block()
        self.builder = HloBuilder(self.block)

    def run(self, name: str) -> ModuleOp:
        entry = self._entry()
        body = body_of(entry)
        assert body is not None  # _entry checked
        arguments: list[Value] = []
        for index, argument in enumerate(arguments_of(body)):
            typ = tensor_type(argument.type, f"argument #{index} of @main")
            arguments.append(self.block.insert_arg(typ, len(self.block.args)))
        results = [self.builder.tensor(v) for v in self._inline(body, arguments, [])]
        _check_results(entry, results)
        self.block.add_op(func.ReturnOp(*results))
        _unbroadcast_operands(self.block)
        function = func.FuncOp(
            name,
            FunctionType.from_lists([a.type for a in self.block.args], [r.type for r in results]),
            Region(self.block),
        )
        module = ModuleOp([function])
        try:
            module.verify()
        except VerifyException as error:
            text = " ".join(str(error).split())
            raise StablehloImportError(f"the imported function does not verify: {text}") from None
        return module

    def _entry(self) -> ir.Operation:
        entry = self.functions.get("main")
        if entry is None:
            found = ", ".join(f"@{n}" for n in self.functions) or "none"
            raise StablehloImportError(f"the module has no function @main (functions: {found})")
        if body_of(entry) is None:
            raise StablehloImportError("@main has no body")
        return entry

    def _inline(self, body: ir.Block, arguments: Sequence[Value], calls: list[str]) -> list[Value]:
        """Import the ops of `body` with its arguments bound to `arguments`; returns the
        values its terminator returns. `calls` holds the places of the calls it is in."""
        values: dict[IrValue, Value] = dict(zip(arguments_of(body), arguments, strict=True))
        for op in ops_of(body):
            operands = [values[v] for v in operands_of(op)]
            if op.name in ("func.return", "stablehlo.return"):
                return operands
            results = self._convert(op, operands, calls)
            outputs = results_of(op)
            if len(results) != len(outputs):
                raise StablehloImportError(f"{op_label(op)}: gave {len(results)} results")
            values.update(zip(outputs, results, strict=True))
        raise StablehloImportError("a function body has no func.return")

    def _convert(self, op: ir.Operation, operands: list[Value], calls: list[str]) -> list[Value]:
        label = op_label(op, calls[-1] if calls else "")
        if op.name == "func.call":
            return self._call(op, operands, calls, label)
        for index, result in enumerate(results_of(op)):  # types first: dynamic shapes
            tensor_type(result.type, f"{label}: result #{index}")
        converter = CONVERTERS.get(op.name)
        if converter is None:
            raise StablehloImportError(_unsupported(op, label))
        b = self.builder
        b.node, b.op_type, b.outputs = label, "", ["result"]
        # MLIR has parsed and verified the op: what a converter cannot take it says itself
        # (StablehloImportError); any other exception is a bug of graphfuse's, and shows so.
        try:
            return converter(b, HloOp(op, operands, label))
        except VerifyException as error:
            raise StablehloImportError(f"{label}: {' '.join(str(error).split())}") from None

    def _call(
        self, op: ir.Operation, operands: list[Value], calls: list[str], label: str
    ) -> list[Value]:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        function = self.functions.get(callee)
        body = body_of(function) if function is not None else None
        if body is None:
            raise StablehloImportError(f"{label}: calls @{callee}, which has no body here")
        if len(calls) >= _MAX_CALL_DEPTH:
            raise StablehloImportError(f"{label}: calls nest deeper than {_MAX_CALL_DEPTH}")
        place = location_parts(op.location)[1] or (calls[-1] if calls else "")
        return self._inline(body, operands, [*calls, place])


def _unsupported(op: ir.Operation, label: str) -> str:
    if op.name == "stablehlo.custom_call" and "call_target_name" in op.attributes:
        target = ir.StringAttr(op.attributes["call_target_name"]).value
        return (
            f"{label}: custom_call @{target} is not supported (graphfuse reads StableHLO ops only)"
        )
    return (
        f"{label}: not supported by graphfuse's StableHLO import "
        "(docs/stablehlo.md lists the ops it reads)"
    )


def _check_results(entry: ir.Operation, results: Sequence[SSAValue]) -> None:
    declared = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value).results
    for index, (typ, value) in enumerate(zip(declared, results, strict=True)):
        expected = tensor_type(typ, f"result #{index} of @main")
        if value.type != expected:
            raise StablehloImportError(
                f"result #{index} of @main was imported as {value.type}, expected {expected}"
            )


_BROADCASTING = (graph.BinaryOp, graph.CompareOp, graph.SelectOp)


def _unbroadcast_operands(block: Block) -> None:
    """Elementwise ops read the input of a `graph.broadcast_to` operand where NumPy
    broadcasting gives the same result shape; broadcasts left unused are erased."""
    for op in block.ops:
        if not isinstance(op, _BROADCASTING):
            continue
        operands = list(op.operands)
        for index, operand in enumerate(operands):
            owner = operand.owner
            if not isinstance(owner, graph.BroadcastToOp):
                continue
            trial = [*operands[:index], owner.input, *operands[index + 1 :]]
            if _broadcast(trial) == _broadcast(operands):
                operands = trial
        op.operands = operands
    for op in reversed(list(block.ops)):
        if isinstance(op, graph.BroadcastToOp) and not op.result.uses:
            op.detach()
            op.erase()


def _broadcast(values: Sequence[SSAValue]) -> tuple[int, ...]:
    return rules.broadcast_shapes(*(graph.shape_of(v) for v in values))
