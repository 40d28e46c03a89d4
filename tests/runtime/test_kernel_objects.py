"""One object per kernel: cached by content, rebuilt one kernel at a time, built in
parallel, and failing in one line without leaving files behind."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.lowering.cpu.gemm import tile_plan
from graphfuse.runtime import CompiledFunction
from graphfuse.runtime.cpu_tools import CpuTarget
from graphfuse.runtime.kernel_objects import (
    ENTRY_OPT_LEVEL,
    TILED_MARK,
    UNTILED_OPT_LEVEL,
    opt_level_for,
)
from graphfuse.toolchain import ToolchainError
from tests.conftest import parse, run_text

# Two kernels: a row kernel (mul, reduce, sub) and a tiled matmul. SUB_OPERANDS picks the
# order of the subtraction, which changes the first kernel's body and nothing else.
TWO_KERNELS = """
func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {{
  %c = graph.constant dense<2.0> : tensor<64x64xf32>
  %0 = graph.mul %x, %c : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = graph.reduce_sum %0 axes = [1] : tensor<64x64xf32> -> tensor<64xf32>
  %2 = graph.sub {sub} : ({types}) -> tensor<64x64xf32>
  %3 = graph.matmul %2, %x : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %3 : tensor<64x64xf32>
}}
"""
ROW_MINUS_SUM = TWO_KERNELS.format(sub="%0, %1", types="tensor<64x64xf32>, tensor<64xf32>")
SUM_MINUS_ROW = TWO_KERNELS.format(sub="%1, %0", types="tensor<64xf32>, tensor<64x64xf32>")


def _objects(cache: Path) -> set[str]:
    return {p.name for p in cache.glob("*.o")}


def _check(compiled: CompiledFunction, text: str) -> None:
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    (want,) = run_text(text, x)
    np.testing.assert_allclose(compiled(x), want, rtol=1e-4, atol=1e-3)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(folder))
    return folder


def test_kernel_objects_one_per_kernel_and_one_for_the_entry(cache: Path) -> None:
    compiled = graphfuse.compile(parse(ROW_MINUS_SUM))
    assert compiled.kernel_count == 2
    assert len(_objects(cache)) == 3
    _check(compiled, ROW_MINUS_SUM)


def test_kernel_objects_a_changed_kernel_rebuilds_one_object(cache: Path) -> None:
    graphfuse.compile(parse(ROW_MINUS_SUM))
    before = _objects(cache)
    compiled = graphfuse.compile(parse(SUM_MINUS_ROW))
    assert len(before) == 3 and len(_objects(cache) - before) == 1
    _check(compiled, SUM_MINUS_ROW)


def test_kernel_objects_identical_modules_build_nothing(cache: Path, tmp_path: Path) -> None:
    first = graphfuse.compile(parse(ROW_MINUS_SUM))
    files = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    second = graphfuse.compile(parse(ROW_MINUS_SUM))
    assert second.library_path == first.library_path
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == files
    graphfuse.compile(parse(ROW_MINUS_SUM), output=tmp_path / "out.so")
    assert _objects(cache) == {name for name in files if name.endswith(".o")}


def test_kernel_objects_threads_build_and_compute(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """threads=2: the kernels' OpenMP loops call the parallel runtime from their own
    objects, linked into one library. (The 64x64x64 matmul is below the size that gets
    threads; the threshold is lowered so that it does.)"""
    monkeypatch.setattr(tile_plan, "MIN_THREADED_MACS", 0)
    compiled = graphfuse.compile(parse(ROW_MINUS_SUM), options=CompileOptions(threads=2))
    assert (cache / compiled.library_path.name).exists()
    assert any(p.name.startswith("libgraphfuse_parallel") for p in cache.iterdir())
    _check(compiled, ROW_MINUS_SUM)


def _failing_llc(tmp_path: Path) -> Path:
    real = subprocess.run(
        [
            sys.executable,
            "-c",
            "from graphfuse.toolchain import find_tool as f; print(f('llc').path)",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    script = tmp_path / "llc"
    # --version answers like the real llc (cache keys ask it); anything else fails.
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec {real} --version; fi\n'
        "echo 'llc: error: out of registers' >&2\nexit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_kernel_objects_a_failing_tool_is_one_line_and_leaves_nothing(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHFUSE_LLC", str(_failing_llc(tmp_path)))
    output = tmp_path / "out" / "model.so"
    output.parent.mkdir()
    with pytest.raises(ToolchainError) as failure:
        graphfuse.compile(parse(ROW_MINUS_SUM), output=output)
    message = str(failure.value)
    assert "\n" not in message
    assert message == "generating machine code failed (llc): llc: error: out of registers"
    assert list(output.parent.iterdir()) == []
    # Nothing built is left; the parallel runtime and the tools' remembered versions stay.
    kept = ("libgraphfuse", "tool-")
    assert [p.name for p in cache.iterdir() if not p.name.startswith(kept)] == []


def test_opt_level_for_tiles_and_chosen_levels() -> None:
    """GEMM tiles at the target's level, other kernels and the entry lower (but never
    above the target's), and a level the user chose everywhere."""
    tiled, plain = f"{TILED_MARK}fma", "arith.addf"
    assert opt_level_for(tiled, CpuTarget(opt_level=3)) == 3
    assert opt_level_for(plain, CpuTarget(opt_level=3)) == UNTILED_OPT_LEVEL < 3
    assert opt_level_for(plain, CpuTarget(opt_level=3), entry=True) == ENTRY_OPT_LEVEL < 3
    assert opt_level_for(plain, CpuTarget(opt_level=1)) == 1
    assert opt_level_for(plain, CpuTarget(opt_level=2, uniform_opt_level=True)) == 2
    assert opt_level_for(tiled, CpuTarget(opt_level=0, uniform_opt_level=True)) == 0
