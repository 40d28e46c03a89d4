"""GEMM throughput: graphfuse's compiled matmul (loop-tile-matmul) against onnxruntime
(all graph optimisations) and NumPy's BLAS, side by side in one run, same threads.

    .venv/bin/python bench/bench_gemm.py [--sizes 1024 2048] [--threads 2]

Each figure is 2 N^3 / best time of --repeat runs, in GFLOP/s; the last columns are
graphfuse's as a share of onnxruntime's. Rounds alternate between the three, so a noisy
machine's slow spells fall on all alike. The result is checked against NumPy.
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "onnxruntime", "onnx")

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.parsing import parse_text

ROUNDS = 3


def _best(run: Callable[[], object], repeat: int) -> float:
    run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def _onnxruntime(n: int, threads: int) -> onnxruntime.InferenceSession:
    value = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in "abc"]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm", value[:2], value[2:]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def bench(n: int, threads: int, repeat: int) -> None:
    t = f"tensor<{n}x{n}xf32>"
    text = (
        f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
        f"  %c = graph.matmul %a, %b : ({t}, {t}) -> {t}\n  func.return %c : {t}\n}}\n"
    )
    compiled = graphfuse.compile(parse_text(text, "gemm"), options=CompileOptions(threads=threads))
    session = _onnxruntime(n, threads)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    out = np.empty((n, n), np.float32)
    expected = a @ b
    error = float(np.max(np.abs(compiled(a, b, out=out) - expected))) / float(
        np.max(np.abs(expected))
    )
    runs = {
        "graphfuse": lambda: compiled(a, b, out=out),
        "onnxruntime": lambda: session.run(None, {"a": a, "b": b}),
        "numpy": lambda: a @ b,
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(ROUNDS):
        for name, run in runs.items():
            best[name] = min(best[name], _best(run, repeat))
    rate = {name: 2 * n**3 / seconds / 1e9 for name, seconds in best.items()}
    print(
        f"{n:5d}^3  graphfuse {rate['graphfuse']:6.1f}  onnxruntime {rate['onnxruntime']:6.1f}  "
        f"numpy {rate['numpy']:6.1f} GFLOP/s   graphfuse/onnxruntime "
        f"{rate['graphfuse'] / rate['onnxruntime']:5.1%}   (rel. error {error:.1e})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1024, 2048])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.threads} threads")
    for n in args.sizes:
        bench(n, args.threads, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
