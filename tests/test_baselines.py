"""The baselines of bench/bench_cpu.py compute what graphfuse computes: every benchmark
workload (at a small size) translated to JAX and to ONNX gives the reference interpreter's
results, and every tiny real model translated to JAX (after import) gives onnxruntime's.
A ratio against a baseline that computes something else would mean nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphfuse.dialects.graph import functions
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.parsing import parse_text
from graphfuse.testing import workloads
from graphfuse.testing.model_zoo import MODELS, export, onnxruntime_run
from graphfuse.testing.to_jax import to_jax
from graphfuse.testing.to_onnx import to_onnx

ROOT = Path(__file__).resolve().parent.parent

SMALL: dict[str, dict[str, int]] = {
    "elementwise_chain": {"n": 8, "m": 16},
    "softmax": {"n": 8, "m": 16},
    "layernorm": {"n": 8, "m": 16},
    "mlp": {"tokens": 8, "width": 16, "hidden": 32},
    "conv_bn_relu": {"batch": 2, "channels": 4, "size": 9},
    "grouped_conv_bn_relu": {"batch": 2, "channels": 8, "size": 9},
    "depthwise_conv_bn_relu": {"batch": 2, "channels": 4, "size": 9},
    "resnet_block": {"batch": 2, "channels": 4, "size": 9},
    "attention": {"batch": 2, "heads": 2, "seq": 8, "dim": 4},
    "bert_layer": {"batch": 2, "seq": 8, "width": 16, "heads": 2},
}


def test_every_workload_has_a_small_size() -> None:
    makers = {make.__name__ for make, _ in workloads.WORKLOADS.values()}
    assert makers == set(SMALL)


def _close(got: Any, expected: Any, what: str) -> None:
    assert len(got) == len(expected), what
    for g, e in zip(got, expected, strict=True):
        scale = float(np.max(np.abs(e)))
        assert scale > 0, what
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-5 * scale, err_msg=what)


@pytest.mark.parametrize("maker", sorted(SMALL))
def test_workload_translations_match_the_reference(maker: str) -> None:
    import onnxruntime as ort

    module = parse_text(getattr(workloads, maker)(**SMALL[maker]), maker)
    function = next(functions(module))
    # Positive inputs: batch-norm variances must be.
    rng = np.random.default_rng(0)
    inputs = [
        rng.uniform(0.1, 1.0, a.type.get_shape()).astype(np.float32)  # type: ignore[attr-defined]
        for a in function.body.block.args
    ]
    expected = reference.run(module, "main", *inputs)
    _close(to_jax(function)(*inputs), expected, f"{maker} via JAX")
    session = ort.InferenceSession(
        to_onnx(function).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs, strict=True)}
    _close(session.run(None, feeds), expected, f"{maker} via ONNX")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_imported_model_via_jax_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    exported = export(name, tmp_path)
    function = next(functions(from_onnx(exported.path)))
    got = to_jax(function)(*exported.inputs.values())
    _close(got, onnxruntime_run(exported), f"{name} via JAX")


def test_an_op_without_translation_is_named() -> None:
    text = """func.func @main(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = graph.sort %x axis = 1 : tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}
"""
    function = next(functions(parse_text(text, "sort")))
    with pytest.raises(NotImplementedError, match="graph.sort"):
        to_onnx(function)
    with pytest.raises(NotImplementedError, match="graph.sort"):
        to_jax(function)
