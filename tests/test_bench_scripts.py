"""Every benchmark script starts: its imports resolve through graphfuse.testing (no sys.path
edits) and its arguments parse; bench_compile.py runs whole on the tiny model. Timings
themselves are not tested (bench/README.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(path.name for path in BENCH.glob("bench_*.py"))


def test_bench_scripts_found() -> None:
    assert "bench_cpu.py" in SCRIPTS and len(SCRIPTS) >= 6


def _help(script: str, folder: Path, env: dict[str, str] | None = None) -> Any:
    """`script --help` run from `folder`."""
    return subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_starts(script: str, tmp_path: Path) -> None:
    run = _help(script, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage:")


def test_bench_compile_runs_on_the_tiny_model(tmp_path: Path) -> None:
    """The compile-time bench end to end on the 2-layer BERT alone (export, import, cold
    and warm compile, warm to another name, onnxruntime's session): every figure filled
    in, the targets shown."""
    run = subprocess.run(
        [sys.executable, str(BENCH / "bench_compile.py"), "--only", "tiny"]
        + ["--models-dir", str(tmp_path / "models")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("bert-tiny ")]
    assert len(rows) == 2 and not any("failed" in row for row in rows), run.stdout
    for target in ("cold compile", "warm compile", "warm, another name"):
        assert re.search(rf"bert-tiny {target} .* (ok|OVER)$", run.stdout, re.MULTILINE)
    assert (tmp_path / "models" / "bert-tiny" / "bert.onnx").exists()


@pytest.mark.parametrize("script", ["bench_gemm.py", "bench_models.py", "bench_cpu.py"])
def test_bench_script_without_the_test_extra_says_so(script: str, tmp_path: Path) -> None:
    """onnxruntime made unimportable (a stub package raising ImportError first on the
    path): one line naming it and the install command, exit status 2, no traceback."""
    stub = tmp_path / "stubs" / "onnxruntime"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('not installed')\n")
    run = _help(script, tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path / "stubs")})
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith(f"{script}: needs onnxruntime") and "[test]" in lines[0]
