"""Every benchmark script starts: its imports resolve through graphfuse.testing (no sys.path
edits) and its arguments parse. Timings themselves are not tested (bench/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(path.name for path in BENCH.glob("bench_*.py"))


def test_bench_scripts_found() -> None:
    assert "bench_cpu.py" in SCRIPTS and len(SCRIPTS) >= 6


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_starts(script: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage:")
