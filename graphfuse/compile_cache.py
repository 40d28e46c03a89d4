"""Whole-model compile cache: an unchanged model file compiles by one lookup.

The per-kernel object cache (graphfuse.runtime.kernel_objects) makes a build of known
kernels cheap, but reaching the build means importing the model and running every pass
(BERT-base: seconds). So `compile` of a model *file* first looks up the finished library
by a key of everything it depends on:

- the file's contents, and for ONNX the external data files it names;
- the entry, the target options and the input shapes bound on the command line;
- graphfuse's own source (every module of the installed packages) and the tools' versions.

The output's name is not in the key: its C symbols' prefix is given to a copy in place
(runtime/c_api/rename.py). Hashing 440 MB of weights costs most of a second, so the
contents' digest of a file, and for ONNX the external data files it names, are remembered
under its identity (path, size, modification time in ns, inode), as git's index and
ccache's direct mode do: an untouched file is not read again, nor parsed.

An entry is the signature needed to call the library (`<key>.json`) and the library
under each file name it was written as (`<key>.<name digest>.so`, standalone: its weights
linked in), each a hard link of that output where the file system allows, so keeping it
costs no copy and a compile to a name seen before costs none either. The identity of each
kept library is recorded beside it: a library changed in place through the user's link is
noticed and dropped, never handed out again. This module imports neither xDSL, NumPy nor
ONNX, so that a hit (the whole of a warm `graphfuse compile`) costs what it reads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphfuse.runtime.cpu_tools import cache_dir, stage_file, tool_versions, write_atomically
from graphfuse.timing import timed

if TYPE_CHECKING:
    from graphfuse.options import CompileOptions

FORMAT = "graphfuse-model-2"
"""Changes when what an entry holds changes."""


def _identity(path: Path) -> str:
    info = path.stat()
    return f"{path.resolve()}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\0{info.st_dev}"


def _remembered(path: Path, kind: str, work: Callable[[Path], Any]) -> Any:
    """`work(path)` (JSON), remembered under the file's identity and `kind`."""
    modified = path.stat().st_mtime
    identity = f"{kind}\0{_identity(path)}"
    memo = _folder("inputs") / f"{hashlib.sha256(identity.encode()).hexdigest()[:32]}"
    try:
        return json.loads(memo.read_text())
    except (OSError, ValueError):
        pass
    value = work(path)
    if time.time() - modified > RACY_SECONDS:
        # A file written within the last moments may change again within the same mtime
        # tick and size (git's "racy" entries): what was read of it is not remembered.
        write_atomically(memo, json.dumps(value).encode())
    return value


def _file_digest(path: Path) -> str:
    """The contents' SHA-256, remembered under the file's identity."""

    def digest_of(source: Path) -> str:
        digest = hashlib.sha256()
        with open(source, "rb") as stream:
            while chunk := stream.read(1 << 24):
                digest.update(chunk)
        return digest.hexdigest()

    return str(_remembered(path, "digest", digest_of))


RACY_SECONDS = 2.0


def _external_data(path: Path) -> list[Path]:
    """The external data files an ONNX model names, remembered under its identity (ONNX
    is imported, and the model parsed without its data, only when the file is new)."""
    names = _remembered(path, "external data", _external_locations)
    return [path.parent / name for name in names]


def _external_locations(path: Path) -> list[str]:
    import onnx

    try:
        model: Any = onnx.load(str(path), load_external_data=False)  # pyright: ignore[reportUnknownMemberType]
    except Exception:  # noqa: BLE001 - an unreadable model is reported by the importer
        return []
    locations = {
        entry.value
        for tensor in model.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return sorted(locations)


SOURCE_PACKAGES = ("graphfuse", "graphfuse.dialects", "graphfuse.lowering", "graphfuse.passes")
"""The packages graphfuse installs (pyproject.toml), whose source is in every key."""


@cache
def _source_digest() -> str:
    """graphfuse's installed source: a change to any pass changes every key. The packages
    are found without importing them (the dialects would load xDSL)."""
    digest = hashlib.sha256()
    for name in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent
        for source in sorted(root.rglob("*")):
            if source.suffix in (".py", ".mlir", ".c") and "__pycache__" not in source.parts:
                digest.update(str(source.relative_to(root)).encode())
                digest.update(source.read_bytes())
    return digest.hexdigest()


def model_key(
    path: str | Path,
    entry: str,
    settings: Mapping[str, Any],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> str | None:
    """The key of compiling model file `path` with `settings`; None when the file (or an
    external data file it names) cannot be read, which the importer then reports."""
    source = Path(path)
    try:
        files = [source]
        if source.suffix.lower() == ".onnx":
            files += _external_data(source)
        elif source.suffix.lower() == ".mlir":
            from graphfuse.weights import HEAD, named_weights_path  # xDSL: .mlir files only

            with open(source, "rb") as stream:  # the attribute is at the top (weights.py)
                head = stream.read(HEAD).decode(errors="replace")
            named = named_weights_path(head, source.parent)
            files += [named] if named is not None else []
        contents = [_file_digest(f) for f in files]
    except OSError:
        return None
    return content_key(contents, entry, settings, input_shapes)


def content_key(
    contents: Sequence[str],
    entry: str,
    settings: Mapping[str, Any],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """The key of compiling what `contents` (digests) describe with `settings`."""
    described = {
        "format": FORMAT,
        "contents": list(contents),
        "entry": entry,
        "settings": {k: repr(v) for k, v in sorted(settings.items())},
        "input_shapes": {k: list(v) for k, v in sorted((input_shapes or {}).items())},
        "source": _source_digest(),
        "tools": tool_versions("mlir-opt", "mlir-translate", "opt", "llc", "cc"),
        "libraries": [_version(name) for name in ("xdsl", "onnx", "numpy", "safetensors")],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


def key_for(
    path: Path,
    entry: str,
    options: CompileOptions,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> str | None:
    """The key of compiling model file `path` with `options` to a library written out
    (whatever its name); None when the file cannot be read."""
    with timed("look up the model cache"):
        return model_key(path, entry, settings_of(options, constants), input_shapes)


def settings_of(
    options: CompileOptions, constants: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What of `options` (and of the inputs bound to constants) a key holds: every field,
    and the CPU, its features and the lanes they resolve to on this machine."""
    settings: dict[str, Any] = {f.name: getattr(options, f.name) for f in fields(options)}
    settings["resolved_cpu"] = options.target.resolved_cpu()
    settings["cpu_features"] = options.target.features()
    settings["lanes"] = options.lanes or options.target.vector_lanes()
    for name, value in sorted((constants or {}).items()):
        import numpy as np

        settings[f"constant {name}"] = np.asarray(value).tolist()
    return settings


def compile_cached(
    path: str | Path,
    entry: str,
    options: CompileOptions,
    output: Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> str | None:
    """A compile of model file `path` to `output` done from the cache alone, as
    graphfuse.compile would find it: how the library's entry is called
    (`@main(2x16xi64) -> (2x16x32xf32)`), or None on a miss (then compile). Only the cache
    is read: neither the compiler nor xDSL is imported."""
    from graphfuse.outputs import check_output_file

    source = Path(path)
    if not source.is_file() or not source.name.lower().endswith((".mlir", ".onnx")):
        return None  # the compiler says what is wrong
    check_output_file(output)
    key = key_for(source, entry, options, input_shapes, constants)
    found = lookup(key, output.name) if key is not None else None
    if found is None or "called" not in found.signature:
        return None
    install(found, output)
    return str(found.signature["called"])


def install(found: CachedModel, output: Path) -> dict[str, Any]:
    """Put the cached library at `output` (hard-linked when it was kept under that name,
    else copied and renamed: runtime/install.py), keep it under its new name too, and
    return its signature."""
    from graphfuse.runtime.install import install_library

    destination = Path(output).absolute()
    install_library(found.library, destination, bool(found.signature["threaded"]))
    key = found.library.name.split(".", 1)[0]
    if found.library != _library_path(_folder("models"), key, destination.name):
        store(key, destination, found.signature)
    return found.signature


@dataclass(frozen=True)
class Loaded:
    """A compile for this process found whole: its library (in the object cache's folder,
    reserving its large constants' space), signature and those constants' bytes."""

    library: Path
    signature: dict[str, Any]
    detached: dict[str, bytes]


def lookup_loaded(key: str) -> Loaded | None:
    """The compile for this process kept under `key`, or None."""
    folder = cache_dir()
    try:
        described = json.loads((folder / f"loaded-{key}.json").read_text())
        library = folder / described["library"]
        detached: dict[str, bytes] = {}
        if described["detached"]:
            with open(folder / f"loaded-{key}.weights", "rb") as blob:
                for name, size in described["detached"]:
                    detached[name] = blob.read(size)
                    if len(detached[name]) != size:
                        return None
    except (OSError, ValueError, KeyError):
        return None
    if not library.is_file():
        return None  # the object cache was emptied
    return Loaded(library, described, detached)


def store_loaded(
    key: str, library: Path, signature: Mapping[str, Any], detached: Mapping[str, bytes]
) -> None:
    """Keep a compile for this process: `library` is a file of the cache folder (named by
    its contents), the detached constants go to a blob beside the signature, both files of
    the cache folder itself, as the objects are. Best effort, as `store`."""
    try:
        folder = cache_dir()
        if detached:
            staged = stage_file(folder, suffix=".weights")
            try:
                with open(staged, "wb") as blob:
                    for data in detached.values():
                        blob.write(data)
                os.replace(staged, folder / f"loaded-{key}.weights")
            finally:
                staged.unlink(missing_ok=True)
        described = {
            **signature,
            "library": library.name,
            "detached": [[n, memoryview(d).nbytes] for n, d in detached.items()],
        }
        write_atomically(folder / f"loaded-{key}.json", json.dumps(described).encode())
    except OSError:
        pass


def _version(distribution: str) -> str:
    try:
        return f"{distribution} {metadata.version(distribution)}"
    except metadata.PackageNotFoundError:
        return f"{distribution} absent"


@dataclass(frozen=True)
class CachedModel:
    """A finished library and how to call its entry."""

    library: Path
    signature: dict[str, Any]
    """inputs, outputs, scratch (memref types as text), kernels (a count), threaded, and
    `called` (how the compiled function describes itself, for the command line)."""


def lookup(key: str, name: str) -> CachedModel | None:
    """The entry of `key`: its library written as `name` when it is kept and unchanged,
    else any library of the entry (to be copied and renamed); None on a miss."""
    folder = _folder("models")
    try:
        described = json.loads((folder / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    own = _library_path(folder, key, name)
    for library in [own, *sorted(set(folder.glob(f"{key}.*.so")) - {own})]:
        if _unchanged(library):
            return CachedModel(library, described)
    return None


def store(key: str, library: Path, signature: Mapping[str, Any]) -> None:
    """Keep `library` (a standalone library just written) and its signature under `key`:
    a hard link, else a copy when the entry has no library yet. Best effort: a cache that
    cannot be written (a full disk) costs the next compile its speed, never this one its
    result."""
    from graphfuse.runtime.install import hard_link

    try:
        folder = _folder("models")
        kept = _library_path(folder, key, library.name)
        staged = stage_file(folder, suffix=".so")
        try:
            if not hard_link(library, staged):
                if any(folder.glob(f"{key}.*.so")):
                    return  # one copy is enough: other names are renamed from it
                shutil.copyfile(library, staged)  # in the kernel: no 440 MB in memory
            os.replace(staged, kept)
        finally:
            staged.unlink(missing_ok=True)
        write_atomically(_identity_path(kept), _identity(kept).encode())
        # The signature last: an entry is complete once it exists.
        write_atomically(folder / f"{key}.json", json.dumps(dict(signature)).encode())
    except OSError:
        pass


def _library_path(folder: Path, key: str, name: str) -> Path:
    return folder / f"{key}.{hashlib.sha256(name.encode()).hexdigest()[:16]}.so"


def _identity_path(library: Path) -> Path:
    return library.with_suffix(".identity")


def _unchanged(library: Path) -> bool:
    """Whether `library` is as it was kept: a user who writes into their output writes
    into the kept library too (one file, two names); such a library is dropped."""
    try:
        recorded = _identity_path(library).read_text()
        if recorded == _identity(library):
            return True
    except OSError:
        return False
    library.unlink(missing_ok=True)
    _identity_path(library).unlink(missing_ok=True)
    return False


def _folder(name: str) -> Path:
    folder = cache_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
