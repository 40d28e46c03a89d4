"""The header written beside a library: its C interface, declared and documented.

Plain C99 (and C++ through `extern "C"`): `<stdint.h>` types, no compiler extensions.
The part every graphfuse header shares (the ABI version, status codes, element-type
codes and the info structs) is guarded by GRAPHFUSE_ABI_VERSION, so a program can
include the headers of several libraries; headers of another ABI version refuse to mix.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphfuse.runtime import parallel
from graphfuse.runtime.c_api.describe import CBuffer, CEntry, CLibrary
from graphfuse.runtime.c_api.naming import ABI_VERSION, ELEMENTS, c_identifier

STATUS = {"OK": 0, "ERROR_NULL_BUFFER": 1, "ERROR_OUT_OF_MEMORY": 2}
"""What the functions return: GRAPHFUSE_<name>."""

_SHARED = """\
#ifndef GRAPHFUSE_ABI_VERSION
#define GRAPHFUSE_ABI_VERSION {version}

/* Status codes. */
{status}

/* Element types (graphfuse_buffer_info.element_type). */
{elements}

/* One buffer an entry takes: dense, row-major, `elements` elements of `element_size`
 * bytes (`bytes` in all); shape[0] is the outermost dimension (NULL when rank is 0). */
typedef struct graphfuse_buffer_info {{
  const char *name;
  int32_t element_type;
  int32_t element_size;
  int32_t rank;
  const int64_t *shape;
  int64_t elements;
  int64_t bytes;
}} graphfuse_buffer_info;

/* An entry's signature; static data of the library, never freed. */
typedef struct graphfuse_entry_info {{
  const char *function; /* the graph function's name */
  int32_t num_inputs;
  int32_t num_outputs;
  const graphfuse_buffer_info *inputs;
  const graphfuse_buffer_info *outputs;
  int64_t scratch_bytes; /* allocated by each context */
}} graphfuse_entry_info;
#elif GRAPHFUSE_ABI_VERSION != {version}
#error "headers of libraries built by graphfuse with another C ABI version"
#endif
"""


def shared_part() -> str:
    status = "\n".join(f"#define GRAPHFUSE_{name} {code}" for name, code in STATUS.items())
    elements = "\n".join(
        f"#define GRAPHFUSE_{e.macro} {e.code} /* {e.c_type}{f': {e.note}' if e.note else ''} */"
        for e in ELEMENTS.values()
    )
    return _SHARED.format(version=ABI_VERSION, status=status, elements=elements)


def header_text(library: CLibrary, header_name: str, library_name: str) -> str:
    """The header `header_name` for `library`, installed as `library_name`."""
    guard = f"GRAPHFUSE_{c_identifier(header_name).upper()}_INCLUDED"
    parts = [
        _preamble(library, header_name, library_name),
        f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n",
        '#ifdef __cplusplus\nextern "C" {\n#endif\n',
        shared_part(),
        _library_functions(library, library_name),
        *(_entry_part(entry) for entry in library.entries),
        "#ifdef __cplusplus\n}\n#endif\n",
        f"#endif /* {guard} */\n",
    ]
    return "\n".join(parts)


def _comment(lines: Sequence[str]) -> str:
    lines = [line.replace("*/", "* /") for line in lines]  # names may hold anything
    body = "\n".join(f" * {line}".rstrip() for line in lines[1:])
    return f"/* {lines[0]}\n{body}\n */\n" if len(lines) > 1 else f"/* {lines[0]} */\n"


def _preamble(library: CLibrary, header_name: str, library_name: str) -> str:
    lines = [
        f"{header_name}: the C interface of {library_name}, written by graphfuse.",
        "",
        f"Every function declared here is exported by {library_name}, and nothing else is",
        f"(symbols start with `{library.prefix}_`, from the name the library was linked as:",
        f"{library.library}). Link with, for instance:",
        f"  cc app.c -I<dir> -L<dir> -l:{library_name} -Wl,-rpath,<dir>",
        "",
        "Buffers: every argument points at a dense, row-major (C order) buffer of its",
        "element type holding as many elements as its shape says; no alignment beyond the",
        "element type's own is required. Inputs are only read. Outputs are written whole",
        "and must not overlap an input or each other. No pointer is kept after a call.",
        "",
        *_threads(library, library_name),
        "",
        "Initialisation: none. The weights are constants inside the library. Each entry",
        "keeps its scratch buffers (intermediate results, packed weights) in a context:",
        "the plain function uses the library's own, made on its first call, and calls",
        "through it take turns (a mutex); a context per thread (<entry>_create) runs",
        "calls at once. A context must not be used by two threads at the same time.",
        "",
        "Errors: every int-returning call returns GRAPHFUSE_OK (0) on success,",
        "GRAPHFUSE_ERROR_NULL_BUFFER when a buffer pointer is NULL, or",
        "GRAPHFUSE_ERROR_OUT_OF_MEMORY when a context's scratch cannot be allocated.",
        "Calls with the shapes declared here cannot fail otherwise.",
    ]
    return _comment(lines)


def _threads(library: CLibrary, library_name: str) -> list[str]:
    prefix = library.prefix
    if library.threads <= 1:
        return [
            "Threads: built for one thread; every call runs on the calling thread alone",
            f"({prefix}_set_threads has no effect).",
        ]
    return [
        f"Threads: built for {library.threads} threads. Parallel loops run on graphfuse's",
        f"thread pool ({parallel.runtime_name()}, which must stay in the folder of",
        f"{library_name}: the library finds it through its $ORIGIN run path). The pool",
        "starts at the first parallel loop; its threads spin briefly after each loop, then",
        "sleep; there is nothing to start or stop. GRAPHFUSE_NUM_THREADS=<n> in the",
        f"environment (read at the first parallel loop) or {prefix}_set_threads(n) caps",
        "the threads of every graphfuse library in the process. A call made while",
        "another call's loop runs on the pool runs on its own thread.",
    ]


def _library_functions(library: CLibrary, library_name: str) -> str:
    prefix = library.prefix
    return (
        f"/* GRAPHFUSE_ABI_VERSION as {library_name} was built: check it against the macro. */\n"
        f"int {prefix}_abi_version(void);\n\n"
        "/* Caps the threads parallel loops use at `threads` (<= 0: no cap, the count the\n"
        " * library was built for). Returns the most threads a call uses from now on. */\n"
        f"int {prefix}_set_threads(int threads);\n"
    )


def _c_array(buffer: CBuffer) -> str:
    element = ELEMENTS[buffer.element]
    dims = "".join(f"[{d}]" for d in buffer.shape)
    return f"{element.c_type}{dims or ' (one element)'}"


def _argument_table(entry: CEntry) -> list[str]:
    rows = [
        (b.name, f"{role} #{i}", _c_array(b), f"{b.element}, {b.bytes} bytes")
        for role, buffers in (("input", entry.inputs), ("output", entry.outputs))
        for i, b in enumerate(buffers)
    ]
    widths = [max((len(row[k]) for row in rows), default=0) for k in range(3)]
    return [
        "  "
        + "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True))
        + f"  ({row[3]})"
        for row in rows
    ]


def _parameters(entry: CEntry) -> list[str]:
    inputs = [f"const {ELEMENTS[b.element].c_type} *{b.name}" for b in entry.inputs]
    outputs = [f"{ELEMENTS[b.element].c_type} *{b.name}" for b in entry.outputs]
    return inputs + outputs


def _declaration(result: str, name: str, parameters: Sequence[str]) -> str:
    if not parameters:
        return f"{result} {name}(void);\n"
    one_line = f"{result} {name}({', '.join(parameters)});\n"
    if len(one_line) <= 90:
        return one_line
    return f"{result} {name}(\n    " + ",\n    ".join(parameters) + ");\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _entry_part(entry: CEntry) -> str:
    symbol, context = entry.symbol, f"{entry.symbol}_context"
    macro = symbol.upper()
    _, scratch = entry.scratch_offsets()
    ins, outs = len(entry.inputs), len(entry.outputs)
    doc = [
        f"@{entry.function}: {_count(ins, 'input')}, then {_count(outs, 'output')}, in order:",
        *_argument_table(entry),
        f"Scratch per context: {scratch} bytes.",
    ]
    sizes = [
        f"#define {macro}_{kind}{i}_ELEMENTS {b.elements}"
        for kind, buffers in (("IN", entry.inputs), ("OUT", entry.outputs))
        for i, b in enumerate(buffers)
    ]
    parameters = _parameters(entry)
    return "\n".join(
        [
            _comment(doc)
            + f"#define {macro}_NUM_INPUTS {ins}\n#define {macro}_NUM_OUTPUTS {outs}\n"
            + "".join(f"{line}\n" for line in sizes),
            f"/* Runs @{entry.function} with the library's own context. */\n"
            + _declaration("int", symbol, parameters),
            f"/* A context: scratch for calls of @{entry.function} (NULL: out of memory). */\n"
            f"typedef struct {context} {context};\n"
            f"{context} *{symbol}_create(void);\n"
            f"void {symbol}_destroy({context} *ctx);\n",
            "/* Runs with `ctx` (NULL: the library's own context). */\n"
            + _declaration("int", f"{symbol}_run", [f"{context} *ctx", *parameters]),
            "/* The same with the buffers in an array: inputs, then outputs. */\n"
            f"int {symbol}_run_packed({context} *ctx, void *const *buffers);\n",
            "/* Names, element types and shapes of the arguments. */\n"
            f"const graphfuse_entry_info *{symbol}_info(void);\n",
        ]
    )
