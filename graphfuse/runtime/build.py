"""Building upstream MLIR into a shared library: one object per kernel, linked.

A module is split into its kernels and its entry functions (kernel_split.py); each part's
object is found in the cache or built, in parallel, with mlir-opt, mlir-translate, opt and
llc (kernel_objects.py); the system C compiler links them. Large constants never pass
through the tools as text: a library written out to stand alone gets their bytes from an
object assembled from a blob (weights_object.py); one used in this process reserves their
space and has them copied in after loading (compiled.py). A library written out also gets
a C interface (c_api/): plain C entry points, the only symbols it exports, and a header
beside it. A failure is one line naming the stage and the tool, and leaves no output file:
a library written out is linked under a temporary name beside it and renamed, with its
header, only once it loads there.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from graphfuse.runtime import parallel
from graphfuse.runtime.c_api.describe import CallerTypes, CLibrary
from graphfuse.runtime.c_api.link import (
    c_layer_object,
    installed_header,
    interface_for,
    require_interface,
    version_script,
)
from graphfuse.runtime.cpu_tools import (
    CpuTarget,
    cache_dir,
    run_tool,
    stage_file,
    tool_versions,
    write_atomically,
)
from graphfuse.runtime.kernel_objects import ObjectUnit, build_objects, opt_level_for
from graphfuse.runtime.kernel_split import split_kernels
from graphfuse.runtime.llvm_lowering import (
    BF16_TRUNCATION_HELPER,
    mlir_opt_stages,
    to_llvm_dialect,
    to_llvm_ir,
    uses_threads,
)
from graphfuse.runtime.packed_entry import add_packed_entries
from graphfuse.runtime.weights_object import weights_folder, weights_object
from graphfuse.timing import timed
from graphfuse.toolchain import ToolchainError

__all__ = [
    "BF16_TRUNCATION_HELPER",
    "CpuTarget",
    "build_module_library",
    "build_shared_library",
    "cache_dir",
    "mlir_opt_stages",
    "parallel_runtime",
    "run_tool",
    "to_llvm_dialect",
    "to_llvm_ir",
    "write_atomically",
]

LIBRARY_FORMAT = b"graphfuse-library-1"
"""Changes whenever the way objects are linked changes."""


def build_shared_library(
    upstream: str, target: CpuTarget | None = None, output: Path | None = None
) -> Path:
    """Build (or find in the cache) a shared library for the upstream MLIR text `upstream`,
    as one object; written to `output` when given. Returns an absolute path: ctypes given
    a bare name (`in.so`) searches the library path, not the current folder."""
    target = target or CpuTarget()
    return _library([ObjectUnit("module", upstream, target.opt_level)], target, output, {})


def build_module_library(
    module: ModuleOp,
    target: CpuTarget,
    output: Path | None = None,
    detached: Mapping[str, bytes] | None = None,
    caller_types: CallerTypes | None = None,
) -> Path:
    """Build (or find) a shared library for the upstream module `module` (left unchanged),
    one object per kernel. The globals named in `detached` never reach a tool as text: a
    library written to `output` links their bytes in; the cached library of a call without
    `output` reserves their space, and the caller copies them in after loading it. Each
    entry function can also be called with one array of arguments (packed_entry.py). A
    library written to `output` gets the C interface (c_api/: `caller_types` names its
    arguments' element types as callers see them) and its header beside it."""
    detached = detached or {}
    interface = None
    if output is not None:
        interface = interface_for(module, Path(output).absolute(), target.threads, caller_types)
    with timed("split into kernels"):
        split = split_kernels(module, detached, reserve_detached=output is None)
        add_packed_entries(split.entry)
    with timed("print kernels"):
        texts = {name: str(part) for name, part in split.kernels.items()}
        entry = str(split.entry)
        units = [
            ObjectUnit(name, text, opt_level_for(text, target)) for name, text in texts.items()
        ]
        units.append(ObjectUnit("entry functions", entry, opt_level_for(entry, target, True)))
    return _library(units, target, output, detached, interface)


def _library(
    units: Sequence[ObjectUnit],
    target: CpuTarget,
    output: Path | None,
    detached: Mapping[str, bytes],
    interface: CLibrary | None = None,
) -> Path:
    objects = build_objects(units, target)
    threaded = any(uses_threads(unit.text, target.threads) for unit in units)
    if output is not None:
        destination = Path(output).absolute()
        if interface is not None:
            interface = replace(interface, threads=target.threads if threaded else 1)
        _write_library(destination, objects, threaded, detached, interface)
        return destination
    cached = cache_dir() / f"{_library_key(objects, threaded, detached)}.so"
    if not cached.exists():
        with timed("link"):
            _link_into_cache(cached, objects, threaded)
    return cached


def _library_key(objects: Sequence[Path], threaded: bool, reserved: Mapping[str, bytes]) -> str:
    """What a cached library holds: its objects, what it links, and the bytes to be
    copied into its reserved globals (libraries differing only in those must not be one
    file, which a process loads once)."""
    digest = hashlib.sha256()
    for path in objects:
        digest.update(path.name.encode())
    digest.update(repr((threaded, _link_libraries(threaded))).encode())
    digest.update(tool_versions("cc").encode())
    if reserved:
        with timed("digest the weights"):
            for name, data in sorted(reserved.items()):
                digest.update(name.encode())
                digest.update(data)
    digest.update(LIBRARY_FORMAT)
    return digest.hexdigest()[:32]


def _link_libraries(threaded: bool) -> list[str]:
    libraries = ["-lmvec", "-lm"]
    if threaded:
        # The runtime lives in the cache beside the cached library, and is copied beside
        # a library written out: either way, in $ORIGIN.
        libraries = [str(parallel_runtime()), "-Wl,-rpath,$ORIGIN", *libraries]
    return libraries


def _link(
    library: Path, inputs: Sequence[Path], threaded: bool, exports: Path | None = None
) -> None:
    """`cc -shared`: references between the objects bind within the library (-Bsymbolic),
    never to another library's kernel of the same name; with `exports` (a version script)
    only the symbols it names are exported."""
    args = ["-shared", "-Wl,-Bsymbolic", "-o", str(library), *map(str, inputs)]
    if exports is not None:
        args += [f"-Wl,--version-script={exports}", "-pthread"]
    run_tool("linking", "cc", [*args, *_link_libraries(threaded)])


def _link_into_cache(cached: Path, objects: Sequence[Path], threaded: bool) -> None:
    partial = stage_file(cached.parent, suffix=".so")
    try:
        _link(partial, objects, threaded)
        os.replace(partial, cached)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


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


def _write_library(
    destination: Path,
    objects: Sequence[Path],
    threaded: bool,
    weights: Mapping[str, bytes],
    interface: CLibrary | None,
) -> None:
    """Link the library at `destination`, its weights and C interface in, with the
    parallel runtime beside it when `threaded` (all or nothing: `_installing`)."""
    header = installed_header(interface, destination) if interface is not None else None
    with _installing(destination, threaded, header) as staged:
        size = sum(memoryview(data).nbytes for data in weights.values())
        with weights_folder(size) as work:
            inputs = list(objects)
            if weights:
                with timed("weights object"):
                    inputs.append(weights_object(weights, work))
            exports = None
            if interface is not None:
                with timed("C interface"):
                    inputs.append(c_layer_object(interface, work))
                    exports = version_script(interface, work)
            with timed("link"):
                _link(staged, inputs, threaded, exports)


def install_library(library: Path, destination: Path, threaded: bool) -> None:
    """Copy a finished library (graphfuse.compile_cache) to `destination`, with its header
    and, when `threaded`, the parallel runtime beside it (all or nothing: `_installing`)."""
    header = installed_header(require_interface(library), destination)
    with _installing(destination, threaded, header) as staged, timed("copy the library"):
        shutil.copyfile(library, staged)  # in the kernel: 440 MB never in memory


@contextmanager
def _installing(
    destination: Path, threaded: bool, header: tuple[Path, str] | None = None
) -> Generator[Path, None, None]:
    """A temporary file in the destination's folder for the library, renamed to
    `destination` only once it loads there (its runtime, copied beside it when `threaded`,
    found through $ORIGIN), and its `header` (path, text) renamed into place just before
    it, so a failure leaves neither a library, a header nor a runtime this call wrote."""
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
        yield staged
        _check_loads(staged, destination)
        if header is not None:
            written.append(_place_header(*header))
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
