"""Building a library's C layer and limiting what the library exports.

The C layer (source.py) is a small file, compiled by the system C compiler for each
library written out beside its other link inputs (the object cache holds kernels alone;
the model cache keeps whole libraries). A linker version script then makes every symbol
local but the C interface's: the kernels, MLIR's `_mlir_ciface_*` wrappers, the packed
entries and the weights stay inside the library, so libraries of different models never
see each other's symbols.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graphfuse.runtime.c_api.describe import CallerTypes, CLibrary, describe, library_symbols
from graphfuse.runtime.c_api.elf import read_section
from graphfuse.runtime.c_api.header import header_text
from graphfuse.runtime.c_api.naming import PLACEHOLDER_LIBRARY, PLACEHOLDER_PREFIX, header_path
from graphfuse.runtime.c_api.source import DESCRIPTION_SECTION, wrapper_source
from graphfuse.runtime.cpu_tools import run_tool
from graphfuse.toolchain import ToolchainError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

C_FLAGS = ["-O2", "-fPIC", "-fvisibility=hidden", "-pthread"]
BUILD_HEADER = "graphfuse_library.h"
"""The header's name beside the C layer's source while it is compiled."""


def interface_for(
    module: ModuleOp, threads: int, caller_types: CallerTypes | None = None
) -> CLibrary:
    """The C interface of upstream `module` with `threads` workers (1: no parallel loops),
    as it is linked: under the placeholder prefix and name, which the library written out
    is renamed from (rename.py)."""
    return describe(module, PLACEHOLDER_PREFIX, PLACEHOLDER_LIBRARY, threads, caller_types)


def c_layer_object(library: CLibrary, folder: Path) -> Path:
    """The C layer's object for `library`, compiled in `folder`."""
    (folder / BUILD_HEADER).write_text(header_text(library, BUILD_HEADER, library.library))
    source = folder / "c_layer.c"
    source.write_text(wrapper_source(library, BUILD_HEADER, library.to_json().encode()))
    built = folder / "c_layer.o"
    run_tool("compiling the C interface", "cc", [*C_FLAGS, "-c", "-o", str(built), str(source)])
    return built


def version_script(library: CLibrary, folder: Path) -> Path:
    """A linker version script in `folder` exporting `library`'s C interface only."""
    script = folder / "exports.map"
    names = "".join(f"    {symbol};\n" for symbol in library_symbols(library))
    script.write_text(f"{{\n  global:\n{names}  local:\n    *;\n}};\n")
    return script


def read_interface(path: Path) -> CLibrary | None:
    """The C interface described inside the library `path`; None for a library without
    one (built for this process, or from upstream text)."""
    data = read_section(path, DESCRIPTION_SECTION)
    if data is None:
        return None
    return CLibrary.from_json(data.rstrip(b"\0").decode())


def installed_header(library: CLibrary, destination: Path) -> tuple[Path, str]:
    """Where the header of `library` installed as `destination` goes, and its text."""
    header = header_path(destination)
    return header, header_text(library, header.name, destination.name)


def require_interface(path: Path) -> CLibrary:
    """The C interface inside `path`, which graphfuse wrote out (so it has one)."""
    found = read_interface(path)
    if found is None:
        raise ToolchainError(f"{path}: holds no C interface description (rebuild it)")
    return found
