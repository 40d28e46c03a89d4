"""Names in the C interface: the symbol prefix a library's file name gives, C identifiers
for MLIR names, the header's path, and the element types C sees.

A library's exported symbols start with a prefix derived from its file name, as
onnx-mlir's `--tag` defaults to the output's name: `libresnet.so` and `resnet.so` give
`resnet_`, so `resnet_main` and `bert_main` coexist in one program. The prefix is fixed
when the library is linked (it is in the symbol table): a library copied to another name
keeps it, and its header says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ABI_VERSION = 1
"""GRAPHFUSE_ABI_VERSION: changes whenever a header's declarations would change meaning
(what the functions take, return or require), not when a model changes."""

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def c_identifier(text: str) -> str:
    """`text` as a C identifier: other characters become `_`; one that would start with a
    digit (or be empty) gets `gf_` in front."""
    name = _NOT_IDENTIFIER.sub("_", text)
    return name if name and not name[0].isdigit() else f"gf_{name}"


def symbol_prefix(library: Path) -> str:
    """The prefix of `library`'s exported symbols: its file name up to the first dot,
    without a leading `lib` (kept when nothing else is left), as a C identifier."""
    stem = library.name.split(".", 1)[0]
    if stem.startswith("lib") and len(stem) > 3:
        stem = stem[3:]
    return c_identifier(stem)


DESCRIPTION_SECTION = ".graphfuse_c_api"
"""The ELF section holding the library's description (JSON, NUL-terminated and padded)."""
NAME_ROOM = 272
"""Characters of a file name (and so of a prefix) a library has room for: more than the
255 bytes a Linux file name holds, and the `gf_` a leading digit adds."""
PLACEHOLDER_PREFIX = "graphfuse_prefix_".ljust(NAME_ROOM, "x")
PLACEHOLDER_LIBRARY = "graphfuse-library-".ljust(NAME_ROOM, "x") + ".so"
"""The prefix and file name a library is first linked with, then renamed from (rename.py),
so that its string table keeps room for any other name."""


def header_path(library: Path) -> Path:
    """The header written beside `library`: `lib.so` -> `lib.h` (`x.h` -> `x.h.h`, never
    the library itself)."""
    if library.suffix == ".h":
        return library.with_name(library.name + ".h")
    return library.with_suffix(".h")


@dataclass(frozen=True)
class CElement:
    """How C sees one MLIR element type."""

    c_type: str
    code: int
    """GRAPHFUSE_<name> in the header (stable: part of the ABI)."""
    macro: str
    size: int
    note: str = ""


ELEMENTS: dict[str, CElement] = {
    "f32": CElement("float", 1, "F32", 4),
    "f64": CElement("double", 2, "F64", 8),
    "f16": CElement("uint16_t", 3, "F16", 2, "IEEE half-precision bits"),
    "bf16": CElement("uint16_t", 4, "BF16", 2, "bfloat16 bits: the upper half of a float"),
    "i1": CElement("uint8_t", 5, "BOOL", 1, "one byte per element, 0 or 1"),
    "i8": CElement("int8_t", 6, "I8", 1),
    "i16": CElement("int16_t", 7, "I16", 2),
    "i32": CElement("int32_t", 8, "I32", 4),
    "i64": CElement("int64_t", 9, "I64", 8),
    "ui8": CElement("uint8_t", 10, "U8", 1),
    "ui16": CElement("uint16_t", 11, "U16", 2),
    "ui32": CElement("uint32_t", 12, "U32", 4),
    "ui64": CElement("uint64_t", 13, "U64", 8),
}
"""By the element type as MLIR prints it. Integers reach the upstream entry signless and
i1 as bytes (convert-loop-to-upstream): the caller's types, when given, say which are
unsigned or bool."""
