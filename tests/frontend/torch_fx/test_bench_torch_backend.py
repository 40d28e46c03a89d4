"""bench/bench_torch_backend.py runs end to end on the tests' MLP: a row with every figure
and the target's verdict (timings themselves are not tested: bench/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "bench_torch_backend.py"


def test_bench_torch_backend_runs_on_the_small_mlp(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "mlp", "--test-size", "--seconds", "0.1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("mlp")]
    assert len(rows) == 1, run.stdout
    assert re.search(r"(\s+[\d.]+){7}\s+1\.2\s+(met|MISSED)$", rows[0]), rows[0]
