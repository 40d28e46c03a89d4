"""Benchmark: ONNX's LLM ops (opset 23) against the same graph written by hand.

Run: `.venv/bin/python bench/bench_llm_ops.py [--seconds S] [--only NAME ...]`.

The importer opens Attention, RMSNormalization and RotaryEmbedding into ONNX's own function
bodies, so their primitives fuse with each other. Issue 24 asks that the fused kernels be at
least as fast as the same computation written out by hand with primitive ONNX ops (as
exporters emit it). For each op, in one process: the op model and the hand-written model
are compiled by graphfuse and timed side by side (best of repeated runs after a warm-up),
with onnxruntime on the hand-written model as a third column; results are checked against
each other first. `op/hand` at or below 1.0 meets the target.
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "onnxruntime", "onnx")

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import graphfuse
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.measure import best_time
from graphfuse.testing.onnx_models import model

F = TensorProto.FLOAT
node = helper.make_node
Pair = tuple[Any, Any, dict[str, np.ndarray]]


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def rms_norm(batch: int = 8, seq: int = 128, hidden: int = 1024) -> Pair:
    x, scale = _rand(batch, seq, hidden), _rand(hidden, seed=1)
    out = {"y": (F, [batch, seq, hidden])}
    op = model(
        [node("RMSNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-6)],
        {"x": x},
        out,
        {"scale": scale},
        opset=23,
    )
    hand = model(
        [
            node("Mul", ["x", "x"], ["sq"]),
            node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
            node("Add", ["ms", "eps"], ["shifted"]),
            node("Sqrt", ["shifted"], ["rms"]),
            node("Div", ["x", "rms"], ["normed"]),
            node("Mul", ["normed", "scale"], ["y"]),
        ],
        {"x": x},
        out,
        {"scale": scale, "axes": np.array([-1], np.int64), "eps": np.array(1e-6, np.float32)},
    )
    return op, hand, {"x": x}


def attention(
    batch: int = 2, heads: int = 8, kv_heads: int = 2, seq: int = 128, size: int = 64
) -> Pair:
    """Causal grouped-query attention; the hand-written graph repeats each key/value head
    for its query heads (Expand + Reshape), as Llama exports do."""
    q = _rand(batch, heads, seq, size)
    k, v = _rand(batch, kv_heads, seq, size, seed=1), _rand(batch, kv_heads, seq, size, seed=2)
    scale = 1.0 / np.sqrt(size)
    out = {"y": (F, [batch, heads, seq, size])}
    op = model(
        [node("Attention", ["q", "k", "v"], ["y"], is_causal=1, scale=float(scale))],
        {"q": q, "k": k, "v": v},
        out,
        opset=23,
    )
    group = heads // kv_heads
    mask = np.triu(np.full((seq, seq), -np.inf, np.float32), k=1)
    expanded = np.array([batch, kv_heads, group, seq, size], np.int64)
    merged = np.array([batch, heads, seq, size], np.int64)
    nodes = []
    for name in ("k", "v"):
        nodes += [
            node("Unsqueeze", [name, "two"], [f"{name}5"]),
            node("Expand", [f"{name}5", "expanded"], [f"{name}e"]),
            node("Reshape", [f"{name}e", "merged"], [f"{name}r"]),
        ]
    nodes += [
        node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
        node("MatMul", ["q", "kt"], ["scores"]),
        node("Mul", ["scores", "scale"], ["scaled"]),
        node("Add", ["scaled", "mask"], ["masked"]),
        node("Softmax", ["masked"], ["p"], axis=-1),
        node("MatMul", ["p", "vr"], ["y"]),
    ]
    inits = {
        "two": np.array([2], np.int64),
        "expanded": expanded,
        "merged": merged,
        "scale": np.array(scale, np.float32),
        "mask": mask,
    }
    hand = model(nodes, {"q": q, "k": k, "v": v}, out, inits)
    return op, hand, {"q": q, "k": k, "v": v}


def rotary(batch: int = 2, heads: int = 8, seq: int = 128, size: int = 64) -> Pair:
    """Rotary embedding, non-interleaved, positions 0..seq-1."""
    x = _rand(batch, heads, seq, size)
    angles = np.arange(seq)[:, None] * (1e-4 ** (np.arange(size // 2) / (size // 2)))[None]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    positions = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
    out = {"y": (F, [batch, heads, seq, size])}
    op = model(
        [node("RotaryEmbedding", ["x", "cos", "sin", "positions"], ["y"])],
        {"x": x},
        out,
        {"cos": cos, "sin": sin, "positions": positions},
        opset=23,
    )
    half = size // 2
    hand = model(
        [
            node("Split", ["x", "halves"], ["x1", "x2"], axis=-1),
            node("Mul", ["x1", "cos"], ["a"]),
            node("Mul", ["x2", "sin"], ["b"]),
            node("Sub", ["a", "b"], ["y1"]),
            node("Mul", ["x2", "cos"], ["c"]),
            node("Mul", ["x1", "sin"], ["d"]),
            node("Add", ["c", "d"], ["y2"]),
            node("Concat", ["y1", "y2"], ["y"], axis=-1),
        ],
        {"x": x},
        out,
        {"cos": cos, "sin": sin, "halves": np.array([half, half], np.int64)},
    )
    return op, hand, {"x": x}


WORKLOADS: dict[str, Callable[[], Pair]] = {
    "rms_norm": rms_norm,
    "attention_gqa_causal": attention,
    "rotary_embedding": rotary,
}


def measure(name: str, seconds: float) -> dict[str, Any]:
    op, hand, inputs = WORKLOADS[name]()
    arrays = list(inputs.values())
    compiled_op = graphfuse.compile(from_onnx(op))
    compiled_hand = graphfuse.compile(from_onnx(hand))
    expected = compiled_hand(*arrays)
    np.testing.assert_allclose(compiled_op(*arrays), expected, rtol=1e-4, atol=1e-4)
    session = ort.InferenceSession(hand.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, inputs)[0], expected, rtol=1e-4, atol=1e-4)
    t_op = best_time(lambda: compiled_op(*arrays), seconds)
    t_hand = best_time(lambda: compiled_hand(*arrays), seconds)
    t_ort = best_time(lambda: session.run(None, inputs), seconds)
    return {
        "name": name,
        "kernels": (compiled_op.kernel_count, compiled_hand.kernel_count),
        "op": t_op,
        "hand": t_hand,
        "ort": t_ort,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing budget per column")
    parser.add_argument("--only", nargs="*", choices=list(WORKLOADS))
    args = parser.parse_args()
    print(
        f"{'workload':22} {'kernels op/hand':>15} {'op ms':>9} {'hand ms':>9} "
        f"{'ORT hand ms':>11} {'op/hand':>8}"
    )
    for name in args.only or list(WORKLOADS):
        row = measure(name, args.seconds)
        kernels = f"{row['kernels'][0]}/{row['kernels'][1]}"
        print(
            f"{name:22} {kernels:>15} {row['op'] * 1e3:9.3f} {row['hand'] * 1e3:9.3f} "
            f"{row['ort'] * 1e3:11.3f} {row['op'] / row['hand']:8.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
