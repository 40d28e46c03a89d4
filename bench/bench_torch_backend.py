"""torch.compile with graphfuse's backend against inductor and eager, side by side in one run.

    .venv/bin/python bench/bench_torch_backend.py [--only NAME ...] [--seconds S]
                                                  [--threads N] [--test-size] [--no-inductor]

The models of graphfuse/testing/torch_models.py at their bench sizes (an MLP, a transformer
block, a small CNN; `--test-size`: the tests' sizes), in eval mode under torch.no_grad(),
each compiled by graphfuse's backend (`graphfuse.torch_backend.GraphfuseBackend` with
`threads=N`, what `torch.compile(backend="graphfuse", options={"threads": N})` builds) and
by inductor (`torch.compile(model)`), with torch.set_num_threads(N) for inductor and eager.
Times are the best over rounds alternating between the three, after a warm-up; results are
checked against eager first. The ratio columns are graphfuse's time over each; the target
bounds graphfuse over inductor (1.2 on the MLP and the transformer block). `--no-inductor`
leaves inductor out (its first compile takes seconds): the tests' smoke run. Figures, with
machine and command: docs/torch-compile.md.
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "torch")

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

import torch

from graphfuse.compiler import CompileOptions
from graphfuse.testing.measure import best_time
from graphfuse.testing.torch_models import SAMPLES
from graphfuse.torch_backend import GraphfuseBackend

ROUNDS = 6
MOST_PER_ROUND = 1000
TARGETS = {"mlp": 1.2, "transformer block": 1.2}
"""graphfuse's time over inductor's that issue 26 asks for."""
Runner = Callable[[], object]


def time_side_by_side(runs: dict[str, Runner], seconds: float) -> dict[str, float]:
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(ROUNDS):
        for name, run in runs.items():
            best[name] = min(best[name], best_time(run, seconds / ROUNDS, MOST_PER_ROUND))
    return best


def runners(
    name: str, threads: int, bench_size: bool, inductor: bool
) -> tuple[dict[str, Runner], dict[str, float]]:
    """Eager, graphfuse and (with `inductor`) inductor runs of one model, checked against
    eager, and the seconds each compile took (its first call)."""
    sample = SAMPLES[name](bench_size)
    model, x = sample.model, sample.input
    torch._dynamo.reset()
    compiled = {
        "graphfuse": torch.compile(model, backend=GraphfuseBackend(CompileOptions(threads=threads)))
    }
    if inductor:
        compiled["inductor"] = torch.compile(model)
    expected = model(x)
    compile_seconds: dict[str, float] = {}
    for label, function in compiled.items():
        start = time.perf_counter()
        got = function(x)
        compile_seconds[label] = time.perf_counter() - start
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4, msg=f"{name}: {label}")
    runs: dict[str, Runner] = {label: _call(f, x) for label, f in compiled.items()}
    runs["eager"] = _call(model, x)
    return runs, compile_seconds


def _call(function: Callable[[torch.Tensor], object], x: torch.Tensor) -> Runner:
    return lambda: function(x)


def report(name: str, best: dict[str, float], compile_seconds: dict[str, float]) -> None:
    """One row: times, graphfuse's ratios to inductor and eager, compile seconds, and the
    target's verdict; inductor's columns are "-" when it was left out."""
    graphfuse, eager = best["graphfuse"], best["eager"]
    inductor = best.get("inductor")
    columns = [f"{graphfuse * 1e3:9.3f}", "-", f"{eager * 1e3:9.3f}", "-"]
    columns += [f"{graphfuse / eager:7.2f}", f"{compile_seconds['graphfuse']:7.1f}", "-", ""]
    if inductor is not None:
        ratio = graphfuse / inductor
        columns[1], columns[3] = f"{inductor * 1e3:9.3f}", f"{ratio:7.2f}"
        columns[6] = f"{compile_seconds['inductor']:7.1f}"
        target = TARGETS.get(name)
        if target is not None:
            columns[7] = f"{target:6.1f}  {'met' if ratio <= target else 'MISSED'}"
    widths = (9, 9, 9, 7, 7, 7, 7, 0)
    print(
        f"{name:20} " + " ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="substrings of model names to run")
    parser.add_argument("--seconds", type=float, default=3.0, help="timing budget per runtime")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--test-size", action="store_true", help="the tests' small models")
    parser.add_argument("--no-inductor", action="store_true", help="leave inductor out")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{args.threads} threads; torch {torch.__version__}")
    print(
        f"{'model (times in ms)':20} {'graphfuse':>9} {'inductor':>9} {'eager':>9} "
        f"{'gf/ind':>7} {'gf/eag':>7} {'gf cmp':>7} {'ind cmp':>7}  target"
    )
    with torch.no_grad():
        for name in SAMPLES:
            if args.only and not any(s in name for s in args.only):
                continue
            runs, compile_seconds = runners(
                name, args.threads, not args.test_size, not args.no_inductor
            )
            report(name, time_side_by_side(runs, args.seconds), compile_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
