"""Putting a library written out in place: beside it its header and, when it runs parallel
loops, graphfuse's parallel runtime; all or nothing, under a temporary name until the
library loads where it lies. A library from the model cache is hard-linked when it already
bears the destination's name, else copied and renamed (c_api/rename.py). This module
imports neither xDSL nor NumPy: a cached model is installed without them.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from graphfuse.runtime import parallel
from graphfuse.runtime.c_api.describe import CLibrary
from graphfuse.runtime.c_api.link import installed_header, require_interface
from graphfuse.runtime.c_api.naming import symbol_prefix
from graphfuse.runtime.c_api.rename import rename_library
from graphfuse.runtime.cpu_tools import cache_dir, run_tool, stage_file, write_atomically
from graphfuse.timing import timed
from graphfuse.toolchain import ToolchainError


def parallel_runtime() -> Path:
    """graphfuse's parallel runtime, built into the cache on first use."""
    library = cache_dir() / parallel.runtime_name()
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(prefix="graphfuse-runtime-") as work:
        source = Path(work) / "parallel_runtime.c"
        source.write_text(parallel.runtime_source())
        built = Path(work) / library.name
        # Never unloaded (-z nodelete): its workers outlive the library that started them.
        flags = ["-O2", "-fPIC", "-shared", "-pthread", "-Wl,-z,nodelete"]
        flags.append(f"-Wl,-soname,{library.name}")
        run_tool("building the parallel runtime", "cc", [*flags, "-o", str(built), str(source)])
        write_atomically(library, built.read_bytes())
    return library


def renamed(library: Path, interface: CLibrary, destination: Path) -> tuple[Path, str]:
    """Give `library` (a file of its own) the symbols of `destination`'s name; returns
    the header (path, text) that goes beside it."""
    with timed("name the symbols"):
        named = rename_library(library, interface, symbol_prefix(destination), destination.name)
    return installed_header(named, destination)


def install_library(library: Path, destination: Path, threaded: bool) -> None:
    """Put a finished library (graphfuse.compile_cache) at `destination`, with its header
    and, when `threaded`, the parallel runtime beside it (all or nothing: `installing`).
    A library already named as `destination` is hard-linked where the file system allows
    (the cache never changes a file it holds); any other is copied and renamed."""
    interface = require_interface(library)
    named = interface.library == destination.name
    with installing(destination, threaded) as install:
        linked = False
        if named:
            with timed("hard-link the library"):
                linked = hard_link(library, install.staged)
        if linked:
            install.header = installed_header(interface, destination)
            return
        with timed("copy the library"):
            shutil.copyfile(library, install.staged)  # in the kernel: never in memory
        install.header = (
            installed_header(interface, destination)
            if named
            else renamed(install.staged, interface, destination)
        )


def hard_link(source: Path, staged: Path) -> bool:
    """Replace the file `staged` with a hard link to `source`; False where the file system
    has none (another device, no hard links)."""
    linked = staged.with_name(staged.name + ".link")
    try:
        os.link(source, linked)
    except OSError:
        return False
    os.replace(linked, staged)
    return True


@dataclass
class Install:
    staged: Path
    header: tuple[Path, str] | None = None
    """The header (path, text) to place beside the library, once it is known."""


@contextmanager
def installing(destination: Path, threaded: bool) -> Generator[Install, None, None]:
    """A temporary file in the destination's folder for the library, renamed to
    `destination` only once it loads there (its runtime, copied beside it when `threaded`,
    found through $ORIGIN), and its header (set by the caller) renamed into place just
    before it, so a failure leaves neither a library, a header nor a runtime this call
    wrote."""
    written: list[Path] = []
    try:
        if threaded:
            runtime = parallel_runtime()
            beside = destination.parent / runtime.name
            if not beside.exists():
                written.append(beside)
            write_atomically(beside, runtime.read_bytes())
        staged = stage_file(destination.parent, suffix=".so")
        written.append(staged)
        install = Install(staged)
        yield install
        _check_loads(staged, destination)
        if install.header is not None:
            written.append(_place_header(*install.header))
        if destination.exists() and os.path.samefile(staged, destination):
            staged.unlink()  # already in place (a rename between links of one file is none)
        else:
            os.replace(staged, destination)
    except BaseException as error:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ToolchainError(f"{destination}: cannot write: {error.strerror}") from None
        raise


def _place_header(path: Path, text: str) -> Path:
    """Write the header at `path` (through a temporary file); returns `path`."""
    partial = stage_file(path.parent, text.encode(), suffix=".h")
    try:
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def _check_loads(staged: Path, destination: Path) -> None:
    # The loaded copy stays: loading `destination` after the rename finds the same file
    # (the dynamic loader matches device and inode) and reuses it.
    try:
        ctypes.CDLL(str(staged))
    except OSError as error:
        raise ToolchainError(f"{destination}: the built library does not load: {error}") from None
