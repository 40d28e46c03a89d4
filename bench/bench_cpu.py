"""graphfuse against onnxruntime and XLA (through JAX) on the CPU, side by side in one run.

    .venv/bin/python bench/bench_cpu.py [--only NAME ...] [--models [NAME ...]]
                                        [--seconds S] [--threads N]

Every workload of graphfuse/testing/workloads.py, and with `--models` the networks of
graphfuse/testing/model_zoo.py at their published sizes, run by graphfuse (`threads=N`, results
into preallocated arrays), onnxruntime (the graph exported by graphfuse/testing/to_onnx.py,
ORT_ENABLE_ALL, N intra-op threads) and XLA (the graph translated by graphfuse/testing/to_jax.py,
`jax.jit`, inputs already on the device; XLA's CPU client uses every core, so N defaults to the
core count). Times are the best over rounds alternating between the three, after a warm-up;
results are checked against onnxruntime's first. The ratio columns are graphfuse's time over
each; `target` bounds graphfuse over the faster of the two: 1.0 for memory-bound workloads,
1.5 otherwise. Figures, with machine and command: docs/performance.md.
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "jax", "onnxruntime")

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import onnxruntime as ort

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.dialects.graph import functions
from graphfuse.parsing import parse_text
from graphfuse.testing import workloads
from graphfuse.testing.measure import best_time
from graphfuse.testing.to_jax import to_jax
from graphfuse.testing.to_onnx import to_onnx

ROOT = Path(__file__).resolve().parent.parent

ROUNDS = 6
MOST_PER_ROUND = 1000
"""Runs are bounded by time, not count: a 1 ms workload gets hundreds of runs per round,
so its best time is not one noisy spell's (20 runs per round left the minimum of a 1 ms
kernel varying by 30% between runs of the benchmark on the project's shared VM)."""
Runner = Callable[[], object]


def time_side_by_side(runs: dict[str, Runner], seconds: float) -> dict[str, float]:
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(ROUNDS):
        for name, run in runs.items():
            best[name] = min(best[name], best_time(run, seconds / ROUNDS, MOST_PER_ROUND))
    return best


def onnxruntime_session(model: bytes | str, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _check(name: str, got: Any, expected: list[np.ndarray], what: str) -> None:
    got = got if isinstance(got, tuple | list) else (got,)
    for g, e in zip(got, expected, strict=True):
        scale = max(float(np.max(np.abs(e))), 1e-30)
        error = float(np.max(np.abs(np.asarray(g) - e))) / scale
        assert error < 1e-3, f"{name}: {what} differs from onnxruntime (rel. error {error:.1e})"


def runners(
    module: Any, inputs: list[np.ndarray], session: ort.InferenceSession, threads: int, name: str
) -> dict[str, Runner]:
    """The three runs of one graph, each checked against onnxruntime first."""
    compiled = graphfuse.compile(module, options=CompileOptions(threads=threads))
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs, strict=True)}
    expected = session.run(None, feeds)
    outs = tuple(np.empty_like(e) for e in expected)
    out = outs if len(outs) > 1 else outs[0]
    _check(name, compiled(*inputs, out=out), expected, "graphfuse")
    xla = to_jax(next(functions(module)))
    device_inputs = [jax.device_put(a) for a in inputs]
    _check(name, xla(*device_inputs), expected, "XLA")
    return {
        "graphfuse": lambda: compiled(*inputs, out=out),
        "onnxruntime": lambda: session.run(None, feeds),
        "xla": lambda: jax.block_until_ready(xla(*device_inputs)),
    }


def report(name: str, best: dict[str, float], target: float | None) -> None:
    fastest = min(best["onnxruntime"], best["xla"])
    ratio = best["graphfuse"] / fastest
    verdict = "" if target is None else f"{target:6.1f}  {'met' if ratio <= target else 'MISSED'}"
    print(
        f"{name:42} {best['graphfuse'] * 1e3:9.2f} {best['onnxruntime'] * 1e3:9.2f} "
        f"{best['xla'] * 1e3:9.2f} {best['graphfuse'] / best['onnxruntime']:7.2f} "
        f"{best['graphfuse'] / best['xla']:7.2f} {ratio:8.2f}  {verdict}",
        flush=True,
    )


def workload_rows(only: list[str] | None, threads: int, seconds: float) -> None:
    for name, (make, memory_bound) in workloads.WORKLOADS.items():
        if only and not any(s in name for s in only):
            continue
        module = parse_text(make(), name)
        function = next(functions(module))
        rng = np.random.default_rng(0)  # positive: batch-norm variances must be
        inputs = [
            rng.uniform(0.1, 1.0, a.type.get_shape()).astype(np.float32)  # type: ignore[attr-defined]
            for a in function.body.block.args
        ]
        session = onnxruntime_session(to_onnx(function).SerializeToString(), threads)
        best = time_side_by_side(runners(module, inputs, session, threads, name), seconds)
        report(name, best, 1.0 if memory_bound else 1.5)


def model_rows(names: list[str], threads: int, seconds: float) -> None:
    from graphfuse.frontend.onnx_import import from_onnx
    from graphfuse.testing.model_zoo import export

    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            exported = export(name, Path(folder), tiny=False)
            session = onnxruntime_session(str(exported.path), threads)
            inputs = [exported.inputs[i.name] for i in session.get_inputs()]
            module = from_onnx(exported.path)
            best = time_side_by_side(runners(module, inputs, session, threads, name), seconds)
            report(f"{name} (published size)", best, None)


def main() -> int:
    from graphfuse.testing.model_zoo import MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="substrings of workload names to run")
    parser.add_argument(
        "--models", nargs="*", help="also (or, with --only and no match, only) these models"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="timing budget per runtime")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{args.threads} threads; XLA {jax.__version__}, onnxruntime {ort.__version__}")
    print(
        f"{'workload (times in ms)':42} {'graphfuse':>9} {'ort':>9} {'xla':>9} {'gf/ort':>7} "
        f"{'gf/xla':>7} {'gf/best':>8}  target"
    )
    workload_rows(args.only, args.threads, args.seconds)
    if args.models is not None:
        model_rows(args.models or list(MODELS), args.threads, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
