"""The whole-model compile cache: an unchanged model file compiled to a library again is
one lookup; any change to the file, its weights or the options compiles it anew."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse import compile_cache, compiler
from graphfuse.compiler import CompileOptions
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_file
from graphfuse.weights import write_module

MODEL = """func.func @main(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %w = graph.constant dense<SCALE> : tensor<64x64xf32>
  %y = graph.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %z = graph.relu %y : tensor<8x64xf32>
  func.return %z : tensor<8x64xf32>
}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(folder))
    return folder


class _Builds:
    """Counts the builds `compile` starts (the passes and the tools), by wrapping them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = compiler.build_module_library

        def counted(*args: object, **kwargs: object) -> Path:
            self.count += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(compiler, "build_module_library", counted)


def _model(folder: Path, scale: str = "0.5") -> Path:
    path = folder / "m.mlir"
    path.write_text(MODEL.replace("SCALE", scale))
    return path


def _check(function: object, path: Path) -> None:
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    expected = reference.run(parse_file(path), "main", x)[0]
    np.testing.assert_allclose(function(x), expected, rtol=1e-5, atol=1e-5)  # type: ignore[operator]


def test_unchanged_file_is_one_lookup(tmp_path: Path, cache: Path, monkeypatch) -> None:  # noqa: ANN001
    builds = _Builds(monkeypatch)
    path = _model(tmp_path)
    first = graphfuse.compile(path, output=tmp_path / "a.so", options=CompileOptions(threads=1))
    assert builds.count == 1
    _check(first, path)
    # The same library name (its C symbols' prefix is part of the key), another folder.
    (tmp_path / "again").mkdir()
    again = tmp_path / "again" / "a.so"
    second = graphfuse.compile(path, output=again, options=CompileOptions(threads=1))
    assert builds.count == 1, "an unchanged model was compiled again"
    assert again.exists()
    _check(second, path)


def test_any_change_compiles_anew(tmp_path: Path, cache: Path, monkeypatch) -> None:  # noqa: ANN001
    builds = _Builds(monkeypatch)
    path = _model(tmp_path)
    out = tmp_path / "a.so"
    graphfuse.compile(path, output=out, options=CompileOptions(threads=1))
    graphfuse.compile(path, output=out, options=CompileOptions(threads=2))
    assert builds.count == 2, "other options, same library"
    graphfuse.compile(path, entry="main", output=out, options=CompileOptions(threads=1))
    assert builds.count == 2
    _model(tmp_path, "0.7")  # same size, new contents
    os.utime(path, ns=(1, 1))
    changed = graphfuse.compile(path, output=out, options=CompileOptions(threads=1))
    assert builds.count == 3
    _check(changed, path)


def test_weights_file_is_part_of_the_key(tmp_path: Path, cache: Path, monkeypatch) -> None:  # noqa: ANN001
    """A module written with its weights outside: new weights, same module text."""
    builds = _Builds(monkeypatch)
    source = tmp_path / "src"
    source.mkdir()
    rng = np.random.default_rng(3)
    text = MODEL.replace("dense<SCALE>", "dense<0.0>")
    for n in range(2):
        module = graphfuse.parsing.parse_text(text)
        constant = next(op for op in module.walk() if op.name == "graph.constant")
        from graphfuse.dialects.graph.elements import numpy_to_dense

        values = rng.standard_normal((64, 64)).astype(np.float32)
        constant.properties["value"] = numpy_to_dense(values, constant.results[0].type)  # type: ignore[arg-type]
        write_module(module, tmp_path / "w.mlir")
        function = graphfuse.compile(
            tmp_path / "w.mlir", output=tmp_path / "w.so", options=CompileOptions(threads=1)
        )
        assert builds.count == n + 1
        _check(function, tmp_path / "w.mlir")


def test_without_output_nothing_is_kept_whole(tmp_path: Path, cache: Path, monkeypatch) -> None:  # noqa: ANN001
    """The Python path's library is not standalone: it reuses objects, not models."""
    builds = _Builds(monkeypatch)
    path = _model(tmp_path)
    for _ in range(2):
        _check(graphfuse.compile(path, options=CompileOptions(threads=2)), path)
    assert builds.count == 2 and not list(cache.glob("models/*.so"))


def test_weights_file_named_by_the_module_is_keyed(
    tmp_path: Path, cache: Path, monkeypatch
) -> None:  # noqa: ANN001
    """A copied module still names its original weights file: that file is in the key."""
    builds = _Builds(monkeypatch)
    module = graphfuse.parsing.parse_text(MODEL.replace("SCALE", "1.0"))
    write_module(module, tmp_path / "w.mlir")
    copy = tmp_path / "copy.mlir"
    copy.write_text((tmp_path / "w.mlir").read_text())
    graphfuse.compile(copy, output=tmp_path / "a.so", options=CompileOptions(threads=1))
    changed = graphfuse.parsing.parse_text(MODEL.replace("SCALE", "3.0"))
    write_module(changed, tmp_path / "w.mlir")
    function = graphfuse.compile(copy, output=tmp_path / "b.so", options=CompileOptions(threads=1))
    assert builds.count == 2
    _check(function, copy)


def test_modules_in_memory_are_not_keyed(cache: Path) -> None:
    module = graphfuse.parsing.parse_text(MODEL.replace("SCALE", "1.0"))
    assert not compiler._is_model_file(module)
    assert not compiler._is_model_file("func.func @main() {\n}")


def _compile_command(folder: Path, cache: Path, *python: str) -> subprocess.CompletedProcess[str]:
    """`graphfuse compile m.mlir --timing` in `folder` with `cache`, `python` options first."""
    run = subprocess.run(
        [sys.executable, *python, "-m", "graphfuse.cli", "compile", "m.mlir", "--timing"],
        cwd=folder,
        env={**os.environ, "GRAPHFUSE_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return run


def test_cli_warm_compile_writes_a_loading_library(tmp_path: Path, cache: Path) -> None:
    _model(tmp_path)
    _compile_command(tmp_path, cache)
    run = _compile_command(tmp_path, cache)
    # The same name again: the kept library itself, hard-linked; nothing is imported but
    # the cache (the compiler's stages never start).
    assert "build" not in run.stderr and "hard-link the library" in run.stderr
    assert "graph to loop" not in run.stderr
    imports = _compile_command(tmp_path, cache, "-X", "importtime")
    assert "graphfuse.compiler" not in imports.stderr, "a hit loaded the compiler"
    assert "graphfuse.passes" not in imports.stderr
    kept = list((cache / "models").glob("*.so"))
    assert len(kept) == 1 and os.path.samefile(kept[0], tmp_path / "m.so")
    found = compile_cache.lookup(next((cache / "models").glob("*.json")).stem, "again.so")
    assert found is not None
    loaded = compiler._from_cache(found, "main", tmp_path / "again.so")
    _check(loaded, tmp_path / "m.mlir")
    assert not os.path.samefile(tmp_path / "again.so", tmp_path / "m.so")


def test_another_name_is_a_renamed_copy(tmp_path: Path, cache: Path, monkeypatch) -> None:  # noqa: ANN001
    """The output's name is not in the key: a second name gets a copy whose symbols,
    header and description bear the new prefix; the first library keeps its own."""
    import ctypes

    from graphfuse.runtime.c_api.link import read_interface

    builds = _Builds(monkeypatch)
    path = _model(tmp_path)
    options = CompileOptions(threads=1)
    graphfuse.compile(path, output=tmp_path / "libfirst.so", options=options)
    long_name = "x" * 200 + ".so"  # longer than the first: the slot has room for any name
    for name in ("second.so", long_name):
        function = graphfuse.compile(path, output=tmp_path / name, options=options)
        assert builds.count == 1, f"{name}: compiled again"
        _check(function, path)
        prefix = name.split(".")[0]
        library = ctypes.CDLL(str(tmp_path / name))
        assert getattr(library, f"{prefix}_main")  # found through the rebuilt hash table
        with pytest.raises(AttributeError):
            _ = library.first_main
        described = read_interface(tmp_path / name)
        assert described is not None and described.prefix == prefix
        assert described.library == name
        header = (tmp_path / name).with_suffix(".h").read_text()
        assert f"int {prefix}_main(" in header and "first_" not in header
    first = read_interface(tmp_path / "libfirst.so")
    assert first is not None and first.prefix == "first"
    assert ctypes.CDLL(str(tmp_path / "libfirst.so")).first_main


def test_a_library_changed_in_place_is_not_handed_out(
    tmp_path: Path, cache: Path, monkeypatch
) -> None:  # noqa: ANN001
    """The output is the kept library (one file, two names): a user who writes into it
    writes into the cache; the next compile notices and builds afresh."""
    builds = _Builds(monkeypatch)
    path = _model(tmp_path)
    out = tmp_path / "a.so"
    graphfuse.compile(path, output=out, options=CompileOptions(threads=1))
    with open(out, "r+b") as library:
        library.seek(0, os.SEEK_END)
        library.write(b"\0" * 16)
    function = graphfuse.compile(path, output=out, options=CompileOptions(threads=1))
    assert builds.count == 2
    _check(function, path)


def test_reuse_finds_a_module_compiled_for_this_process(
    tmp_path: Path, cache: Path, monkeypatch
) -> None:  # noqa: ANN001
    """With `reuse` (torch.compile's backend), a module seen before, by its text and its
    weights' bytes, is one lookup: no fusion, lowering or build, its large constants copied
    in from the cache. Another weight is another module."""
    from graphfuse.dialects.graph.elements import numpy_to_dense

    builds = _Builds(monkeypatch)
    rng = np.random.default_rng(5)
    big = MODEL.replace("64", "192").replace("dense<SCALE>", "dense<0.0>")  # 144 KiB weight

    def module_with(values: np.ndarray) -> object:
        module = graphfuse.parsing.parse_text(big)
        constant = next(op for op in module.walk() if op.name == "graph.constant")
        constant.properties["value"] = numpy_to_dense(values, constant.results[0].type)  # type: ignore[arg-type]
        return module

    weights = rng.standard_normal((192, 192)).astype(np.float32)
    x = rng.standard_normal((8, 192)).astype(np.float32)
    options = CompileOptions(threads=1)
    counts = []
    for values in (weights, weights.copy(), weights * 2):
        module = module_with(values)
        expected = reference.run(module, "main", x)[0]  # type: ignore[arg-type]
        function = graphfuse.compile(module, options=options, reuse=True)  # type: ignore[arg-type]
        np.testing.assert_allclose(function(x), expected, rtol=1e-4, atol=1e-4)  # type: ignore[operator]
        counts.append(builds.count)
    assert counts == [1, 1, 2], "the same module compiled again, or another one found"
    assert list(cache.glob("loaded-*.weights")), "the large weight was not detached"
    graphfuse.compile(module_with(weights), options=options)  # type: ignore[arg-type]
    assert builds.count == 3, "without reuse every compile builds"
