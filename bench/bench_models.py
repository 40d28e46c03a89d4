"""Benchmark: real networks imported from ONNX, against onnxruntime and PyTorch eager.

Run: `.venv/bin/python bench/bench_models.py [--full] [--only NAME ...] [--seconds S]
[--threads N]`.

For each Hugging Face model of graphfuse/testing/model_zoo.py (random weights, built from a
config, exported by torch.onnx; MODELS, then HELD_OUT: the Whisper encoder, Swin, Llama
decoder, MobileViT, ConvNeXt, DistilBERT and T5 encoder), in one process: ONNX nodes, graph
ops after import, graphfuse's kernels unfused and fused beside onnxruntime's node count after
its own graph optimisations (ORT_ENABLE_ALL; the optimised graph onnxruntime writes out, so
its fused nodes such as FusedConv or Attention count once), bytes moved (kernel inputs +
outputs) unfused and fused, import time, graphfuse's cold compile time beside onnxruntime's
session creation, and CPU run time of the compiled model against onnxruntime
(CPUExecutionProvider) and PyTorch eager on the same inputs: the best over rounds that
alternate between the three after a warm-up, so a shared machine's noise falls on all alike.

`--threads N` gives graphfuse's kernels N workers (CompileOptions.threads), onnxruntime N
intra-op threads (one inter-op thread) and torch N threads; the default is every core.
The ratio columns are the other runtime's time over graphfuse's: above 1, graphfuse is the
faster. The last line is the geometric mean of onnxruntime/graphfuse over the models that
ran, and its inverse (graphfuse's time as a multiple of onnxruntime's).

`--full` uses the published sizes (BERT-base, GPT-2 small, ViT-B/16, ResNet-50,
MobileNetV2, whisper-tiny's encoder, Swin-T, SmolLM-135M's decoder, mobilevit-small,
convnext-tiny-224, distilbert-base-uncased, t5-small's encoder); the default is the tiny CI
configs. A model graphfuse cannot import, build or call gets a row with the one-line reason.
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "onnxruntime", "onnx", "torch", "transformers")

import argparse
import ctypes
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects.graph import functions
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.parsing import GraphfuseError
from graphfuse.passes.analysis.kernel_stats import Summary, kernel_stats
from graphfuse.testing.measure import best_time, cold_compile
from graphfuse.testing.model_zoo import HELD_OUT, MODELS, build, export, onnxruntime_run
from graphfuse.toolchain import ToolchainError

ROOT = Path(__file__).resolve().parent.parent

ROUNDS = 6
MOST_PER_ROUND = 1000
"""Rounds are bounded by time, not count: a tiny model's 0.1 ms run gets hundreds of runs
per round, a full model's a few."""


def kernels(module: Any, fuse: bool) -> Summary:
    copy = module.clone()
    lower_to(copy, Stage.GRAPH, CompileOptions(fuse=fuse))
    return Summary.of(kernel_stats(next(functions(copy))))


def side_by_side(runs: dict[str, Callable[[], Any]], seconds: float) -> dict[str, float]:
    """Best time of each run over ROUNDS rounds that alternate between them."""
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, math.inf)
    for _ in range(ROUNDS):
        for name, run in runs.items():
            best[name] = min(best[name], best_time(run, seconds / ROUNDS, MOST_PER_ROUND))
    return best


def onnxruntime_session(path: Path, threads: int) -> tuple[Any, int, float]:
    """onnxruntime's session for the model at `path` (all graph optimisations, `threads`
    intra-op threads), the node count of the graph it optimised, and its creation time."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # not the warning that the saved graph is for this CPU
    with tempfile.TemporaryDirectory() as folder:
        optimized = Path(folder) / "optimized.onnx"
        options.optimized_model_filepath = str(optimized)
        start = time.perf_counter()
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        seconds = time.perf_counter() - start
        nodes = len(onnx.load(str(optimized), load_external_data=False).graph.node)
    return session, nodes, seconds


def measure(name: str, folder: Path, full: bool, seconds: float, threads: int) -> dict[str, Any]:
    import onnx
    import torch

    exported = export(name, folder, tiny=not full)
    nodes = len(onnx.load(str(exported.path), load_external_data=False).graph.node)
    start = time.perf_counter()
    module = from_onnx(exported.path)
    import_seconds = time.perf_counter() - start
    ops = sum(1 for op in module.walk() if op.name.startswith("graph."))
    unfused, fused = kernels(module, False), kernels(module, True)
    compiled, compile_seconds = cold_compile(module, CompileOptions(threads=threads))
    arrays = list(exported.inputs.values())
    expected = onnxruntime_run(exported)
    got = compiled(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    error = max(
        float(np.max(np.abs(g - e))) / max(float(np.max(np.abs(e))), 1e-30)
        for g, e in zip(got, expected, strict=True)
    )
    session, ort_nodes, session_seconds = onnxruntime_session(exported.path, threads)
    feeds = dict(exported.inputs)
    torch.manual_seed(0)
    model, torch_inputs = build(name, not full)
    model.eval()

    def eager() -> None:
        with torch.no_grad():
            model(**torch_inputs)

    times = side_by_side(
        {
            "graphfuse": lambda: compiled(*arrays),
            "onnxruntime": lambda: session.run(None, feeds),
            "torch": eager,
        },
        seconds,
    )
    return {
        "name": name,
        "nodes": nodes,
        "ops": ops,
        "kernels": (unfused.kernels, fused.kernels),
        "ort_nodes": ort_nodes,
        "mb": (
            (unfused.bytes_read + unfused.bytes_written) / 1e6,
            (fused.bytes_read + fused.bytes_written) / 1e6,
        ),
        "import": import_seconds,
        "compile": compile_seconds,
        "session": session_seconds,
        "error": error,
        **times,
    }


HEADER = (
    f"{'model':14} {'nodes':>6} {'ops':>5} {'gf kernels':>10} {'ort':>5} {'MB moved':>15} "
    f"{'import':>7} {'compile':>8} {'ort init':>8} {'rel.err':>8} {'graphfuse':>10} "
    f"{'ort':>9} {'torch':>9} {'ort/gf':>6} {'torch/gf':>8}"
)


def row(r: dict[str, Any]) -> str:
    return (
        f"{r['name']:14} {r['nodes']:6d} {r['ops']:5d} "
        f"{r['kernels'][0]:5d}->{r['kernels'][1]:<4d} {r['ort_nodes']:5d} "
        f"{r['mb'][0]:7.1f}->{r['mb'][1]:<7.1f} {r['import']:6.2f}s "
        f"{r['compile']:7.1f}s {r['session']:7.2f}s {r['error']:8.1e} "
        f"{r['graphfuse'] * 1e3:8.2f}ms {r['onnxruntime'] * 1e3:7.2f}ms "
        f"{r['torch'] * 1e3:7.2f}ms {r['onnxruntime'] / r['graphfuse']:6.2f} "
        f"{r['torch'] / r['graphfuse']:8.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="published model sizes")
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing budget per runtime")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="graphfuse's, onnxruntime's intra-op and torch's threads (default: every core)",
    )
    args = parser.parse_args()
    names = args.only or [*MODELS, *HELD_OUT]
    unknown = [n for n in names if n not in MODELS and n not in HELD_OUT]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; known: {', '.join([*MODELS, *HELD_OUT])}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    import torch

    torch.set_num_threads(args.threads)
    print(f"threads: {args.threads}; ratios: the other runtime's time / graphfuse's")
    print(HEADER)
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            try:
                r = measure(name, Path(folder), args.full, args.seconds, args.threads)
            except (GraphfuseError, ToolchainError, ctypes.ArgumentError) as error:
                # ArgumentError: ctypes calls take at most 1024 arguments, and the compiled
                # entry takes one per input, result and scratch buffer.
                print(f"{name:14} failed: {str(error).splitlines()[0]}", flush=True)
                continue
            ratios.append(r["onnxruntime"] / r["graphfuse"])
            print(row(r), flush=True)
    if ratios:
        mean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(
            f"geometric mean of ort/gf over {len(ratios)} models: {mean:.2f} "
            f"(graphfuse at {1 / mean:.2f}x onnxruntime's time)"
        )


if __name__ == "__main__":
    main()
