"""Benchmark: graph-fuse's own running time on random graphs of 1k to 16k ops.

Run: `.venv/bin/python bench/bench_graph_fuse.py [--sizes 1000 2000 ...] [--repeat N]`.
Prints the time of the pass alone (parsing excluded) for each size, the best of `repeat`
runs on fresh copies, and the 16k/8k ratio (near-linear scaling gives about 2; the target is
below 2.5): first the partitioner alone (TVM rules), then the partitioner and the cost-model
refinement, then the whole pipeline with the front end.
"""

from __future__ import annotations

import argparse
import time

from xdsl.context import Context

from graphfuse.parsing import parse_text
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.testing.random_graphs import random_graph

PARTITION_ONLY = GraphFusePass(decompose=False, simplify=False, patterns=False, refine=False)
REFINED = GraphFusePass(decompose=False, simplify=False, patterns=False)
PIPELINE = GraphFusePass()


def time_fuse(text: str, repeat: int, fuse: GraphFusePass) -> tuple[float, int]:
    """Best wall time of a graph-fuse run over `repeat` fresh parses, and the kernel count."""
    best = float("inf")
    kernels = 0
    for _ in range(repeat):
        module = parse_text(text)
        start = time.perf_counter()
        fuse.apply(Context(), module)
        best = min(best, time.perf_counter() - start)
        kernels = sum(1 for op in module.walk() if op.name == "graph.fused")
    return best, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 16000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    passes = (
        ("partitioner only", PARTITION_ONLY),
        ("partitioner and refinement", REFINED),
        ("whole pipeline", PIPELINE),
    )
    for label, fuse in passes:
        times: dict[int, float] = {}
        print(f"graph-fuse, {label}")
        print(f"{'ops':>7} {'seconds':>9} {'ops/s':>9} {'kernels':>8}")
        for size in args.sizes:
            seconds, kernels = time_fuse(random_graph(size, seed=size), args.repeat, fuse)
            times[size] = seconds
            print(f"{size:7d} {seconds:9.3f} {size / seconds:9.0f} {kernels:8d}")
        if 8000 in times and 16000 in times:
            print(f"16k/8k time ratio: {times[16000] / times[8000]:.2f} (target < 2.5)")


if __name__ == "__main__":
    main()
