"""Weights outside the text: large constants printed as `dense_resource<name>` handles,
their bytes in a safetensors file beside the module.

In memory a weight is a dense attribute holding raw bytes (NumPy views them without a
copy), so passes fold and pack weights as arrays. Only text pays for bytes: printed as hex
they cost a model's size twice over and every tool that reads them (BERT-base: 440 MB of
weights, a 528 MB module). So a module is written as text plus a weights file:

    builtin.module attributes {graphfuse.weights = "bert.safetensors"} {
      %0 = graph.constant dense_resource<encoder.layer.0.query.weight> : tensor<768x768xf32>

`dense_resource<handle>` is MLIR's own syntax for data held outside the text; the module
attribute names the file (relative to the module's folder) that holds each handle's data
under the same name. safetensors is the format other tools read (NumPy, PyTorch, JAX),
with a header of names, dtypes and shapes that is read without touching the data.

A constant's name comes from the `graph.name` hint the ONNX importer sets (the
initializer's name); other constants are named `weight_<n>`. Printed output elides weights
the same way (`--emit`): shape and name readable, bytes only on request (`inline=True`), in
MLIR's `dialect_resources` section after the module. graphfuse.resources finds a handle's
bytes for a module xDSL's own parser read (plain `xdsl-opt`).
"""

from __future__ import annotations

import errno
import json
import re
import struct
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.hints import isa

from graphfuse.outputs import write_all
from graphfuse.parsing import NAME_HINT, GraphfuseError

WEIGHTS_ATTR = "graphfuse.weights"
"""Module attribute: the weights file of a module printed with its weights outside."""
TEXT_LIMIT = 4096
"""Constants over this many bytes leave the text; smaller ones (shapes, biases of small
layers, scalars) stay inline where they are read at a glance."""


def weights_file_for(module_path: str | Path) -> Path:
    """The weights file written beside a module: `model.mlir` -> `model.safetensors`."""
    return Path(module_path).with_suffix(".safetensors")


# ---- writing ------------------------------------------------------------------------------


@dataclass
class Outlined:
    """The weights a module's text refers to, by handle, while it is printed outlined."""

    weights: dict[str, DenseIntOrFPElementsAttr] = field(
        default_factory=dict[str, DenseIntOrFPElementsAttr]
    )


def _large(value: Attribute, limit: int) -> bool:
    return isinstance(value, DenseIntOrFPElementsAttr) and len(value.data.data) > limit


def _holders(op: Operation) -> Iterator[tuple[dict[str, Attribute], str]]:
    """Each (dictionary, key) of `op` that holds a property or attribute value."""
    for key in list(op.properties):
        yield op.properties, key
    for key in list(op.attributes):
        yield op.attributes, key


Shaped = TensorType[Attribute] | MemRefType[Attribute]
Dense = DenseIntOrFPElementsAttr
"""A dense attribute holding a weight's raw bytes."""

_NOT_IN_HANDLE = re.compile(r"[^A-Za-z0-9_.$]")


def handle_for(name: str) -> str:
    """A name as an MLIR resource handle (a bare identifier: letters, digits, `_$.`)."""
    handle = _NOT_IN_HANDLE.sub("_", name).strip(".") or "weight"
    return handle if handle[0].isalpha() or handle[0] == "_" else f"w{handle}"


@contextmanager
def outlined(module: ModuleOp, limit: int = TEXT_LIMIT) -> Generator[Outlined, None, None]:
    """Within the block, `module` holds `dense_resource` handles where it held constants
    over `limit` bytes (and no name hints); everything is put back on exit. Equal
    constants share one handle."""
    found = Outlined()
    by_value: dict[DenseIntOrFPElementsAttr, str] = {}
    undo: list[tuple[dict[str, Attribute], str, Attribute]] = []
    try:
        for op in module.walk():
            hint = op.attributes.get(NAME_HINT)
            if hint is not None:
                undo.append((op.attributes, NAME_HINT, hint))
                del op.attributes[NAME_HINT]
            for holder, key in _holders(op):
                written = holder[key]
                value = _data(written, op)
                if not _large(value, limit):
                    if value is not written:  # a small weight a handle pointed to
                        undo.append((holder, key, written))
                        holder[key] = value
                    continue
                assert isa(value, Dense)
                handle = by_value.get(value)
                if handle is None:
                    name = _name_of(written, hint)
                    handle = _unique(handle_for(name), found.weights)
                    by_value[value] = handle
                    found.weights[handle] = value
                undo.append((holder, key, written))
                holder[key] = DenseResourceAttr.from_params(handle, shaped(value.get_type()))
        named = module.attributes.pop(WEIGHTS_ATTR, None)  # every handle read above
        if named is not None:
            undo.append((module.attributes, WEIGHTS_ATTR, named))
        yield found
    finally:
        for holder, key, value in reversed(undo):
            holder[key] = value


def _data(value: Attribute, op: Operation) -> Attribute:
    """`value`, or the data a `dense_resource` handle kept by xDSL's parser points to."""
    if not isinstance(value, DenseResourceAttr):
        return value
    from graphfuse.resources import resolve

    return resolve(value, op)


def _name_of(written: Attribute, hint: Attribute | None) -> str:
    if isinstance(written, DenseResourceAttr):
        return written.resource_handle.data
    return hint.data if isinstance(hint, StringAttr) else "weight"


def _unique(handle: str, taken: dict[str, Any]) -> str:
    if handle not in taken and handle != "weight":
        return handle
    n = 0
    while f"{handle}_{n}" in taken:
        n += 1
    return f"{handle}_{n}"


def module_text(module: ModuleOp, inline: bool = False, limit: int = TEXT_LIMIT) -> str:
    """The module's text for reading: weights over `limit` bytes as named handles
    (`dense_resource<name> : tensor<768x768xf32>`), with `inline` their bytes in MLIR's
    `dialect_resources` section after the module (what upstream MLIR prints and reads).
    Name hints are not printed: they become the handles."""
    from graphfuse.resources import resources_section

    with outlined(module, limit) as found:
        text = str(module)
        return text + resources_section(found.weights) if inline else text


def write_module(module: ModuleOp, path: str | Path, inline: bool = False) -> Path | None:
    """Write `module` to `path` with its large weights in `weights_file_for(path)`
    (returned; None when the module has none, or with `inline`). Both files are staged
    under temporary names and renamed only once both are written, the module last: a
    failure leaves the files that were there before, as they were."""
    target = Path(path)
    if inline:
        write_all({path: module_text(module, inline=True) + "\n"})
        return None
    side = weights_file_for(target)
    if side.resolve() == target.resolve():
        raise GraphfuseError(f"{path}: the module and its weights file would be one file")
    with outlined(module) as found:
        if found.weights:
            module.attributes[WEIGHTS_ATTR] = StringAttr(side.name)
        try:
            text = str(module) + "\n"
        finally:
            module.attributes.pop(WEIGHTS_ATTR, None)
        files: dict[str | Path, str | Callable[[Path], object]] = {}
        if found.weights:
            files[side] = lambda staged: save_weights(found.weights, staged)
        files[target] = text  # the module last: it names the weights file
        write_all(files)
    return side if found.weights else None


_SAFETENSORS_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "i1": "bool",
    "ui8": "uint8",
}
"""Element type -> safetensors dtype of the raw bytes a dense attribute holds (i1 is one
byte per element, as in MLIR's dense storage)."""
_FILE_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "bool": "BOOL",
    "uint8": "U8",
}
"""The same dtypes as the file's header spells them."""


def shaped(typ: Attribute) -> Shaped:
    """`typ` as the tensor or memref type a weight has."""
    if isa(typ, TensorType[Attribute]) or isa(typ, MemRefType[Attribute]):
        return typ
    raise GraphfuseError(f"a weight must have a tensor or memref type, not {typ}")


def _element(typ: Attribute) -> str:
    element = shaped(typ).get_element_type()
    if isinstance(element, BFloat16Type):
        return "bf16"
    if element == IntegerType(8, Signedness.UNSIGNED):
        return "ui8"
    return str(element)


def save_weights(weights: dict[str, DenseIntOrFPElementsAttr], path: Path) -> None:
    """Write each weight's raw bytes under its handle, as safetensors."""
    from safetensors import SafetensorError, TensorSpec, serialize_file

    specs: dict[str, Any] = {}
    buffers: list[np.ndarray] = []  # kept alive while serialize_file reads them
    for handle, value in weights.items():
        typ = value.get_type()
        dtype = _SAFETENSORS_DTYPES.get(_element(typ))
        if dtype is None:
            raise GraphfuseError(
                f"weight {handle}: element type {_element(typ)} has no "
                "safetensors dtype; write the module with inline weights"
            )
        raw = np.frombuffer(value.data.data, dtype=np.uint8)
        buffers.append(raw)
        specs[handle] = TensorSpec(
            dtype=dtype,
            shape=list(shaped(typ).get_shape()),
            data_ptr=raw.ctypes.data,
            data_len=raw.nbytes,
        )
    try:
        serialize_file(specs, str(path), metadata={"format": "graphfuse"})
    except SafetensorError as error:  # an I/O error (a full disk), said its own way
        raise OSError(errno.EIO, str(error).split(": ")[-1]) from None


# ---- reading ------------------------------------------------------------------------------


HEAD = 1 << 16
"""The module's attributes, the weights file among them, come within its first characters."""
_WEIGHTS_FILE_ATTR = re.compile(r'graphfuse\.weights\s*=\s*"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)")
_ESCAPED = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unescaped(literal: str) -> str:
    """An MLIR string literal's contents: `\\XX` hex bytes (how the printer writes
    anything but printable ASCII, `modèle` as `mod\\C3\\A8le`) and `\\n \\t \\" \\\\`."""
    out = bytearray()
    at = 0
    for escape in _ESCAPE.finditer(literal):
        out += literal[at : escape.start()].encode()
        code = escape.group(1)
        out += bytes([int(code, 16)]) if len(code) == 2 else _ESCAPED.get(code, code).encode()
        at = escape.end()
    out += literal[at:].encode()
    return out.decode(errors="replace")


def named_weights_path(text: str, folder: Path) -> Path | None:
    """The weights file a module's text names in its `graphfuse.weights` attribute (at
    the top, where the module's attributes are), in `folder`; None if it names none."""
    found = _WEIGHTS_FILE_ATTR.search(text, 0, HEAD)
    return None if found is None else folder / _unescaped(found.group(1))


def named_weights_file(text: str, folder: Path | None) -> WeightsFile | None:
    """The weights file a module's text names, opened from `folder`; None if it names
    none."""
    if _WEIGHTS_FILE_ATTR.search(text, 0, HEAD) is None:
        return None
    if folder is None:
        return MissingWeightsFile("text parsed without its file cannot name a weights file")
    path = named_weights_path(text, folder)
    assert path is not None
    if not path.is_file():  # said at the first handle, which the message then names
        return MissingWeightsFile(
            f"weights file {path} not found (the module names it in {WEIGHTS_ATTR})"
        )
    return WeightsFile(path)


class WeightsFile:
    """A safetensors file's header, read once; each tensor's bytes read on demand."""

    def __init__(self, path: Path):
        self.path = path
        try:
            with open(path, "rb") as stream:
                (length,) = struct.unpack("<Q", stream.read(8))
                if length > 100 << 20:
                    raise ValueError("header over 100 MB")
                header: object = json.loads(stream.read(length))
        except FileNotFoundError:
            raise GraphfuseError(
                f"{path}: weights file not found (the module names it in {WEIGHTS_ATTR})"
            ) from None
        except (OSError, ValueError, struct.error) as error:
            raise GraphfuseError(f"{path}: not a safetensors weights file ({error})") from None
        if not isinstance(header, dict):
            raise GraphfuseError(f"{path}: not a safetensors weights file (malformed header)")
        entries = cast(dict[str, object], header)
        entries.pop("__metadata__", None)
        if not all(_well_formed(entry) for entry in entries.values()):
            raise GraphfuseError(f"{path}: not a safetensors weights file (malformed header)")
        self.header = cast(dict[str, dict[str, Any]], entries)
        self.data_start = 8 + length

    def dense(self, handle: str, typ: Shaped) -> DenseIntOrFPElementsAttr:
        """The weight `handle` as a dense attribute of `typ`, checked against the header."""
        entry = self.header.get(handle)
        if entry is None:
            raise GraphfuseError(f"dense_resource<{handle}>: {self.path} holds no '{handle}'")
        expected = _FILE_DTYPES.get(_SAFETENSORS_DTYPES.get(_element(typ), ""), "?")
        shape = list(typ.get_shape())
        if entry.get("dtype") != expected or list(entry.get("shape", [])) != shape:
            raise GraphfuseError(
                f"dense_resource<{handle}> is {'x'.join(map(str, shape))}x"
                f"{_element(typ)} in the module but {entry.get('shape')} "
                f"{entry.get('dtype')} in {self.path}"
            )
        begin, end = (int(x) for x in entry["data_offsets"])
        from graphfuse.resources import byte_size

        if end - begin != byte_size(typ):
            raise GraphfuseError(
                f"dense_resource<{handle}> spans {end - begin} bytes in {self.path}, "
                f"{typ} needs {byte_size(typ)}"
            )
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self.data_start + begin)
                raw = stream.read(end - begin)
        except OSError as error:
            raise GraphfuseError(f"{self.path}: cannot read: {error.strerror}") from None
        if len(raw) != end - begin:
            raise GraphfuseError(f"{self.path}: ends inside '{handle}' (truncated file)")
        tensor = TensorType(typ.get_element_type(), typ.get_shape())
        return DenseIntOrFPElementsAttr(tensor, BytesAttr(raw))  # pyright: ignore[reportArgumentType]


def _well_formed(entry: object) -> bool:
    """A header entry as safetensors writes it: dtype, shape and two byte offsets."""
    if not isinstance(entry, dict):
        return False
    fields = cast(dict[str, object], entry)
    offsets = fields.get("data_offsets")
    if not isinstance(offsets, list) or len(cast(list[object], offsets)) != 2:
        return False
    return (
        isinstance(fields.get("dtype"), str)
        and isinstance(fields.get("shape"), list)
        and all(isinstance(x, int) and x >= 0 for x in cast(list[object], offsets))
    )


class MissingWeightsFile(WeightsFile):
    """Where a module's weights would be, had it a weights file: each handle fails."""

    def __init__(self, why: str):
        self.why = why

    def dense(self, handle: str, typ: Shaped) -> DenseIntOrFPElementsAttr:
        raise GraphfuseError(f"dense_resource<{handle}> has no data: {self.why}")
