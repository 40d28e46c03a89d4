"""Whole-model compile cache: an unchanged model file compiles by one lookup.

The per-kernel object cache (graphfuse.runtime.kernel_objects) makes a build of known
kernels cheap, but reaching the build means importing the model and running every pass
(BERT-base: seconds). So `compile` of a model *file* first looks up the finished library
by a key of everything it depends on:

- the file's contents, and for ONNX the external data files it names;
- the entry, the target options and the input shapes bound on the command line;
- graphfuse's own source (every module of the installed packages) and the tools' versions.

Hashing 440 MB of weights costs most of a second, so the contents' digest of a file is
remembered under its identity (path, size, modification time in ns, inode), as git's index
and ccache's direct mode do: an untouched file is not read again. The entry holds the
library (standalone: its weights linked in) and the signature needed to call it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from graphfuse.runtime.build import write_atomically
from graphfuse.runtime.cpu_tools import cache_dir, stage_file, tool_versions
from graphfuse.weights import HEAD, named_weights_path

FORMAT = "graphfuse-model-1"
"""Changes when what an entry holds changes."""


def _file_digest(path: Path) -> str:
    """The contents' SHA-256, remembered under the file's identity."""
    info = path.stat()
    identity = f"{path.resolve()}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\0{info.st_dev}"
    memo = _folder("inputs") / f"{hashlib.sha256(identity.encode()).hexdigest()[:32]}"
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 24):
            digest.update(chunk)
    value = digest.hexdigest()
    if time.time() - info.st_mtime > RACY_SECONDS:
        # A file written within the last moments may change again within the same mtime
        # tick and size (git's "racy" entries): its digest is not remembered.
        write_atomically(memo, value.encode())
    return value


RACY_SECONDS = 2.0


def _external_data(path: Path) -> list[Path]:
    """The external data files an ONNX model names (read without loading them)."""
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
    return [path.parent / location for location in sorted(locations)]


@cache
def _source_digest() -> str:
    """graphfuse's installed source: a change to any pass changes every key."""
    digest = hashlib.sha256()
    for name in ("graphfuse", "graphfuse.dialects", "graphfuse.lowering", "graphfuse.passes"):
        root = Path(importlib.import_module(name).__file__ or "").parent
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
            with open(source, "rb") as stream:  # the attribute is at the top (weights.py)
                head = stream.read(HEAD).decode(errors="replace")
            named = named_weights_path(head, source.parent)
            files += [named] if named is not None else []
        contents = [_file_digest(f) for f in files]
    except OSError:
        return None
    described = {
        "format": FORMAT,
        "contents": contents,
        "entry": entry,
        "settings": {k: repr(v) for k, v in sorted(settings.items())},
        "input_shapes": {k: list(v) for k, v in sorted((input_shapes or {}).items())},
        "source": _source_digest(),
        "tools": tool_versions("mlir-opt", "mlir-translate", "opt", "llc", "cc"),
        "libraries": [_version(name) for name in ("xdsl", "onnx", "numpy", "safetensors")],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


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
    """inputs, outputs, scratch (memref types as text) and kernels (a count)."""


def lookup(key: str) -> CachedModel | None:
    folder = _folder("models")
    library, signature = folder / f"{key}.so", folder / f"{key}.json"
    try:
        described = json.loads(signature.read_text())
    except (OSError, ValueError):
        return None
    if not library.exists():
        return None
    return CachedModel(library, described)


def store(key: str, library: Path, signature: Mapping[str, Any]) -> None:
    """Keep `library` (a standalone library) and its signature under `key`. Best effort:
    a cache that cannot be written (a full disk) costs the next compile its speed, never
    this one its result."""
    try:
        folder = _folder("models")
        staged = stage_file(folder, suffix=".so")
        try:
            shutil.copyfile(library, staged)  # in the kernel: no 440 MB in memory
            os.replace(staged, folder / f"{key}.so")
        finally:
            staged.unlink(missing_ok=True)
        # The signature last: an entry is complete once it exists.
        write_atomically(folder / f"{key}.json", json.dumps(dict(signature)).encode())
    except OSError:
        pass


def _folder(name: str) -> Path:
    folder = cache_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
