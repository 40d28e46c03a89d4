"""Benchmark: real networks imported from ONNX, against onnxruntime and PyTorch eager.

Run: `.venv/bin/python bench/bench_models.py [--full] [--only NAME ...] [--seconds S]`.

For each Hugging Face model of graphfuse/testing/model_zoo.py (random weights, built from a
config, exported by torch.onnx; MODELS, then the held-out Whisper encoder, Swin and Llama
decoder), in one process: ONNX nodes, graph ops after import, kernels and bytes moved (kernel
inputs + outputs) unfused and fused, import and cold compile time, and CPU run time of the
compiled model against onnxruntime (CPUExecutionProvider) and PyTorch eager on the same
inputs, best of repeated runs. Default threads everywhere.
`--full` uses the published sizes (BERT-base, GPT-2 small, ViT-B/16, ResNet-50,
MobileNetV2, whisper-tiny's encoder, Swin-T, SmolLM-135M's decoder); the default is the tiny
CI configs. A model graphfuse cannot import, build or call gets a row with the one-line
reason.
"""

from __future__ import annotations

import argparse
import ctypes
import tempfile
import time
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


def kernels(module: Any, fuse: bool) -> Summary:
    copy = module.clone()
    lower_to(copy, Stage.GRAPH, CompileOptions(fuse=fuse))
    return Summary.of(kernel_stats(next(functions(copy))))


def measure(name: str, folder: Path, full: bool, seconds: float) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort
    import torch

    exported = export(name, folder, tiny=not full)
    nodes = len(onnx.load(str(exported.path), load_external_data=False).graph.node)
    start = time.perf_counter()
    module = from_onnx(exported.path)
    import_seconds = time.perf_counter() - start
    ops = sum(1 for op in module.walk() if op.name.startswith("graph."))
    unfused, fused = kernels(module, False), kernels(module, True)
    compiled, compile_seconds = cold_compile(module)
    arrays = list(exported.inputs.values())
    expected = onnxruntime_run(exported)
    got = compiled(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    error = max(
        float(np.max(np.abs(g - e))) / max(float(np.max(np.abs(e))), 1e-30)
        for g, e in zip(got, expected, strict=True)
    )
    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    feeds = dict(exported.inputs)
    torch.manual_seed(0)
    model, torch_inputs = build(name, not full)
    model.eval()

    def eager() -> None:
        with torch.no_grad():
            model(**torch_inputs)

    return {
        "name": name,
        "nodes": nodes,
        "ops": ops,
        "kernels": (unfused.kernels, fused.kernels),
        "mb": (
            (unfused.bytes_read + unfused.bytes_written) / 1e6,
            (fused.bytes_read + fused.bytes_written) / 1e6,
        ),
        "import": import_seconds,
        "compile": compile_seconds,
        "error": error,
        "graphfuse": best_time(lambda: compiled(*arrays), seconds),
        "onnxruntime": best_time(lambda: session.run(None, feeds), seconds),
        "torch": best_time(eager, seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="published model sizes")
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing budget per runtime")
    args = parser.parse_args()
    header = (
        f"{'model':14} {'nodes':>6} {'ops':>5} {'kernels':>9} {'MB moved':>15} {'import':>7} "
        f"{'compile':>8} {'rel.err':>8} {'graphfuse':>10} {'ort':>9} {'torch':>9} "
        f"{'ort/gf':>6} {'torch/gf':>8}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.only or [*MODELS, *HELD_OUT]:
            try:
                r = measure(name, Path(folder), args.full, args.seconds)
            except (GraphfuseError, ToolchainError, ctypes.ArgumentError) as error:
                # ArgumentError: ctypes calls take at most 1024 arguments, and the compiled
                # entry takes one per input, result and scratch buffer.
                print(f"{name:14} failed: {str(error).splitlines()[0]}", flush=True)
                continue
            print(
                f"{r['name']:14} {r['nodes']:6d} {r['ops']:5d} "
                f"{r['kernels'][0]:4d}->{r['kernels'][1]:<4d} "
                f"{r['mb'][0]:7.1f}->{r['mb'][1]:<7.1f} {r['import']:6.2f}s "
                f"{r['compile']:7.1f}s {r['error']:8.1e} {r['graphfuse'] * 1e3:8.2f}ms "
                f"{r['onnxruntime'] * 1e3:7.2f}ms {r['torch'] * 1e3:7.2f}ms "
                f"{r['onnxruntime'] / r['graphfuse']:6.2f} {r['torch'] / r['graphfuse']:8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
