"""What a library's C interface offers, read from the upstream module it is built from.

Each entry function (one with MLIR's C interface: convert-loop-to-upstream marks those
that take graph buffers) takes its inputs, then one buffer per result, then scratch
buffers, counted by the `graphfuse.outputs` and `graphfuse.scratch` attributes
(graphfuse/dialects/loop/abi.py, whose names are restated here: the runtime layer imports
no dialect; tests/runtime/test_c_header.py checks they agree). The description travels
inside the library as JSON (source.py), so a library copied from the model cache gets
the header that matches its symbols.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

from graphfuse.runtime.c_api.naming import ABI_VERSION, ELEMENTS, c_identifier
from graphfuse.toolchain import ToolchainError

if TYPE_CHECKING:
    from xdsl.dialects import func
    from xdsl.dialects.builtin import MemRefType, ModuleOp
    from xdsl.ir import Attribute

C_INTERFACE = "llvm.emit_c_interface"
OUTPUTS = "graphfuse.outputs"
SCRATCH = "graphfuse.scratch"
SCRATCH_OFFSETS = "graphfuse.scratch_offsets"
SCRATCH_ALIGNMENT = 64
"""Each scratch buffer starts on a cache line, as NumPy's large allocations do."""

CallerTypes: TypeAlias = (
    "Mapping[str, tuple[Sequence[MemRefType[Attribute]], Sequence[MemRefType[Attribute]]]]"
)
"""By entry function: its inputs' and outputs' types as callers see them (bool, unsigned)."""


@dataclass(frozen=True)
class CBuffer:
    """One buffer an entry takes: dense, row-major, of `shape` elements of `element`."""

    name: str
    element: str
    """As MLIR prints it: f32, bf16, i1, ui8..."""
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.elements * ELEMENTS[self.element].size

    def dims(self) -> str:
        return "x".join(map(str, self.shape)) if self.shape else "scalar"


@dataclass(frozen=True)
class CEntry:
    """An entry function and the C symbol its plain form gets."""

    function: str
    symbol: str
    inputs: tuple[CBuffer, ...]
    outputs: tuple[CBuffer, ...]
    scratch: tuple[CBuffer, ...]
    planned: tuple[int, ...] | None = None
    """The scratch buffers' offsets loop-plan-scratch chose (buffers never in use at once
    share bytes), or None: one after another."""

    def scratch_offsets(self) -> tuple[list[int], int]:
        """Each scratch buffer's offset in one allocation, and the allocation's size."""
        if self.planned is not None:
            ends = (o + b.bytes for o, b in zip(self.planned, self.scratch, strict=True))
            return list(self.planned), max(ends, default=0)
        offsets: list[int] = []
        at = 0
        for buffer in self.scratch:
            at += -at % SCRATCH_ALIGNMENT
            offsets.append(at)
            at += buffer.bytes
        return offsets, at


@dataclass(frozen=True)
class CLibrary:
    """A library's C interface: its symbol prefix, threads and entries."""

    prefix: str
    library: str
    """The file name it was linked as (which gave the prefix)."""
    threads: int
    """Workers of its parallel loops (1: it runs on the calling thread alone)."""
    entries: tuple[CEntry, ...]
    abi: int = ABI_VERSION

    def to_json(self) -> str:
        return json.dumps(_plain(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> CLibrary:
        data: dict[str, Any] = json.loads(text)
        entries = tuple(
            CEntry(
                e["function"],
                e["symbol"],
                *(tuple(CBuffer(b[0], b[1], tuple(b[2])) for b in e[k]) for k in _KINDS),
                planned=tuple(e["planned"]) if e.get("planned") is not None else None,
            )
            for e in data["entries"]
        )
        return CLibrary(data["prefix"], data["library"], data["threads"], entries, data["abi"])

    def renamed(self, prefix: str, library: str) -> CLibrary:
        """This interface with the symbols of `prefix`, linked as `library`."""
        entries = tuple(
            replace(e, symbol=prefix + e.symbol[len(self.prefix) :]) for e in self.entries
        )
        return replace(self, prefix=prefix, library=library, entries=entries)

    def entry(self, function: str) -> CEntry | None:
        return next((e for e in self.entries if e.function == function), None)


_KINDS = ("inputs", "outputs", "scratch")


def _plain(library: CLibrary) -> dict[str, Any]:
    entries = [
        {"function": e.function, "symbol": e.symbol}
        | {k: [[b.name, b.element, list(b.shape)] for b in getattr(e, k)] for k in _KINDS}
        | {"planned": list(e.planned) if e.planned is not None else None}
        for e in library.entries
    ]
    return {
        "abi": library.abi,
        "prefix": library.prefix,
        "library": library.library,
        "threads": library.threads,
        "entries": entries,
    }


def describe(
    module: ModuleOp,
    prefix: str,
    library: str,
    threads: int,
    caller_types: CallerTypes | None = None,
) -> CLibrary:
    """The C interface of upstream `module`'s entry functions, named with `prefix`.
    (xDSL is imported here, not above: a library's interface is read back from its JSON
    by commands that never load a module.)"""
    from xdsl.dialects import func

    entries = tuple(
        _entry(op, prefix, (caller_types or {}).get(op.sym_name.data))
        for op in module.ops
        if isinstance(op, func.FuncOp) and C_INTERFACE in op.attributes and op.body.blocks
    )
    described = CLibrary(prefix, library, threads, entries)
    check_unique(described)
    return described


def _entry(
    function: func.FuncOp,
    prefix: str,
    given: tuple[Sequence[MemRefType[Attribute]], Sequence[MemRefType[Attribute]]] | None,
) -> CEntry:
    name = function.sym_name.data
    types = [_memref(t, name) for t in function.function_type.inputs.data]
    n_out, n_scratch = _count(function, OUTPUTS), _count(function, SCRATCH)
    n_in = len(types) - n_out - n_scratch
    ins, outs = types[:n_in], types[n_in : n_in + n_out]
    if given is not None and (len(given[0]), len(given[1])) == (n_in, n_out):
        ins, outs = list(given[0]), list(given[1])
    hints = [arg.name_hint for arg in function.body.block.args[:n_in]]
    names = argument_names([*hints, *[None] * n_out], n_in)
    buffers = [_buffer(n, t) for n, t in zip(names, [*ins, *outs], strict=True)]
    scratch = tuple(_buffer(f"scratch{i}", t) for i, t in enumerate(types[n_in + n_out :]))
    symbol = f"{prefix}_{c_identifier(name)}"
    planned = scratch_offsets(function)
    if planned is not None and len(planned) != len(scratch):
        raise ToolchainError(f"@{name}: {len(planned)} scratch offsets for {n_scratch} buffers")
    return CEntry(name, symbol, tuple(buffers[:n_in]), tuple(buffers[n_in:]), scratch, planned)


def scratch_offsets(function: func.FuncOp) -> tuple[int, ...] | None:
    """The offsets loop-plan-scratch gave `function`'s scratch buffers, if it ran."""
    from xdsl.dialects.builtin import DenseArrayBase

    found = function.attributes.get(SCRATCH_OFFSETS)
    if not isinstance(found, DenseArrayBase):
        return None
    return tuple(int(v) for v in found.get_values())


_KEYWORDS = """auto bool break case char class const continue default delete do double else
    enum explicit extern false float for friend goto if inline int long namespace new operator
    private protected public register restrict return short signed sizeof static struct switch
    template this throw true try typedef typename union unsigned using virtual void volatile
    while ctx buffers NULL errno stdin stdout stderr assert"""
RESERVED = frozenset(_KEYWORDS.split())
"""C and C++ keywords, and the names the header gives its own parameters."""


def argument_names(hints: Sequence[str | None], inputs: int) -> list[str]:
    """Each argument's name in the header: its SSA name when the lowering kept one, else
    `in<i>` / `out<i>`; made C identifiers, kept off keywords, and unique."""
    names: list[str] = []
    for index, hint in enumerate(hints):
        fallback = f"in{index}" if index < inputs else f"out{index - inputs}"
        name = fallback if hint is None or hint.isdigit() else c_identifier(hint)
        name = f"{name}_" if name in RESERVED else name
        while name in names:
            name = f"{name}_{index}"
        names.append(name)
    return names


def _count(function: func.FuncOp, attribute: str) -> int:
    from xdsl.dialects.builtin import IntegerAttr

    found = function.attributes.get(attribute)
    return found.value.data if isinstance(found, IntegerAttr) else 0


def _memref(typ: Attribute, function: str) -> MemRefType[Attribute]:
    from xdsl.dialects.builtin import MemRefType
    from xdsl.ir import Attribute
    from xdsl.utils.hints import isa

    if not isa(typ, MemRefType[Attribute]):
        raise ToolchainError(f"@{function}: takes {typ}; the C interface passes buffers only")
    return typ


def _buffer(name: str, typ: MemRefType[Attribute]) -> CBuffer:
    element = str(typ.get_element_type())
    if element not in ELEMENTS:
        raise ToolchainError(f"a buffer of {element} has no C type in graphfuse's C interface")
    return CBuffer(name, element, tuple(typ.get_shape()))


def check_unique(library: CLibrary) -> None:
    """Every exported name once: `@main` and `@main_run` would both define `p_main_run`."""
    owners = [("the library", s) for s in own_symbols(library)]
    owners += [(f"@{e.function}", s) for e in library.entries for s in exported_symbols(e)]
    seen: dict[str, str] = {}
    for owner, symbol in owners:
        if symbol in seen:
            raise ToolchainError(
                f"{owner} and {seen[symbol]} both give the C symbol {symbol}; rename the function"
            )
        seen[symbol] = owner


ENTRY_SUFFIXES = ("", "_create", "_destroy", "_run", "_run_packed", "_info")
"""What each entry exports, after its symbol (header.py documents each)."""
LIBRARY_SUFFIXES = ("_abi_version", "_set_threads")
"""What every library exports, after its prefix."""


def exported_symbols(entry: CEntry) -> list[str]:
    return [entry.symbol + suffix for suffix in ENTRY_SUFFIXES]


def own_symbols(library: CLibrary) -> list[str]:
    return [library.prefix + suffix for suffix in LIBRARY_SUFFIXES]


def library_symbols(library: CLibrary) -> list[str]:
    """Every symbol the library exports, in the order the header declares them."""
    return own_symbols(library) + [s for e in library.entries for s in exported_symbols(e)]
