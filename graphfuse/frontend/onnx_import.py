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
from typing import Any, Protocol, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue
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
)
from graphfuse.frontend.onnx_control_flow import convert_if, convert_loop, convert_scan
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
    importer = _Importer(as_model(model), dict(input_shapes or {}), dict(constants or {}))
    return importer.run(name)


def _hint(name: str) -> str | None:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    if not cleaned:
        return None
    return cleaned if not cleaned[0].isdigit() else "v" + cleaned


class _Importer:
    def __init__(
        self, model: Any, input_shapes: dict[str, Sequence[int]], constants: dict[str, Any]
    ) -> None:
        self.model = model
        self.graph = model.graph
        self.input_shapes = input_shapes
        self.constants = constants
        self.values: dict[str, Value] = {}
        self.unsupported: dict[str, list[str]] = {}
        self.poisoned: set[str] = set()
        self.block = Block()
        self.builder = Builder(self.block)
        self.expansions = 0
        self.opset_override: dict[str, int] | None = None

    def run(self, name: str) -> ModuleOp:
        self._load_initializers()
        arg_types = self._add_inputs()
        for index, node in enumerate(self.graph.node):
            self._convert(node, index)
        if self.unsupported:
            raise ImportFailure(self._unsupported_listing())
        results = self._outputs()
        self.block.add_op(func.ReturnOp(*results))
        function = func.FuncOp(
            name,
            FunctionType.from_lists(arg_types, [r.type for r in results]),
            Region(self.block),
        )
        module = ModuleOp([function])
        self._verify(module)
        return module

    def _unsupported_listing(self) -> str:
        listing = "; ".join(
            f"{op} ({', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
            for op, nodes in sorted(self.unsupported.items())
        )
        return f"unsupported ONNX ops: {listing}"

    # ---- set-up -----------------------------------------------------------------------

    def _load_initializers(self) -> None:
        from onnx import numpy_helper

        for tensor in self.graph.initializer:
            array = numpy_helper.to_array(tensor)
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
                self.values[graph_input.name] = self._constant_input(graph_input)
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

    def _constant_input(self, graph_input: Any) -> Array:
        """A graph input bound by `constants`, as an array of its declared type and shape."""
        from onnx import helper

        name, tensor_type = graph_input.name, graph_input.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        try:
            array = np.asarray(self.constants[name]).astype(dtype)
        except (TypeError, ValueError) as error:
            raise ImportFailure(f"--constant {name}: not a {dtype} array ({error})") from None
        if tensor_type.HasField("shape"):
            declared = [
                d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim
            ]
            if None not in declared and array.size == int(np.prod(declared, dtype=np.int64)):
                array = array.reshape(declared)  # a flat list from the command line
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

    def _convert(self, node: Any, index: int) -> None:
        from onnx import helper

        label = node_label(node, index)
        converter = CONVERTERS.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        if any(i in self.poisoned for i in node.input if i):
            # Downstream of an unsupported op: report its own type if unsupported too.
            if converter is None and not _handled_without_converter(node):
                self._unsupported(node, label)
            self.poisoned.update(node.output)
            return
        inputs = self._inputs_of(node, label)
        flow = _CONTROL_FLOW.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        if flow is not None:
            self._record(node.output, flow(self, node, inputs, label))
            return
        if self._fold(node, inputs, label):
            return
        if converter is None and node.domain in STANDARD_DOMAINS:
            body = self._function_body(node, inputs, label)
            if body is not None:
                self._expand(node, *body, label)
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
        except (KeyError, IndexError, AssertionError) as error:
            raise ImportFailure(
                f"node {label} ({node.op_type}): malformed node ({type(error).__name__}: {error})"
            ) from None
        self._record(node.output, outputs)

    # ---- subgraphs (control flow) -------------------------------------------------------

    def inline(self, body: Any, bindings: Sequence[Value], label: str) -> list[Value]:
        """Convert graph `body` (an If branch, a Loop or Scan body) in place, its inputs
        bound to `bindings`; returns its outputs. Its own tensors get names of their own
        (one body is converted once per iteration); names it reads from the enclosing
        graphs are left alone, also inside graphs nested in it."""
        from onnx import numpy_helper

        self.expansions += 1
        prefix = f"{label}#{self.expansions}/"
        local = {i.name for i in body.input} | {t.name for t in body.initializer}
        local |= {o for n in body.node for o in n.output if o}
        renamed = {name: prefix + name for name in local}
        for graph_input, value in zip(body.input, bindings, strict=False):
            self.values[renamed[graph_input.name]] = value
        for tensor in body.initializer:
            self.values[renamed[tensor.name]] = numpy_helper.to_array(tensor)
        for index, inner in enumerate(body.node):
            copy = _renamed_node(inner, renamed)
            copy.name = f"{label}/{inner.name or inner.op_type}"
            self._convert(copy, index)
        outputs: list[Value] = []
        for output in body.output:
            name = renamed.get(output.name, output.name)
            if name in self.poisoned:
                raise ImportFailure(self._unsupported_listing())
            if name not in self.values:
                raise ImportFailure(f"{label}: its body's output '{output.name}' is never computed")
            outputs.append(self.values[name])
        return outputs

    # ---- ONNX functions -----------------------------------------------------------------

    def _function_body(
        self, node: Any, inputs: list[Value | None], label: str
    ) -> tuple[Any, dict[str, Any]] | None:
        """The FunctionProto ONNX defines `node`'s op by, at the model's opset, and the
        defaults of the op's attributes, or None (Elu, Selu,
        HardSwish, Reduce{L1,L2,LogSum,...}, CastLike, RMSNormalization, Attention,
        RotaryEmbedding, GroupNormalization ...), or None. Context-dependent bodies are
        built for the node's attributes and its inputs' element types and shapes."""
        from onnx import FunctionProto, TypeProto, defs, helper

        version = self._opsets().get("", MIN_OPSET)
        try:
            schema = defs.get_schema(node.op_type, version, "")
        except defs.SchemaError:
            return None
        body = FunctionProto()
        if schema.has_function:
            chosen = _body_version(schema.function_opset_versions, version)
            body.ParseFromString(schema.get_function_with_opset_version(chosen))
            return body, _attribute_defaults(schema)
        if not schema.has_context_dependent_function:
            return None
        types: list[bytes] = []
        for value in inputs:
            if value is None:
                types.append(TypeProto().SerializeToString())
                continue
            dtype = numpy_dtype(element_of(value, f"node {label}"))
            element = helper.np_dtype_to_tensor_dtype(dtype)
            types.append(
                helper.make_tensor_type_proto(element, shape_of(value)).SerializeToString()
            )
        try:
            serialized = schema.get_context_dependent_function_with_opset_version(
                _body_version(schema.context_dependent_function_opset_versions, version),
                node.SerializeToString(),
                types,
            )
        except Exception as error:  # onnx's builders raise on inputs they do not cover
            raise ImportFailure(
                f"node {label} ({node.op_type}): ONNX cannot build its function body "
                f"({str(error).splitlines()[0] if str(error) else type(error).__name__})"
            ) from None
        if not serialized:
            return None
        body.ParseFromString(serialized)
        return body, _attribute_defaults(schema)

    def _expand(self, node: Any, body: Any, defaults: dict[str, Any], label: str) -> None:
        """Convert the nodes of `node`'s function body in its place: formal inputs and
        outputs renamed to the node's, the body's own tensors to names no other node uses,
        attribute references bound to the node's attributes or the function's defaults.
        The body's nodes fold, convert or expand further like any other node, so the
        function's primitives reach the graph and fuse with their neighbours."""
        from onnx import AttributeProto

        self.expansions += 1
        prefix = f"{label}#{self.expansions}/"  # the body's own tensors, kept apart
        actual = list(node.input)
        renamed = {f: actual[i] if i < len(actual) else "" for i, f in enumerate(body.input)}
        renamed.update(zip(body.output, node.output, strict=False))
        for inner in body.node:
            renamed.update({o: prefix + o for o in inner.output if o and o not in renamed})
        given = {a.name: a for a in node.attribute}
        defaults = {**defaults, **{a.name: a for a in body.attribute_proto}}
        opsets = {o.domain or "": o.version for o in body.opset_import}
        saved = self.opset_override
        self.opset_override = opsets or None
        try:
            for index, inner in enumerate(body.node):
                copy = _renamed_node(inner, renamed)
                copy.name = f"{label}/{inner.name or inner.op_type}"
                del copy.attribute[:]
                for attribute in _renamed_node(inner, renamed).attribute:
                    if attribute.ref_attr_name:
                        bound = given.get(attribute.ref_attr_name)
                        bound = bound or defaults.get(attribute.ref_attr_name)
                        if bound is None:
                            continue
                        value = AttributeProto()
                        value.CopyFrom(bound)
                        value.name = attribute.name
                        copy.attribute.append(value)
                    else:
                        copy.attribute.append(attribute)
                self._convert(copy, index)
        finally:
            self.opset_override = saved
        missing = [o for o in node.output if o and o not in self.values]
        if missing and not any(o in self.poisoned for o in node.output):
            raise ImportFailure(
                f"node {label} ({node.op_type}): its function body does not compute "
                f"{', '.join(missing)}"
            )

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

    def _inputs_of(self, node: Any, label: str) -> list[Value | None]:
        inputs: list[Value | None] = []
        for input_name in node.input:
            if not input_name:
                inputs.append(None)
            elif input_name in self.values:
                inputs.append(self.values[input_name])
            else:
                raise ImportFailure(f"node {label}: input '{input_name}' is never defined")
        return inputs

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
            outputs = evaluator.run(None, feeds)
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
        from onnx import helper

        results: list[SSAValue] = []
        for output in self.graph.output:
            if output.name not in self.values:
                raise ImportFailure(f"graph output '{output.name}' is never computed")
            value = self.values[output.name]
            self.builder.node = f"output {output.name}"
            result = self.builder.tensor(value)
            declared = [
                d.dim_value if d.HasField("dim_value") else None
                for d in output.type.tensor_type.shape.dim
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
            results.append(result)
        return results

    def _verify(self, module: ModuleOp) -> None:
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
                node = self.builder.origin.get(op)
                where = f"node {node}" if node is not None else "the imported function"
                raise ImportFailure(f"{where} ({op.name}): {error}") from None


def _handled_without_converter(node: Any) -> bool:
    """Whether the importer takes `node` without a converter: control flow, shape ops it
    folds, ops ONNX defines by a function body."""
    from onnx import defs

    if node.domain not in STANDARD_DOMAINS:
        return False
    if node.op_type in _CONTROL_FLOW or node.op_type in _FOLDED_WHEN_KNOWN:
        return True
    try:
        schema = defs.get_schema(node.op_type, "")
    except defs.SchemaError:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


def _renamed_node(node: Any, renamed: dict[str, str]) -> Any:
    """A copy of `node` reading and writing tensors by their `renamed` names, also in the
    graphs nested in its attributes (which may read the enclosing body's tensors)."""
    from onnx import AttributeProto, NodeProto

    copy = NodeProto()
    copy.CopyFrom(node)
    del copy.input[:]
    del copy.output[:]
    copy.input.extend(renamed.get(i, i) if i else "" for i in node.input)
    copy.output.extend(renamed.get(o, o) if o else "" for o in node.output)
    for attribute in copy.attribute:
        nested = [attribute.g] if attribute.type == AttributeProto.GRAPH else []
        nested += list(attribute.graphs) if attribute.type == AttributeProto.GRAPHS else []
        for subgraph in nested:
            _rename_reads(subgraph, renamed)
    return copy


def _rename_reads(subgraph: Any, renamed: dict[str, str]) -> None:
    """Rename, in place, the enclosing tensors a nested graph reads (ONNX names are unique
    across nesting, so a renamed name is never one the nested graph defines itself)."""
    from onnx import AttributeProto

    for inner in subgraph.node:
        for position, name in enumerate(inner.input):
            if name in renamed:
                inner.input[position] = renamed[name]
        for attribute in inner.attribute:
            if attribute.type == AttributeProto.GRAPH:
                _rename_reads(attribute.g, renamed)
            for nested in attribute.graphs:
                _rename_reads(nested, renamed)
    for output in subgraph.output:
        if output.name in renamed:
            output.name = renamed[output.name]


def _attribute_defaults(schema: Any) -> dict[str, Any]:
    """The schema's default of each attribute of its op (a function body refers to them
    by name when the node leaves them out)."""
    return {
        name: attribute.default_value
        for name, attribute in schema.attributes.items()
        if attribute.default_value.type
    }


def _body_version(versions: Sequence[int], opset: int) -> int:
    """Which of an op's function bodies to use: ONNX writes a body in the ops of some opset
    (Elu-6's in opset 18's); the newest one not newer than the model, else the oldest."""
    older = [v for v in versions if v <= opset]
    return max(older) if older else min(versions)


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
