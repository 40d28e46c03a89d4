"""loop-plan-scratch: scratch buffers live at different times share bytes, those live at
the same time never do, packed constant operands (kept between calls) share nothing, and
compiled models still match NumPy on every call, through both runtimes (the in-process
descriptor call and a library's C interface)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.lowering.cpu.plan_scratch import LiveRange, plan_offsets
from graphfuse.runtime.compiled import CompiledFunction


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("seed", range(20))
def test_live_buffers_never_share_bytes(seed: int) -> None:
    rng = random.Random(seed)
    ranges: list[LiveRange] = []
    for _ in range(rng.randint(1, 60)):
        if rng.random() < 0.1:
            ranges.append(LiveRange(rng.randint(1, 5000), -1, 1 << 62))  # persistent
        elif rng.random() < 0.05:
            ranges.append(LiveRange(rng.randint(1, 5000), 0, -1))  # never used
        else:
            first = rng.randint(0, 40)
            ranges.append(LiveRange(rng.randint(0, 5000), first, first + rng.randint(0, 8)))
    offsets = plan_offsets(ranges)
    assert all(o % 64 == 0 for o in offsets)
    spans = [(o, o + r.bytes) for o, r in zip(offsets, ranges, strict=True)]
    for i, a in enumerate(ranges):
        for j in range(i):
            b = ranges[j]
            live_together = a.used and b.used and a.first <= b.last and b.first <= a.last
            if live_together and a.bytes and b.bytes:
                assert not _overlap(spans[i], spans[j]), (a, b, spans[i], spans[j])
    used = [s for s, r in zip(spans, ranges, strict=True) if r.used]
    aligned = sum(-(-r.bytes // 64) * 64 for r in ranges if r.used)
    assert max((end for _, end in used), default=0) <= aligned


def test_a_chain_reuses_memory() -> None:
    """Five buffers of a chain, each live over two calls: two slots suffice."""
    ranges = [LiveRange(4096, n, n + 1) for n in range(5)]
    offsets = plan_offsets(ranges)
    assert sorted(set(offsets)) == [0, 4096]
    assert offsets[0] != offsets[1] and offsets[0] == offsets[2]


def _chain_model(path: Path, size: int, depth: int) -> list[np.ndarray]:
    """x @ W0 -> relu -> @ W1 -> tanh -> ... with the weights as initializers (constant:
    loop-tile-matmul packs them on the first call only)."""
    rng = np.random.default_rng(0)
    weights = [
        (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32) for _ in range(depth)
    ]
    nodes, previous = [], "x"
    for n in range(depth):
        nodes.append(oh.make_node("MatMul", [previous, f"w{n}"], [f"m{n}"]))
        nodes.append(oh.make_node("Relu" if n % 2 else "Tanh", [f"m{n}"], [f"a{n}"]))
        previous = f"a{n}"
    graph = oh.make_graph(
        nodes,
        "chain",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
        [oh.make_tensor_value_info(previous, TensorProto.FLOAT, [size, size])],
        [numpy_helper.from_array(w, f"w{n}") for n, w in enumerate(weights)],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return weights


def _reference(x: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    y = x.astype(np.float64)
    for n, w in enumerate(weights):
        y = y @ w
        y = np.maximum(y, 0) if n % 2 else np.tanh(y)
    return y


@pytest.mark.parametrize("written", [False, True], ids=["in-process", "c-interface"])
def test_models_match_numpy_on_every_call(tmp_path: Path, written: bool) -> None:
    path = tmp_path / "chain.onnx"
    weights = _chain_model(path, 96, 6)
    output = tmp_path / "libchain.so" if written else None
    compiled = graphfuse.compile(path, options=CompileOptions(threads=2), output=output)
    assert isinstance(compiled, CompiledFunction)
    offsets = compiled.scratch_offsets
    assert offsets is not None and len(offsets) == len(compiled.scratch)
    assert len(set(offsets)) < len(offsets), "some scratch buffers share bytes"
    rng = np.random.default_rng(1)
    for _ in range(3):  # packed weights survive the later kernels' use of shared bytes
        x = rng.standard_normal((96, 96)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), _reference(x, weights), rtol=1e-4, atol=1e-5)
