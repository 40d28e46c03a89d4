"""bench/bench_torch_backend.py runs end to end on the tests' MLP, in this process and
without inductor (whose first compile alone takes seconds): a row with every figure
(timings themselves are not tested: bench/README.md)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "bench_torch_backend.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_torch_backend", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def keep_threads() -> Iterator[None]:
    """The bench sets torch's thread count; later tests get theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
    torch._dynamo.reset()


@pytest.mark.usefixtures("keep_threads")
def test_bench_torch_backend_runs_on_the_small_mlp(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--only", "mlp", "--test-size", "--seconds", "0.01", "--no-inductor"]
    assert _bench().main(args) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("mlp")]
    assert len(rows) == 1, rows
    number = r"\s+[\d.]+"
    assert re.fullmatch(rf"mlp{number}\s+-{number}\s+-{number * 2}\s+-", rows[0]), rows[0]
