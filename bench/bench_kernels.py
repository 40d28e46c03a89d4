"""Benchmark: fused vs unfused compiled CPU code vs NumPy op by op.

Run: `.venv/bin/python bench/bench_kernels.py [--only NAME ...] [--seconds S]`.

For each workload (graphfuse/testing/workloads.py), in one process: graph ops; kernels and bytes
moved (read + written by kernels, from graph-level kernel stats) unfused and fused; cold compile
time of the fused build (empty build cache); run time fused, unfused (every op its own compiled
kernel) and NumPy op by op (the reference semantics of each op called in order, no interpreter);
and, for memory-bound workloads, the fused time as a multiple of the compulsory bytes (inputs +
outputs) over this machine's copy bandwidth (NumPy copy of 256 MB). Times are the best of
repeated runs after one warm-up run; compiled functions write into preallocated result arrays
(`out=`) and use the default threads (all cores)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects import graph
from graphfuse.dialects.graph import functions
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text
from graphfuse.passes.analysis.kernel_stats import Summary, kernel_stats
from graphfuse.testing import workloads
from graphfuse.testing.measure import best_time, cold_compile


def copy_bandwidth() -> float:
    """Bytes per second of a NumPy copy of 256 MB (read + write counted)."""
    src = np.ones(64 * 1024 * 1024, dtype=np.float32)
    dst = np.empty_like(src)
    seconds = best_time(lambda: np.copyto(dst, src), 1.0, 5)
    return 2 * src.nbytes / seconds


def numpy_op_by_op(text: str) -> Callable[[Sequence[np.ndarray]], None]:
    """Each op's NumPy definition called in order on the unfused, undecomposed graph."""
    module = parse_text(text, "workload")
    function = next(functions(module))
    ops = [op for op in function.body.block.ops if op.dialect_name() == "graph"]
    constants = {
        op.results[0]: reference.evaluate(op, [])[0]  # type: ignore[index]
        for op in ops
        if isinstance(op, graph.ConstantOp)
    }
    computing = [op for op in ops if not isinstance(op, graph.ConstantOp)]
    returned = function.body.block.last_op

    def run(arrays: Sequence[np.ndarray]) -> None:
        values: dict[Any, np.ndarray] = dict(zip(function.body.block.args, arrays, strict=True))
        values.update(constants)
        for op in computing:
            results = reference.evaluate(op, [values[v] for v in op.operands])
            assert results is not None
            values.update(zip(op.results, results, strict=True))
        assert returned is not None
        for v in returned.operands:
            values[v]

    return run


def kernel_summary(text: str, fuse: bool) -> Summary:
    module = parse_text(text, "workload")
    lower_to(module, Stage.GRAPH, CompileOptions(fuse=fuse))
    return Summary.of(kernel_stats(next(functions(module))))


def measure(
    name: str, text: str, memory_bound: bool, bandwidth: float, seconds: float
) -> dict[str, Any]:
    module = parse_text(text, "workload")
    function = next(functions(module))
    ops = sum(
        1
        for op in function.body.block.ops
        if op.dialect_name() == "graph" and not isinstance(op, graph.ConstantOp)
    )
    # Positive inputs keep batch-norm variances and the like meaningful (no NaN).
    rng = np.random.default_rng(0)
    inputs = [
        rng.uniform(0.1, 1.0, tuple(arg.type.get_shape())).astype(np.float32)  # type: ignore[attr-defined]
        for arg in function.body.block.args
    ]
    unfused_stats, fused_stats = kernel_summary(text, False), kernel_summary(text, True)
    fused, compile_seconds = cold_compile(module)
    unfused, _ = cold_compile(module, CompileOptions(fuse=False))
    expected = fused(*inputs)
    got = unfused(*inputs)
    scale = float(np.max(np.abs(got)))
    assert np.allclose(expected, got, rtol=1e-3, atol=1e-3 * scale), f"{name}: fused != unfused"
    numpy_run = numpy_op_by_op(text)
    # Results go into preallocated arrays: the time is the kernels', not the page faults of
    # a fresh 16 MB array (NumPy op by op allocates per op, as it always does).
    fused_out, unfused_out = np.empty_like(expected), np.empty_like(got)
    row: dict[str, Any] = {
        "name": name,
        "ops": ops,
        "kernels": (unfused_stats.kernels, fused_stats.kernels),
        "bytes": (
            unfused_stats.bytes_read + unfused_stats.bytes_written,
            fused_stats.bytes_read + fused_stats.bytes_written,
        ),
        "compile": compile_seconds,
        "fused": best_time(lambda: fused(*inputs, out=fused_out), seconds),
        "unfused": best_time(lambda: unfused(*inputs, out=unfused_out), seconds),
        "numpy": best_time(lambda: numpy_run(inputs), seconds),
    }
    if memory_bound:
        compulsory = sum(a.nbytes for a in inputs) + np.asarray(expected).nbytes
        row["bound"] = row["fused"] / (compulsory / bandwidth)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="substrings of workload names to run")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing budget per variant")
    args = parser.parse_args()
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth (NumPy, 256 MB): {bandwidth / 1e9:.2f} GB/s")
    header = (
        f"{'workload':38} {'ops':>4} {'kernels':>9} {'MB moved':>13} {'compile':>8} "
        f"{'fused':>9} {'unfused':>9} {'numpy':>9} {'unf/fus':>7} {'np/fus':>7} {'x bound':>7}"
    )
    print(header)
    for name, (make, memory_bound) in workloads.WORKLOADS.items():
        if args.only and not any(s in name for s in args.only):
            continue
        r = measure(name, make(), memory_bound, bandwidth, args.seconds)
        mb = f"{r['bytes'][0] / 1e6:.0f}->{r['bytes'][1] / 1e6:.0f}"
        bound = f"{r['bound']:.2f}" if "bound" in r else "-"
        print(
            f"{name:38} {r['ops']:>4} {r['kernels'][0]:>4}->{r['kernels'][1]:<4} {mb:>13} "
            f"{r['compile']:>7.2f}s {r['fused'] * 1e3:>7.1f}ms {r['unfused'] * 1e3:>7.1f}ms "
            f"{r['numpy'] * 1e3:>7.1f}ms {r['unfused'] / r['fused']:>7.2f} "
            f"{r['numpy'] / r['fused']:>7.2f} {bound:>7}",
            flush=True,
        )


if __name__ == "__main__":
    main()
