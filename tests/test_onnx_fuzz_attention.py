"""The ONNX fuzzer's attention recipes, its settings (threads, vector widths, the text
stage) and the text stage itself: plain xdsl-opt on what `graphfuse import` writes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphfuse.parsing import GraphfuseError
from graphfuse.runtime.cpu_tools import LANES_VARIABLE
from graphfuse.testing.fuzz import onnx_text
from graphfuse.testing.fuzz.onnx_attention import attention_by_hand, attention_op
from graphfuse.testing.fuzz.onnx_fuzz import Fuzzer
from graphfuse.testing.fuzz.onnx_graphs import (
    Case,
    GraphBuilder,
    choose_outputs,
    is_valid,
    onnxruntime_outputs,
    to_model,
)
from graphfuse.testing.fuzz.onnx_oracle import Setting, Verdict, Worker, evaluate, lanes_variable

Recipe = Callable[[GraphBuilder], None]


def _built(recipe: Recipe, count: int, opset: int = 23) -> list[GraphBuilder]:
    builders: list[GraphBuilder] = []
    for seed in range(count):
        b = GraphBuilder(np.random.default_rng(seed), opset)
        recipe(b)
        if b.nodes:
            builders.append(b)
    return builders


def _attr(node: Any, name: str) -> Any:
    found = [a for a in node.attribute if a.name == name]
    return helper.get_attribute_value(found[0]) if found else None


def _mask_features(b: GraphBuilder, node: Any) -> set[str]:
    if len(node.input) < 4 or not node.input[3]:
        return set()
    mask = node.input[3]
    data = b.initializers.get(mask)
    typed = data if data is not None else b.feeds[mask]
    kind = "bool" if typed.dtype == np.bool_ else "float"
    return {f"{kind} mask", f"{typed.ndim}-D mask"}


def _attention_features(b: GraphBuilder) -> set[str]:
    found: set[str] = set()
    for node in (n for n in b.nodes if n.op_type == "Attention"):
        q_heads, kv_heads = _attr(node, "q_num_heads"), _attr(node, "kv_num_heads")
        shape = next(t.shape for t in b.values if t.name == node.input[0])
        found |= {f"{len(shape)}-D"}
        found |= {"grouped-query"} if q_heads and kv_heads and 1 < kv_heads < q_heads else set()
        found |= {"multi-query"} if kv_heads == 1 and (q_heads or 0) > 1 else set()
        found |= {name for name in ("is_causal", "softcap", "scale") if _attr(node, name)}
        found |= {"past"} if len(node.input) > 4 else set()
        found |= {"qk output"} if len(node.output) == 4 else set()
        found |= _mask_features(b, node)
    return found


def test_attention_op_covers_its_forms() -> None:
    found: set[str] = set()
    for b in _built(attention_op, 300):
        found |= _attention_features(b)
    wanted = {
        "3-D", "4-D", "grouped-query", "multi-query", "is_causal", "softcap", "scale", "past",
        "qk output", "bool mask", "float mask", "2-D mask", "3-D mask", "4-D mask",
    }  # fmt: skip
    assert wanted <= found, f"never generated: {sorted(wanted - found)}"


def test_attention_op_needs_opset_23() -> None:
    assert not _built(attention_op, 20, opset=20)


def test_attention_by_hand_covers_its_pieces() -> None:
    ops: set[str] = set()
    for b in _built(attention_by_hand, 100, opset=18):
        ops |= {n.op_type for n in b.nodes}
    assert {"Reshape", "Transpose", "Unsqueeze", "Expand", "MatMul", "Softmax"} <= ops
    assert {"Where", "Add", "Tanh", "Div", "Mul"} <= ops


def test_attention_models_run_in_onnxruntime() -> None:
    """Most recipes' models are valid as built: masks keep to the shapes onnxruntime
    runs, so few are generated again."""
    builders = _built(attention_op, 16) + _built(attention_by_hand, 16)
    valid = [is_valid(to_model(b, choose_outputs(b)), b.feeds) for b in builders]
    assert sum(valid) >= 0.9 * len(valid)


def test_setting_meets_every_width_with_every_thread_count(tmp_path: Path) -> None:
    fuzzer = Fuzzer(tmp_path, Worker(), threads=(1, 2), lanes=(8, 16), text_every=4)
    settings = [fuzzer.setting_for(seed) for seed in range(8)]
    assert {(s.threads, s.lanes) for s in settings} == {(1, 8), (2, 8), (1, 16), (2, 16)}
    assert [s.text for s in settings] == [True, False, False, False] * 2


def test_lanes_variable_is_set_for_the_build_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LANES_VARIABLE, "16")
    with lanes_variable(8):
        assert os.environ[LANES_VARIABLE] == "8"
    with lanes_variable(None):
        assert LANES_VARIABLE not in os.environ
    assert os.environ[LANES_VARIABLE] == "16"


def _matmul_model(weights: np.ndarray[Any, Any], extra: list[Any] | None = None) -> Case:
    """y = relu(x @ w) (then `extra` nodes reading y as 'y0'), w an initializer."""
    rows, columns = weights.shape
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, rows])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y0"])]
    nodes += extra or []
    last = nodes[-1].output[0]
    y = helper.make_tensor_value_info(last, TensorProto.FLOAT, [3, columns])
    graph = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    feeds = {"x": np.random.default_rng(0).standard_normal((3, rows)).astype(np.float32)}
    return Case(model, feeds)


def test_text_stage_reads_weights_from_the_side_file(tmp_path: Path) -> None:
    """Weights over the text limit reach plain xdsl-opt and the parser as a
    dense_resource handle in model.safetensors, and give onnxruntime's numbers."""
    weights = np.random.default_rng(1).standard_normal((48, 40)).astype(np.float32)
    case = _matmul_model(weights)
    written = onnx_text.import_command(case.model, tmp_path)
    assert "dense_resource" in written.read_text()
    assert (tmp_path / "model.safetensors").exists()
    fused = onnx_text.xdsl_opt_fuse(written)
    assert "graph.fused" in fused.read_text()
    assert evaluate(case, Setting(text=True)).verdict is Verdict.OK


def test_text_stage_failure_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "model.mlir"
    broken.write_text("func.func @main() {\n")
    with pytest.raises(GraphfuseError, match="xdsl-opt -p graph-fuse failed: .*"):
        onnx_text.xdsl_opt_fuse(broken)


def test_text_keeps_negative_infinity() -> None:
    """exp(min(x @ w, [-inf, 0, ...])): the fused text and the text stage must keep the
    -inf constant (the Attention body's masked score), not 4.29e9."""
    weights = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    low = np.array([-np.inf, 0.0, 0.0, 0.0], np.float32)
    extra = [
        helper.make_node("Constant", [], ["low"], value=numpy_helper.from_array(low)),
        helper.make_node("Min", ["y0", "low"], ["clipped"]),
        helper.make_node("Exp", ["clipped"], ["y"]),
    ]
    case = _matmul_model(weights, extra)
    assert onnxruntime_outputs(case.model, case.feeds)[0][:, 0].tolist() == [0.0] * 3
    onnx.checker.check_model(case.model, full_check=True)
    assert evaluate(case, Setting(text=True)).verdict is Verdict.OK
