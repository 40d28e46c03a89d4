"""ONNX models to graph-dialect modules: `graphfuse import model.onnx` and `from_onnx`.

The model becomes `func.func @main` whose arguments are the graph inputs that are not
initializers, in order, and whose results are the graph outputs. Shapes must be static:
a symbolic dimension is bound with `input_shapes` (`--input-shape ids=2x16`) or reported.

Nodes whose inputs are all known at import time (initializers, `Constant`, `Shape` of a
static tensor, and everything computed only from those: the shape arithmetic exporters
emit) are evaluated with ONNX's reference evaluator and never reach the graph. The rest
go through one converter per op type (onnx_ops). Every unsupported op type is reported at
once, with the names of its nodes, so a user sees the whole gap in one run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Array,
    Builder,
    ImportFailure,
    Value,
    element_of,
    element_type_of,
    shape_of,
)
from graphfuse.frontend.onnx_checks import (
    MIN_OPSET,
    STANDARD_DOMAINS,
    as_model,
    load_model,
    node_label,
    parse_constants,
    parse_input_shapes,
    read_initializer,
)
from graphfuse.frontend.onnx_control_flow import convert_if, convert_loop, convert_scan
from graphfuse.frontend.onnx_inlining import expand_function, function_body, function_schema
from graphfuse.frontend.onnx_ops import CONVERTERS

_NOT_FOLDED = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    # Built as graph ops even on constants (graph-simplify folds them with graphfuse's own
    # reference): onnx.reference's pooling reads asymmetric pads wrongly (MaxPool 2x2 with
    # pads [1, 1, 0, 0] on 1x16 gives 2x15, not 1x16), and none of them computes a shape.
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Conv",
}
FUNCTION_DOMAINS = ("ai.onnx.preview",)
"""Domains besides the default whose ops are expanded from their function bodies."""
_FOLDED_WHEN_KNOWN = ("Shape", "Size", "Constant", "ConstantOfShape", "Range")
"""Ops without a converter that the importer evaluates when their inputs are known."""
_CONTROL_FLOW = {"If": convert_if, "Loop": convert_loop, "Scan": convert_scan}
__all__ = ["from_onnx", "load_model", "parse_constants", "parse_input_shapes"]


class _Evaluator(Protocol):
    """What the import calls of onnx.reference.ReferenceEvaluator, whose `run` leaves
    `output_names` unannotated."""

    def run(self, output_names: None, feed_inputs: dict[str, Any]) -> dict[str, Any] | list[Any]:
        """All outputs (`output_names` None) for the given inputs."""
        ...


def _evaluate_quietly(evaluator: _Evaluator, feeds: dict[str, Any]) -> dict[str, Any] | list[Any]:
    """The node's outputs, without NumPy's warnings: a folded value may hold log(0) or an
    inf cast to an integer that the model masks later (T5's relative-position buckets),
    and an import is no place to print them."""
    with np.errstate(all="ignore"):
        return evaluator.run(None, feeds)


def from_onnx(
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    name: str = "main",
    constants: Mapping[str, Any] | None = None,
) -> ModuleOp:
    """An ONNX model as a verified graph-dialect module.

    `model` is an onnx.ModelProto, its serialized bytes or the path of an .onnx file;
    anything else, and any model graphfuse cannot import, is an ImportFailure.
    `constants` binds graph inputs to values known now (axes, shapes or pads a model takes
    as inputs): they are folded in and leave the function's arguments.
    """
    # The weights of a model file are read where they are used, not into the model.
    path = Path(model) if isinstance(model, str | Path) else None
    loaded = as_model(model, initializers=False)
    importer = _Importer(loaded, dict(input_shapes or {}), dict(constants or {}), path)
    return importer.run(name)


def _hint(name: str) -> str | None:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    if not cleaned:
        return None
    return cleaned if not cleaned[0].isdigit() else "v" + cleaned


class _Importer:
    def __init__(
        self,
        model: Any,
        input_shapes: dict[str, Sequence[int]],
        constants: dict[str, Any],
        path: Path | None = None,
    ) -> None:
        self.model = model
        self.path = path
        """The model's file: its initializers' external data is read from beside it."""
        self.graph = model.graph
        self.input_shapes = input_shapes
        self.constants = constants
        self.values: dict[str, Value] = {}
        self.unsupported: dict[str, list[str]] = {}
        self.poisoned: set[str] = set()
        self.block = Block()
        self.builder = Builder(self.block)
        self.expansions = 0
        self.local_functions = {(f.domain, f.name): f for f in model.functions}
        self.opset_override: dict[str, int] | None = None

    def run(self, name: str) -> ModuleOp:
        self._load_initializers()
        arg_types = self._add_inputs()
        for index, node in enumerate(self.graph.node):
            self.convert(node, index)
        if self.unsupported:
            raise ImportFailure(self.unsupported_listing())
        results = self._outputs()
        self.block.add_op(func.ReturnOp(*results))
        function = func.FuncOp(
            name,
            FunctionType.from_lists(arg_types, [r.type for r in results]),
            Region(self.block),
        )
        module = ModuleOp([function])
        _verify(module, self.builder.origin)
        return module

    def unsupported_listing(self) -> str:
        listing = "; ".join(
            f"{op} ({', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
            for op, nodes in sorted(self.unsupported.items())
        )
        return f"unsupported ONNX ops: {listing}"

    # ---- set-up -----------------------------------------------------------------------

    def _load_initializers(self) -> None:
        for tensor in self.graph.initializer:
            array = read_initializer(tensor, self.path)
            self.values[tensor.name] = array
            self.builder.names[id(array)] = (array, tensor.name)

    def _add_inputs(self) -> list[Attribute]:
        arguments = [i for i in self.graph.input if i.name not in self.values]
        names = {i.name for i in arguments}  # not initializers listed as inputs too
        for option, bindings in (
            ("--input-shape", self.input_shapes),
            ("--constant", self.constants),
        ):
            for bound in bindings:
                if bound not in names:
                    raise ImportFailure(
                        f"{option} names '{bound}', which is not a model input "
                        f"(inputs: {', '.join(sorted(names))})"
                    )
        types: list[Attribute] = []
        for graph_input in arguments:
            if graph_input.name in self.constants:
                self.values[graph_input.name] = _constant_input(
                    graph_input, self.constants[graph_input.name]
                )
                continue
            typ = TensorType(_input_element(graph_input), self._input_shape(graph_input))
            types.append(typ)
            argument = self.block.insert_arg(typ, len(self.block.args))
            argument.name_hint = _hint(graph_input.name)
            self.values[graph_input.name] = argument
            self.builder.inputs[argument] = graph_input.name
            if 0 in typ.get_shape():
                # An empty tensor holds no data: its value is known, and what is computed
                # from it folds at import (a reduction over an empty set, a concat with
                # an empty part). The argument stays, so the signature is the model's.
                self.values[graph_input.name] = np.zeros(
                    typ.get_shape(), numpy_dtype(typ.get_element_type())
                )
        return types

    def _input_shape(self, graph_input: Any) -> list[int]:
        name, tensor_type = graph_input.name, graph_input.type.tensor_type
        if name in self.input_shapes:
            shape = _bound_shape(name, tensor_type, self.input_shapes[name])
        elif not tensor_type.HasField("shape"):
            raise ImportFailure(
                f"input '{name}' declares no shape (not even its rank); give one with "
                f"--input-shape {name}=D0xD1x..."
            )
        else:
            shape = _declared_shape(name, tensor_type.shape.dim)
        return shape

    # ---- nodes ------------------------------------------------------------------------

    def convert(self, node: Any, index: int) -> None:
        from onnx import helper

        label = node_label(node, index)
        converter = CONVERTERS.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        if any(i in self.poisoned for i in node.input if i):
            # Downstream of an unsupported op: report its own type if unsupported too.
            if converter is None and not _handled_without_converter(node):
                self._unsupported(node, label)
            self.poisoned.update(node.output)
            return
        inputs = _inputs_of(self.values, node, label)
        if self._control_flow(node, inputs, label):
            return
        if self._fold(node, inputs, label):
            return
        if converter is None and self._expanded(node, inputs, label):
            return
        if converter is None:
            self._unsupported(node, label)
            self.poisoned.update(node.output)
            return
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        b = self.builder
        b.node, b.op_type, b.outputs = label, node.op_type, list(node.output)
        try:
            outputs = converter(b, inputs, attrs)
        except VerifyException as error:
            text = " ".join(str(error).split())  # one line
            raise ImportFailure(f"node {label} ({node.op_type}): {text}") from None
        except _MALFORMED as error:
            raise ImportFailure(_malformed(label, node.op_type, error)) from None
        self._record(node.output, outputs)

    def _control_flow(self, node: Any, inputs: list[Value | None], label: str) -> bool:
        """Flatten an If, Loop or Scan node (onnx_control_flow); False for other nodes."""
        flow = _CONTROL_FLOW.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        if flow is None:
            return False
        b = self.builder
        b.node, b.op_type, b.outputs = label, node.op_type, list(node.output)
        try:
            outputs = flow(self, node, inputs, label)
        except _MALFORMED as error:
            raise ImportFailure(_malformed(label, node.op_type, error)) from None
        self._record(node.output, outputs)
        return True

    def _expanded(self, node: Any, inputs: list[Value | None], label: str) -> bool:
        """Replace `node` by the function that defines it: one of the model's own
        (`model.functions`, as exporters write modules) or one ONNX's schema gives."""
        local = self.local_functions.get((node.domain, node.op_type))
        if local is not None:
            expand_function(self, node, local, {}, label)
            return True
        if node.domain not in (*STANDARD_DOMAINS, *FUNCTION_DOMAINS):
            return False
        domain = "" if node.domain in STANDARD_DOMAINS else node.domain
        opset = self._opsets().get(domain, MIN_OPSET if not domain else 1)
        body = function_body(node, inputs, label, opset)
        if body is None:
            return False
        expand_function(self, node, *body, label)
        return True

    def fresh_prefix(self, label: str) -> str:
        self.expansions += 1
        return f"{label}#{self.expansions}/"

    def _record(self, names: Sequence[str], outputs: Sequence[Value]) -> None:
        for output_name, value in zip(names, outputs, strict=False):
            if not output_name:
                continue
            if isinstance(value, SSAValue) and value.name_hint is None:
                value.name_hint = _hint(output_name)
            self.values[output_name] = value

    def _unsupported(self, node: Any, label: str) -> None:
        domain = node.domain if node.domain not in STANDARD_DOMAINS else ""
        op = f"{domain}.{node.op_type}" if domain else node.op_type
        self.unsupported.setdefault(op, []).append(label)

    def _fold(self, node: Any, inputs: list[Value | None], label: str) -> bool:
        """Evaluate a node whose inputs are all known; Shape/Size of any static tensor."""
        if node.op_type in ("Shape", "Size") and inputs and inputs[0] is not None:
            shape = np.array(shape_of(inputs[0]), np.int64)
            if node.op_type == "Size":
                self.values[node.output[0]] = np.array(int(np.prod(shape)), np.int64)
                return True
            attrs = {a.name: a.i for a in node.attribute}
            start, end = attrs.get("start", 0), attrs.get("end", len(shape))
            self.values[node.output[0]] = shape[start:end]
            return True
        known = all(v is None or not isinstance(v, SSAValue) for v in inputs)
        if not known or node.op_type in _NOT_FOLDED or node.domain not in STANDARD_DOMAINS:
            return False
        from onnx.reference import ReferenceEvaluator

        if node.op_type == "GatherElements":  # onnx.reference's fails on [1, N] indices
            self.values[node.output[0]] = _gather_elements(node, inputs)
            return True
        feeds = {n: v for n, v in zip(node.input, inputs, strict=True) if n}
        try:
            evaluator = cast(_Evaluator, ReferenceEvaluator(node, opsets=self._opsets()))
            outputs = _evaluate_quietly(evaluator, feeds)
        except Exception as error:  # the evaluator raises many kinds on bad nodes
            if node.op_type in CONVERTERS:
                # onnx.reference lacks some ops (Gelu): build the graph op, which
                # graph-simplify folds, or compute it at run time.
                return False
            raise ImportFailure(
                f"node {label} ({node.op_type}): cannot evaluate its constant inputs: "
                f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
            ) from None
        for output_name, value in zip(node.output, outputs, strict=False):
            if output_name:
                self.values[output_name] = _folded_tensor(value, node, label)
        return True

    def _opsets(self) -> dict[str, int]:
        """The opsets in force: the model's, or those of the function body converted."""
        if self.opset_override is not None:
            return self.opset_override
        return {o.domain or "": o.version for o in self.model.opset_import}

    # ---- results ----------------------------------------------------------------------

    def _outputs(self) -> list[SSAValue]:
        results: list[SSAValue] = []
        for output in self.graph.output:
            if output.name not in self.values:
                raise ImportFailure(f"graph output '{output.name}' is never computed")
            value = self.values[output.name]
            self.builder.node = f"output {output.name}"
            result = self.builder.tensor(value)
            _check_declared(output, result)
            results.append(result)
        return results


_MALFORMED = (KeyError, IndexError, AssertionError, ValueError, TypeError, AttributeError)
"""What a converter or control flow raises on a node missing an input, attribute or body:
one line naming the node (a valid model never gets here; the conformance runner counts it
as a crash)."""


def _verify(module: ModuleOp, origin: Mapping[Operation, str]) -> None:
    """Ops were verified as they were made; this checks the function around them and,
    on failure, names the innermost op that fails (children before parents)."""
    try:
        module.verify()
        return
    except VerifyException:
        pass
    for op in module.walk(region_first=True):
        try:
            op.verify()
        except VerifyException as error:
            node = origin.get(op)
            where = f"node {node}" if node is not None else "the imported function"
            raise ImportFailure(f"{where} ({op.name}): {error}") from None


def _inputs_of(values: Mapping[str, Value], node: Any, label: str) -> list[Value | None]:
    """A node's inputs (None where it leaves an optional one out)."""
    inputs: list[Value | None] = []
    for input_name in node.input:
        if not input_name:
            inputs.append(None)
        elif input_name in values:
            inputs.append(values[input_name])
        else:
            raise ImportFailure(f"node {label}: input '{input_name}' is never defined")
    return inputs


def _malformed(label: str, op_type: str, error: BaseException) -> str:
    detail = str(error).splitlines()[0] if str(error) else ""
    return f"node {label} ({op_type}): malformed node ({type(error).__name__}: {detail})"


def _handled_without_converter(node: Any) -> bool:
    """Whether the importer takes `node` without a converter: control flow, shape ops it
    folds, ops ONNX defines by a function body."""
    from onnx import defs

    if node.domain not in STANDARD_DOMAINS:
        return False
    if node.op_type in _CONTROL_FLOW or node.op_type in _FOLDED_WHEN_KNOWN:
        return True
    try:
        schema = function_schema(defs.get_schema(node.op_type, ""))
    except defs.SchemaError:
        return False
    return schema.has_function or schema.has_context_dependent_function


def _folded_tensor(value: Any, node: Any, label: str) -> np.ndarray:
    """A folded output as an array; sequence and optional values (lists, None) have no
    graph-dialect counterpart and would otherwise turn into a wrong array silently."""
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(cast(Array | np.generic, value))
    kind = "no value (an empty optional)" if value is None else f"a {type(value).__name__}"
    raise ImportFailure(
        f"node {label} ({node.op_type}) produces {kind}, not a tensor; graphfuse supports "
        "tensors only"
    )


def _gather_elements(node: Any, inputs: list[Value | None]) -> np.ndarray:
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % data.ndim
    wrapped = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data, wrapped, axis=axis)


def _constant_input(graph_input: Any, value: Any) -> Array:
    """A graph input bound by `constants`, as an array of its declared type and shape."""
    from onnx import helper

    name, tensor_type = graph_input.name, graph_input.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    try:
        given = np.asarray(value)
        with np.errstate(all="ignore"):
            array: Array = given.astype(dtype)
        exact = dtype.kind not in "biu" or bool(np.array_equal(array.astype(np.float64), given))
    except (TypeError, ValueError, OverflowError) as error:
        raise ImportFailure(f"--constant {name}: not a {dtype} array ({error})") from None
    if not exact:
        raise ImportFailure(
            f"--constant {name}: the input is {dtype}, but not every value is one "
            "(a fraction, NaN or out of range)"
        )
    if tensor_type.HasField("shape"):
        declared: list[int | None] = [
            d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim
        ]
        known = [d for d in declared if d is not None]
        if len(known) == len(declared) and array.size == int(np.prod(known, dtype=np.int64)):
            array = array.reshape(known)  # a flat list from the command line
        if len(declared) != array.ndim or any(
            d is not None and d != s for d, s in zip(declared, array.shape, strict=True)
        ):
            shown = "x".join("?" if d is None else str(d) for d in declared)
            raise ImportFailure(
                f"--constant {name}: {array.size} value{'s' if array.size != 1 else ''} "
                f"of shape {'x'.join(map(str, array.shape)) or '() (a scalar)'} do not fit "
                f"the declared shape {shown}"
            )
    return array


def _check_declared(output: Any, result: SSAValue) -> None:
    """A graph output comes out with the shape and element type the model declares."""
    from onnx import helper

    declared = [
        d.dim_value if d.HasField("dim_value") else None for d in output.type.tensor_type.shape.dim
    ]
    shape = shape_of(result)
    if output.type.tensor_type.HasField("shape") and (
        len(declared) != len(shape)
        or any(d is not None and d != s for d, s in zip(declared, shape, strict=False))
    ):
        shown = "x".join("?" if d is None else str(d) for d in declared)
        raise ImportFailure(
            f"graph output '{output.name}' comes out {'x'.join(map(str, shape))}, "
            f"but the model declares {shown}"
        )
    elem = output.type.tensor_type.elem_type
    if elem:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        expected = element_type_of(dtype, f"output '{output.name}'")
        if element_of(result, output.name) != expected:
            raise ImportFailure(
                f"graph output '{output.name}' comes out "
                f"{element_of(result, output.name)}, but the model declares {expected}"
            )


def _input_element(graph_input: Any) -> Attribute:
    """A graph input's element type; onnx_checks made sure ONNX defines it."""
    from onnx import TensorProto, helper

    element = graph_input.type.tensor_type.elem_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(element))
    onnx_name = TensorProto.DataType.Name(element).lower()
    return element_type_of(dtype, f"input '{graph_input.name}'", onnx_name)


def _bound_shape(name: str, tensor_type: Any, bound_dims: Sequence[int]) -> list[int]:
    """The --input-shape binding of an input, checked against what the model declares."""
    bound = [int(d) for d in bound_dims]
    shown = "x".join(map(str, bound))
    if any(d < 1 for d in bound):
        raise ImportFailure(f"--input-shape {name}={shown}: every dimension must be 1 or more")
    if not tensor_type.HasField("shape"):
        return bound
    dims = tensor_type.shape.dim
    declared = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    if len(bound) != len(declared) or any(
        d is not None and d != b for d, b in zip(declared, bound, strict=False)
    ):
        expected = "x".join("?" if d is None else str(d) for d in declared)
        raise ImportFailure(
            f"--input-shape {name}={shown} does not fit the declared shape {expected}"
        )
    return bound


def _declared_shape(name: str, dims: Any) -> list[int]:
    """A static input shape; a symbolic dimension must be bound with --input-shape."""
    for index, dim in enumerate(dims):
        if not dim.HasField("dim_value"):
            label = f" ('{dim.dim_param}')" if dim.dim_param else ""
            template = "x".join(str(d.dim_value) if d.HasField("dim_value") else "N" for d in dims)
            raise ImportFailure(
                f"input '{name}' has a dynamic dimension #{index}{label}; bind it with "
                f"--input-shape {name}={template}"
            )
    return [int(d.dim_value) for d in dims]
