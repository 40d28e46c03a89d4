"""Inlining ONNX graphs into the import: ops defined by a function body, and the bodies of
control flow (If branches, Loop and Scan bodies, see onnx_control_flow).

ONNX defines many ops by a body of other ops (activations, CastLike, the opset-23 LLM ops
Attention, RMSNormalization, RotaryEmbedding, ...). Without a converter of its own such a
node is replaced by its body, built for the node's attributes and its inputs' types and
shapes where the body depends on them, so its primitives fold, fuse and are checked like the
model's own. A body's tensors are renamed apart from the model's (one body may be inlined
many times); the names it reads from enclosing graphs are kept, also inside graphs nested
in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import Builder, ImportFailure, Value, element_of, shape_of

if TYPE_CHECKING:
    from onnx.defs import OpSchema


class Importing(Protocol):
    """What inlining needs of the importer."""

    builder: Builder
    values: dict[str, Value]
    poisoned: set[str]
    opset_override: dict[str, int] | None

    def convert(self, node: Any, index: int) -> None:
        """Fold, convert or expand one node."""
        ...

    def fresh_prefix(self, label: str) -> str:
        """A name prefix no tensor of the model or of an earlier inlining has."""
        ...

    def unsupported_listing(self) -> str:
        """The one-line message listing every unsupported op found so far."""
        ...


class FunctionSchema(Protocol):
    """An ONNX OpSchema's function bodies: onnx (1.23) has these members, but its type
    stubs leave them out; `function_schema` gives a schema this type."""

    @property
    def has_function(self) -> bool: ...

    @property
    def has_context_dependent_function(self) -> bool: ...

    @property
    def function_opset_versions(self) -> list[int]: ...

    @property
    def context_dependent_function_opset_versions(self) -> list[int]: ...

    def get_function_with_opset_version(self, version: int, /) -> bytes:
        """The serialized FunctionProto of the body written in opset `version`."""
        ...

    def get_context_dependent_function_with_opset_version(
        self, version: int, node: bytes, input_types: Sequence[bytes], /
    ) -> bytes:
        """The serialized FunctionProto built for a serialized node and its inputs'
        serialized TypeProtos (empty bytes if the schema builds none for them)."""
        ...


def function_schema(schema: OpSchema) -> FunctionSchema:
    """`schema` with the members its type stubs lack (see FunctionSchema)."""
    return cast(FunctionSchema, schema)


def inline_graph(
    importer: Importing, body: Any, bindings: Sequence[Value], label: str
) -> list[Value]:
    """Convert graph `body` (an If branch, a Loop or Scan body) in place, its inputs
    bound to `bindings`; returns its outputs. Its own tensors get names of their own
    (one body is converted once per iteration); names it reads from the enclosing
    graphs are left alone, also inside graphs nested in it."""
    from onnx import numpy_helper

    prefix = importer.fresh_prefix(label)
    local = {i.name for i in body.input} | {t.name for t in body.initializer}
    local |= {o for n in body.node for o in n.output if o}
    renamed = {name: prefix + name for name in local}
    for graph_input, value in zip(body.input, bindings, strict=False):
        importer.values[renamed[graph_input.name]] = value
    for tensor in body.initializer:
        importer.values[renamed[tensor.name]] = numpy_helper.to_array(tensor)
    for index, inner in enumerate(body.node):
        copy = _renamed_node(inner, renamed)
        copy.name = f"{label}/{inner.name or inner.op_type}"
        importer.convert(copy, index)
    outputs: list[Value] = []
    for output in body.output:
        name = renamed.get(output.name, output.name)
        if name in importer.poisoned:
            raise ImportFailure(importer.unsupported_listing())
        if name not in importer.values:
            raise ImportFailure(f"{label}: its body's output '{output.name}' is never computed")
        outputs.append(importer.values[name])
    return outputs


def function_body(
    node: Any, inputs: Sequence[Value | None], label: str, opset: int
) -> tuple[Any, dict[str, Any]] | None:
    """The FunctionProto ONNX defines `node`'s op by at `opset` (of the node's domain),
    with the defaults of the op's attributes, or None: Elu, Selu, HardSwish,
    Reduce{L1,L2,LogSum,...}, CastLike, RMSNormalization, Attention, RotaryEmbedding,
    GroupNormalization, FlexAttention (ai.onnx.preview) ... Context-dependent bodies are
    built for the node's attributes and its inputs' element types and shapes."""
    from onnx import FunctionProto, TypeProto, defs, helper

    version = opset
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    try:
        op_schema = defs.get_schema(node.op_type, version, domain)
    except defs.SchemaError:
        return None
    schema = function_schema(op_schema)
    body = FunctionProto()
    if schema.has_function:
        chosen = _body_version(schema.function_opset_versions, version)
        body.ParseFromString(schema.get_function_with_opset_version(chosen))
        return body, _attribute_defaults(op_schema)
    if not schema.has_context_dependent_function:
        return None
    types: list[bytes] = []
    for value in inputs:
        if value is None:
            types.append(TypeProto().SerializeToString())
            continue
        dtype = numpy_dtype(element_of(value, f"node {label}"))
        element = helper.np_dtype_to_tensor_dtype(dtype)
        types.append(helper.make_tensor_type_proto(element, shape_of(value)).SerializeToString())
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
    return body, _attribute_defaults(op_schema)


def expand_function(
    importer: Importing, node: Any, body: Any, defaults: dict[str, Any], label: str
) -> None:
    """Convert the nodes of `node`'s function body in its place: formal inputs and
    outputs renamed to the node's, the body's own tensors to names no other node uses,
    attribute references bound to the node's attributes or the function's defaults.
    The body's nodes fold, convert or expand further like any other node, so the
    function's primitives reach the graph and fuse with their neighbours."""
    from onnx import AttributeProto

    prefix = importer.fresh_prefix(label)  # the body's own tensors, kept apart
    actual = list(node.input)
    renamed = {f: actual[i] if i < len(actual) else "" for i, f in enumerate(body.input)}
    renamed.update(zip(body.output, node.output, strict=False))
    for inner in body.node:
        renamed.update({o: prefix + o for o in inner.output if o and o not in renamed})
    given = {a.name: a for a in node.attribute}
    defaults = {**defaults, **{a.name: a for a in body.attribute_proto}}
    opsets = {o.domain or "": o.version for o in body.opset_import}
    saved = importer.opset_override
    importer.opset_override = opsets or None
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
            importer.convert(copy, index)
    finally:
        importer.opset_override = saved
    missing = [o for o in node.output if o and o not in importer.values]
    if missing and not any(o in importer.poisoned for o in node.output):
        raise ImportFailure(
            f"node {label} ({node.op_type}): its function body does not compute "
            f"{', '.join(missing)}"
        )


def _renamed_node(node: Any, renamed: dict[str, str]) -> Any:
    """A copy of `node` reading and writing tensors by their `renamed` names, also in the
    graphs nested in its attributes (which may read the enclosing body's tensors)."""
    from onnx import AttributeProto, NodeProto

    copy = NodeProto()
    copy.CopyFrom(node)
    del copy.input[:]
    del copy.output[:]
    copy.input.extend(_renamed_name(i, renamed) for i in node.input)
    copy.output.extend(_renamed_name(o, renamed) for o in node.output)
    for attribute in copy.attribute:
        nested = [attribute.g] if attribute.type == AttributeProto.GRAPH else []
        nested += list(attribute.graphs) if attribute.type == AttributeProto.GRAPHS else []
        for subgraph in nested:
            _rename_reads(subgraph, renamed)
    return copy


def _renamed_name(name: str, renamed: dict[str, str]) -> str:
    """`name` as `renamed` says, or unchanged; "" (an omitted input or output) stays ""."""
    return renamed.get(name, name) if name else ""


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


def _attribute_defaults(schema: OpSchema) -> dict[str, Any]:
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
