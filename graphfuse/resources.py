"""Where a `dense_resource<handle>` finds its bytes, wherever the module was parsed.

A weight held outside a constant's attribute is `dense_resource<w> : tensor<...>`, MLIR's
own syntax, and its bytes are in one of two places:

- MLIR's `{-# dialect_resources: { builtin: { w: "0x04000000..." } } #-}` section at the
  end of the text (what upstream MLIR and torch-mlir print): the first 4 bytes are the
  blob's alignment, little-endian, the rest its data;
- the safetensors file the module names in its `graphfuse.weights` attribute, relative
  to the module's folder (graphfuse.weights writes it).

graphfuse's parser reads the bytes as it parses (graphfuse.parsing). Plain `xdsl-opt` keeps
the handles: xDSL's parser puts the section's blobs in the builtin dialect's resource table
and leaves the module attribute as written. `resolve` gives a pass the data then, read only
when a pass asks for a value and kept for the rest of the process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import (
    Builtin,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    IndexType,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation

from graphfuse.parsing import GraphfuseError
from graphfuse.weights import WEIGHTS_ATTR, Shaped, WeightsFile, shaped

_ALIGNMENT_BYTES = 4
"""A blob's text starts with its alignment as a 4-byte little-endian integer."""


def element_bytes(typ: Attribute) -> int:
    """Bytes of one element as dense storage holds it (i1: one byte)."""
    element = shaped(typ).get_element_type()
    if isinstance(element, IndexType):
        return 8
    width = getattr(element, "bitwidth", None)
    if not isinstance(width, int):
        raise GraphfuseError(f"a weight of element type {element} has no byte size")
    return max(1, width // 8)


def byte_size(typ: Shaped) -> int:
    """Bytes of a weight of `typ`."""
    count = 1
    for dim in typ.get_shape():
        count *= dim
    return count * element_bytes(typ)


# ---- the dialect_resources section --------------------------------------------------------


def blob_text(data: bytes, alignment: int) -> str:
    """A blob as the section writes it: `0x`, the alignment, the data, in upper-case hex."""
    return "0x" + (alignment.to_bytes(_ALIGNMENT_BYTES, "little").hex() + data.hex()).upper()


def blob_data(handle: str, text: str, typ: Shaped) -> bytes:
    """A blob's data, checked to hold exactly one weight of `typ`."""
    try:
        raw = bytes.fromhex(text[2:]) if text.startswith("0x") else None
    except ValueError:
        raw = None
    if raw is None or len(raw) < _ALIGNMENT_BYTES:
        raise GraphfuseError(
            f"dense_resource<{handle}>: its dialect_resources entry is not a hex blob "
            '("0x" then the 4-byte alignment and the data)'
        )
    data = raw[_ALIGNMENT_BYTES:]
    expected = byte_size(typ)
    if len(data) != expected:
        raise GraphfuseError(
            f"dense_resource<{handle}> holds {len(data)} bytes in dialect_resources, "
            f"{typ} needs {expected}"
        )
    return data


def dense_of(handle: str, text: str, typ: Shaped) -> DenseIntOrFPElementsAttr:
    """The weight a section's blob holds, as a dense attribute of `typ`."""
    tensor = TensorType(typ.get_element_type(), typ.get_shape())
    return DenseIntOrFPElementsAttr(tensor, BytesAttr(blob_data(handle, text, typ)))  # pyright: ignore[reportArgumentType]


def resources_section(weights: Mapping[str, DenseIntOrFPElementsAttr]) -> str:
    """The `{-# dialect_resources ... #-}` section holding `weights` by handle, as MLIR
    prints it; empty when there are none."""
    if not weights:
        return ""
    entries = ",\n".join(
        f'      {handle}: "{blob_text(value.data.data, element_bytes(value.get_type()))}"'
        for handle, value in weights.items()
    )
    return f"\n\n{{-#\n  dialect_resources: {{\n    builtin: {{\n{entries}\n    }}\n  }}\n#-}}"


# ---- handles kept by xDSL's own parser ----------------------------------------------------

_BLOBS: dict[tuple[str, Attribute], tuple[str, DenseIntOrFPElementsAttr]] = {}
"""Decoded section blobs, by handle and type, with the text they came from."""
_FILES: dict[tuple[Path, int, int], WeightsFile] = {}
"""Weights files whose header was read, by path, modification time and size."""
_VALUES: dict[tuple[Path, int, int, str, Attribute], DenseIntOrFPElementsAttr] = {}
"""Weights read from those files."""


def resolve(handle_attr: DenseResourceAttr, at: Operation) -> DenseIntOrFPElementsAttr:
    """The data of `handle_attr`, held by `at` (an op inside the module): the section
    entry xDSL's parser read, else the module's weights file; read once per process."""
    handle = handle_attr.resource_handle.data
    typ = shaped(handle_attr.type)
    blob = _section_blob(handle)
    if blob:
        cached = _BLOBS.get((handle, typ))
        if cached is None or cached[0] is not blob:
            cached = (blob, dense_of(handle, blob, typ))
            _BLOBS[(handle, typ)] = cached
        return cached[1]
    named = _named_file(at)
    if named is None:
        raise GraphfuseError(no_data(handle))
    path = _find(handle, named)
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    value = _VALUES.get((*key, handle, typ))
    if value is None:
        opened = _FILES.get(key)
        if opened is None:
            opened = _FILES[key] = WeightsFile(path)
        value = _VALUES[(*key, handle, typ)] = opened.dense(handle, typ)
    return value


def no_data(handle: str) -> str:
    """The diagnostic for a handle whose data is nowhere."""
    return (
        f"dense_resource<{handle}> has no data: no dialect_resources entry holds it and "
        f"the module names no weights file ({WEIGHTS_ATTR})"
    )


def _section_blob(handle: str) -> str | None:
    interface = Builtin.get_interface(OpAsmDialectInterface)
    return None if interface is None else interface.lookup(handle)


def _named_file(at: Operation) -> str | None:
    """The weights file named by the innermost module around `at` that names one."""
    op: Operation | None = at
    while op is not None:
        if isinstance(op, ModuleOp):
            named = op.attributes.get(WEIGHTS_ATTR)
            if isinstance(named, StringAttr):
                return named.data
        op = op.parent_op()
    return None


def _find(handle: str, named: str) -> Path:
    """The weights file `named`, relative to the module's folder. xDSL tells a pass
    nothing of where its input came from, so the folders of the `.mlir` files on the
    command line come first (xdsl-opt's input among them), then the working directory."""
    folders = [*_command_line_folders(), Path.cwd()]
    for folder in folders:
        if (folder / named).is_file():
            return folder / named
    where = ", ".join(dict.fromkeys(str(folder) for folder in folders))
    raise GraphfuseError(
        f"dense_resource<{handle}>: weights file {named} (named in {WEIGHTS_ATTR}) not "
        f"found in {where}; run from the module's folder"
    )


def _command_line_folders() -> list[Path]:
    arguments = sys.argv[1:]
    folders: list[Path] = []
    for index, argument in enumerate(arguments):
        after_output = index > 0 and arguments[index - 1] in ("-o", "--output-file")
        if argument.endswith(".mlir") and not after_output and os.path.isfile(argument):
            folders.append(Path(argument).resolve().parent)
    return folders
