"""Getting an ONNX model in hand and checking what the importer takes for granted.

`from_onnx` accepts a ModelProto, its serialized bytes or a path; each way in ends in a
ModelProto or in one line naming what is wrong. The importer then assumes a graph with
outputs, a default-domain opset of 13 or later, every tensor written once (ONNX's single
assignment, which onnx.checker enforces but hand-built and edited models break) and graph
inputs that are tensors of an element type ONNX defines. Checking these up front turns
what would be a KeyError deep in the importer, or a silently wrong graph, into a message
naming the input, node or file. Problems of one node are the converters' to report.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from graphfuse.frontend.onnx_builder import ImportFailure

MIN_OPSET = 13
"""Oldest default-domain opset the converters follow; older models are converted to it
with onnx.version_converter first."""
STANDARD_DOMAINS = ("", "ai.onnx")


def as_model(model: object, initializers: bool = True) -> Any:
    """A ModelProto from what `from_onnx` was given, or an ImportFailure saying why not.
    Read from a path without `initializers`, the main graph's initializers may keep their
    data in external files (see `load_model`)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return check_structure(model, "the model")
    if isinstance(model, bytes | bytearray | memoryview):
        # A string: memoryview is not subscriptable at run time before Python 3.12.
        serialized = cast("bytes | bytearray | memoryview[int]", model)
        return _parse(bytes(serialized), "the bytes given")
    if isinstance(model, str | Path):
        return load_model(model, initializers)
    raise ImportFailure(
        "from_onnx takes an onnx.ModelProto, its serialized bytes or the path of an .onnx "
        f"file, not {type(model).__name__}"
    )


def load_model(path: str | Path, initializers: bool = True) -> Any:
    """Read an .onnx file and the external data it names, or say in one line why not.

    Without `initializers`, the main graph's initializers keep their external data in
    its files, for `read_initializer` to read each straight into the bytes its array
    views: loaded into the model, a weight's bytes would be copied into the protobuf,
    then out of it again. A model that needs a newer opset is loaded whole, since
    onnx.version_converter takes the model as one message."""
    path = Path(path)
    if not path.exists():
        raise ImportFailure(f"{path}: no such file")
    if path.is_dir():
        raise ImportFailure(f"{path}: is a directory, not an .onnx file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ImportFailure(f"{path}: cannot read ({error.strerror})") from None
    model = _parse(data, str(path), convert=False)
    _load_external_data(model, path, initializers or _opset(model) < MIN_OPSET)
    return upgrade_opset(model, str(path))


def _parse(data: bytes, where: str, convert: bool = True) -> Any:
    """Deserialize a ModelProto. Protobuf accepts many byte strings that are no model
    (unknown fields are kept), so a model without a graph is refused here too."""
    import onnx
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise ImportFailure(f"{where}: not a readable ONNX model ({_first_line(error)})") from None
    return check_structure(model, where, convert)


def _load_external_data(model: Any, path: Path, initializers: bool) -> None:
    """Tensors stored beside the model: each named file must exist before onnx reads it,
    so that the message names the missing file rather than onnx's validation text.
    Without `initializers`, the main graph's initializers are left in their files."""
    from onnx import external_data_helper

    tensors = [t for t in model.graph.initializer if external_data_helper.uses_external_data(t)]
    for tensor in tensors:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if not (path.parent / location).is_file():
            raise ImportFailure(
                f"{path}: external data file '{location}' of tensor '{tensor.name}' is missing "
                "(keep it beside the model)"
            )
    held = [*_attribute_tensors(model.graph)]
    held += [t for function in model.functions for t in _attribute_tensors(function)]
    if initializers:
        held = [*model.graph.initializer, *held]
    try:
        for tensor in held:
            if external_data_helper.uses_external_data(tensor):
                external_data_helper.load_external_data_for_tensor(tensor, str(path.parent))
    except Exception as error:  # onnx raises ValidationError, OSError, ValueError, ...
        raise _unreadable(path, error) from None


def _attribute_tensors(graph: Any) -> Iterator[Any]:
    """The tensors in the attributes of a graph's (or function's) nodes, and every tensor
    of the graphs in them (If, Loop and Scan bodies: their initializers too); as
    onnx.external_data_helper.load_external_data_for_model finds them."""
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            bodies = [attribute.g] if attribute.HasField("g") else []
            for body in [*bodies, *attribute.graphs]:
                yield from body.initializer
                yield from _attribute_tensors(body)


def read_initializer(tensor: Any, model_path: Path | None) -> Any:
    """An initializer as a NumPy array; one whose data `load_model` left in an external
    file (beside `model_path`) is read from it into bytes the array views, read-only, as
    onnx.numpy_helper gives any tensor's raw data."""
    from onnx import external_data_helper, numpy_helper

    if model_path is None or not external_data_helper.uses_external_data(tensor):
        return numpy_helper.to_array(tensor)
    try:
        return numpy_helper.to_array(tensor, str(model_path.parent))
    except Exception as error:  # as in _load_external_data
        raise _unreadable(model_path, error) from None


def _unreadable(path: Path, error: Exception) -> ImportFailure:
    return ImportFailure(f"{path}: cannot read external data ({_first_line(error)})")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ---- structure ----------------------------------------------------------------------------


def check_structure(model: Any, where: str, convert: bool = True) -> Any:
    """What every later step assumes of the model as a whole (see the module docstring);
    returns the model, converted to opset MIN_OPSET when it is older (`convert`)."""
    if not model.HasField("graph") or not model.graph.output:
        raise ImportFailure(f"{where}: not an ONNX model (no graph, or a graph without outputs)")
    _check_opset(model)
    _check_single_assignment(model.graph)
    for graph_input in model.graph.input:
        _check_input_type(graph_input)
    for value in [*model.graph.output, *model.graph.value_info]:
        _check_tensor_valued(value, "value")
    return upgrade_opset(model, where) if convert else model


def _check_opset(model: Any) -> None:
    versions = [o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS]
    if not versions:
        raise ImportFailure(
            f"the model imports no default-domain (ai.onnx) opset; graphfuse reads opset "
            f"{MIN_OPSET} and later"
        )


def upgrade_opset(model: Any, where: str) -> Any:
    """A model older than opset MIN_OPSET, converted to it by onnx.version_converter (the
    adapters ONNX maintains for every op change: Split's, Squeeze's and the reductions'
    axes as inputs, Resize's and Pad's new operands, ...); newer models as they are."""
    version = _opset(model)
    if version >= MIN_OPSET:
        return model
    from onnx import version_converter

    model = _flatten_old_hardmax(model)
    try:
        converted = version_converter.convert_version(model, MIN_OPSET)
    except Exception as error:  # the converter raises RuntimeError, ValueError, ...
        raise ImportFailure(
            f"{where}: uses opset {version} and onnx.version_converter cannot bring it to "
            f"opset {MIN_OPSET} ({_first_line(error)}); re-export it with opset "
            f"{MIN_OPSET} or later"
        ) from None
    changed = _changed_interface(model.graph, converted.graph)
    if changed is not None:
        # Scan-8's batch axis, for one: the converter drops it from the graph's inputs.
        raise ImportFailure(
            f"{where}: uses opset {version}, and onnx.version_converter changes its "
            f"{changed} on the way to opset {MIN_OPSET}; re-export it with opset "
            f"{MIN_OPSET} or later"
        )
    return converted


def _opset(model: Any) -> int:
    """The default-domain opset the model imports (checked to be there: _check_opset)."""
    return min(o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS)


def _flatten_old_hardmax(model: Any) -> Any:
    """Hardmax before opset 13 flattens its input to 2-D at `axis` (opset 13 takes one axis)
    and onnx.version_converter keeps the attribute as it is: written out as Flatten,
    Hardmax over the last axis, Reshape back (in a copy of the model)."""
    from onnx import ModelProto, helper

    old = [n for n in model.graph.node if n.op_type == "Hardmax" and n.domain in STANDARD_DOMAINS]
    if not old:
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
    nodes: list[Any] = []
    for index, node in enumerate(copy.graph.node):
        if node.op_type != "Hardmax" or node.domain not in STANDARD_DOMAINS:
            nodes.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        x, y, tag = node.input[0], node.output[0], f"{node.name or 'Hardmax'}_{index}_"
        nodes += [
            helper.make_node("Shape", [x], [tag + "shape"]),
            helper.make_node("Flatten", [x], [tag + "flat"], axis=axis),
            helper.make_node("Hardmax", [tag + "flat"], [tag + "hard"], node.name, axis=1),
            helper.make_node("Reshape", [tag + "hard", tag + "shape"], [y]),
        ]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def _changed_interface(before: Any, after: Any) -> str | None:
    """Which graph input or output the conversion retyped, or None."""
    pairs = [("input", before.input, after.input), ("output", before.output, after.output)]
    for kind, old, new in pairs:
        for a, b in zip(old, new, strict=False):
            if _declared(a.type) != _declared(b.type)[: len(_declared(a.type))] or (
                a.type.tensor_type.elem_type != b.type.tensor_type.elem_type
            ):
                return f"{kind} '{a.name}' ({describe_type(a.type)})"
    return None


def _declared(type_proto: Any) -> list[tuple[int, int | str | None]]:
    """The dimensions a tensor type declares, by position (the converter may add some)."""
    if not type_proto.tensor_type.HasField("shape"):
        return []
    found: list[tuple[int, int | str | None]] = []
    for index, dim in enumerate(type_proto.tensor_type.shape.dim):
        kind = dim.WhichOneof("value")
        found.append((index, dim.dim_value if kind == "dim_value" else dim.dim_param or None))
    return found


def _check_single_assignment(graph: Any) -> None:
    """Each tensor name is written once: by a graph input, an initializer or one node."""
    writers: dict[str, str] = {}
    for graph_input in graph.input:
        _claim(writers, graph_input.name, "a graph input")
    for tensor in graph.initializer:
        if writers.get(tensor.name) != "a graph input":  # old exporters list both
            _claim(writers, tensor.name, "an initializer")
    for index, node in enumerate(graph.node):
        for name in (n for n in node.output if n):
            _claim(writers, name, f"node {node_label(node, index)} ({node.op_type})")


def _claim(writers: dict[str, str], name: str, writer: str) -> None:
    if name in writers:
        raise ImportFailure(
            f"tensor '{name}' is written by both {writers[name]} and {writer}; an ONNX graph "
            "assigns each tensor once"
        )
    writers[name] = writer


def node_label(node: Any, index: int) -> str:
    """How messages name a node: its name, else `OpType#index`."""
    return node.name or f"{node.op_type}#{index}"


def _check_input_type(graph_input: Any) -> None:
    from onnx import TensorProto

    _check_tensor_valued(graph_input, "input")
    element = graph_input.type.tensor_type.elem_type
    if element == TensorProto.UNDEFINED:
        raise ImportFailure(f"input '{graph_input.name}' declares no element type")
    if element not in TensorProto.DataType.values():
        raise ImportFailure(
            f"input '{graph_input.name}' has element type {element}, which ONNX does not define"
        )


def _check_tensor_valued(value: Any, kind: str) -> None:
    """Only tensors: graphfuse has no optional, sequence or map values."""
    which = value.type.WhichOneof("value")
    if which is None and kind != "input":
        return  # an output or value_info without a declared type: inferred on import
    if which != "tensor_type":
        raise ImportFailure(
            f"{kind} '{value.name}' has type {describe_type(value.type)}, which graphfuse does "
            "not support (only tensors)"
        )


def describe_type(type_proto: Any) -> str:
    """An ONNX type as ONNX's schemas spell it: `tensor(float)`, `optional(seq(...))`."""
    from onnx import TensorProto

    which = type_proto.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        element = getattr(type_proto, which).elem_type
        known = element in TensorProto.DataType.values()
        name = TensorProto.DataType.Name(element).lower() if known else str(element)
        return f"{'tensor' if which == 'tensor_type' else 'sparse_tensor'}({name})"
    if which == "sequence_type":
        return f"seq({describe_type(type_proto.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({describe_type(type_proto.optional_type.elem_type)})"
    if which == "map_type":
        return f"map({describe_type(type_proto.map_type.value_type)})"
    return "an undeclared type" if which is None else which


# ---- --input-shape ------------------------------------------------------------------------


def parse_input_shapes(specs: Sequence[str]) -> dict[str, list[int]]:
    """`name=2x3x224x224` strings (from --input-shape) as a dict; every dimension positive,
    since a shape bound on the command line is a real tensor's and graphfuse has no empty
    tensors. `name=` with no dimensions binds a scalar (rank 0)."""
    shapes: dict[str, list[int]] = {}
    for spec in specs:
        name, equals, dims = spec.rpartition("=")
        if not name or not equals:
            raise _bad_spec(spec, "expected NAME=D0xD1x... (e.g. input_ids=2x16; NAME= a scalar)")
        values: list[int] = []
        if not dims.strip():
            shapes[name] = values
            continue
        for dim in dims.split("x"):
            if not re.fullmatch(r"\s*-?\d+\s*", dim):
                raise _bad_spec(spec, f"dimension '{dim}' is not a number")
            if int(dim) < 1:
                raise _bad_spec(spec, f"dimension {int(dim)} must be 1 or more")
            values.append(int(dim))
        shapes[name] = values
    return shapes


def _bad_spec(spec: str, reason: str, option: str = "--input-shape") -> ImportFailure:
    return ImportFailure(f"{option} {spec!r}: {reason}")


# ---- --constant ---------------------------------------------------------------------------


def parse_constants(specs: Sequence[str]) -> dict[str, Any]:
    """`name=V0,V1,...` strings (from --constant) as arrays: graph inputs a model takes but
    graphfuse needs known at import (axes, shapes, pads, a Loop's trip count). The values
    are numbers (a 1-D list, or one number for a scalar) or the path of a .npy file; the
    importer converts them to the input's declared type and shape."""
    import numpy as np

    constants: dict[str, Any] = {}
    for spec in specs:
        name, equals, text = spec.partition("=")
        if not name or not equals or not text.strip():
            raise _bad_spec(spec, "expected NAME=V0,V1,... or NAME=FILE.npy", "--constant")
        if name in constants:
            raise _bad_spec(spec, f"'{name}' is bound twice", "--constant")
        if text.strip().endswith(".npy"):
            try:
                constants[name] = np.load(text.strip(), allow_pickle=False)
            except (OSError, ValueError) as error:
                reason = f"cannot read it ({_first_line(error)})"
                raise _bad_spec(spec, reason, "--constant") from None
            continue
        items = [t.strip() for t in text.split(",")]
        try:
            values = [int(t) if re.fullmatch(r"-?\d+", t) else float(t) for t in items]
            array = np.array(values if len(values) > 1 else values[0])
        except (ValueError, OverflowError):
            reason = "values must be numbers separated by commas"
            raise _bad_spec(spec, reason, "--constant") from None
        constants[name] = array
    return constants
