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

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from graphfuse.runtime.c_api.describe import CallerTypes, CLibrary
from graphfuse.runtime.c_api.link import (
    c_layer_object,
    interface_for,
    version_script,
)
from graphfuse.runtime.c_api.rename import SYSV_HASH_STYLE
from graphfuse.runtime.cpu_tools import (
    CpuTarget,
    cache_dir,
    run_tool,
    stage_file,
    tool_versions,
    write_atomically,
)
from graphfuse.runtime.install import installing, parallel_runtime, renamed
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
        interface = interface_for(module, target.threads, caller_types)
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
    digest.update(repr((threaded, _link_libraries(threaded), linker_flags())).encode())
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
    args = ["-shared", *linker_flags(), "-Wl,-Bsymbolic", "-o", str(library), *map(str, inputs)]
    if exports is not None:
        args += [f"-Wl,--version-script={exports}", "-pthread", SYSV_HASH_STYLE]
    run_tool("linking", "cc", [*args, *_link_libraries(threaded)])


@cache
def linker_flags() -> list[str]:
    """gold where binutils ships it: it links a library of hundreds of megabytes of weights
    in half the time of the default linker (docs/decisions.md: the linker)."""
    return ["-fuse-ld=gold"] if shutil.which("ld.gold") else []


def _link_into_cache(cached: Path, objects: Sequence[Path], threaded: bool) -> None:
    partial = stage_file(cached.parent, suffix=".so")
    try:
        _link(partial, objects, threaded)
        os.replace(partial, cached)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _write_library(
    destination: Path,
    objects: Sequence[Path],
    threaded: bool,
    weights: Mapping[str, bytes],
    interface: CLibrary | None,
) -> None:
    """Link the library at `destination`, its weights and C interface in, with the
    parallel runtime beside it when `threaded` (all or nothing: install.installing). The C
    layer is linked with the placeholder prefix and renamed to the destination's
    (c_api/rename.py), so that any copy of the library can be renamed again."""
    with installing(destination, threaded) as install:
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
                _link(install.staged, inputs, threaded, exports)
        if interface is not None:
            install.header = renamed(install.staged, interface, destination)
