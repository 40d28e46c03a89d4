"""Bad ONNX input ends in one line naming the problem, exit status 1 and no output file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from graphfuse.cli import main
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from tests.frontend.onnx_models import model

F = TensorProto.FLOAT
node = helper.make_node


def _cli_fails(capsys: pytest.CaptureFixture[str], argv: list[str], output: Path) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("graphfuse: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not output.exists()
    return err


def test_every_unsupported_op_is_listed_with_its_nodes() -> None:
    x = np.zeros((2, 3), np.float32)
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("HardSwish", ["r"], ["h1"], name="hs1"),
        node("Softplus", ["h1"], ["s"], name="sp"),
        node("HardSwish", ["x"], ["h2"], name="hs2"),
        node("Add", ["s", "h2"], ["y"]),
    ]
    built = model(nodes, {"x": x}, {"y": (F, [2, 3])})
    with pytest.raises(ImportFailure) as info:
        from_onnx(built)
    message = str(info.value)
    assert "HardSwish (hs1, hs2)" in message
    # Softplus reads an unsupported op's output; it is reported too, as its own gap.
    assert "Softplus (sp)" in message
    assert message.startswith("unsupported ONNX ops") and "\n" not in message


def test_dynamic_dimension_is_named_and_can_be_bound(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("y", F, ["batch", 4])],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ImportFailure, match=r"input 'x' has a dynamic dimension #0 \('batch'\); "
                       r"bind it with --input-shape x=Nx4"):
        from_onnx(built)
    module = from_onnx(built, {"x": [3, 4]})
    assert "tensor<3x4xf32>" in str(module)
    with pytest.raises(ImportFailure, match="does not fit the declared shape"):
        from_onnx(built, {"x": [3, 5]})
    with pytest.raises(ImportFailure, match="'z', which is not a model input"):
        from_onnx(built, {"z": [3, 4]})


def test_shapes_that_disagree_name_the_node() -> None:
    x, y = np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)
    built = model([node("Add", ["x", "y"], ["z"], name="bad_add")], {"x": x, "y": y},
                  {"z": (F, [2, 3])}, check=False)
    with pytest.raises(ImportFailure, match=r"node bad_add \(Add\):"):
        from_onnx(built)


def test_declared_output_shape_is_checked() -> None:
    x = np.zeros((2, 3), np.float32)
    built = model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, [3, 2])}, check=False)
    with pytest.raises(ImportFailure, match="comes out 2x3, but the model declares 3x2"):
        from_onnx(built)


def test_old_opset_is_refused() -> None:
    x = np.zeros((2, 3), np.float32)
    built = model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 3])}, opset=11, check=False)
    with pytest.raises(ImportFailure, match="opset 11; graphfuse reads opset 13 and later"):
        from_onnx(built)


def test_cli_truncated_and_non_onnx_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.zeros((2, 3), np.float32)
    good = model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 3])})
    data = good.SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out.mlir"
    err = _cli_fails(capsys, ["import", str(truncated), "-o", str(out)], out)
    assert "truncated.onnx: not" in err
    text = tmp_path / "text.onnx"
    text.write_text("func.func @main() {}\n")
    _cli_fails(capsys, ["import", str(text), "-o", str(out)], out)
    _cli_fails(capsys, ["import", str(tmp_path / "missing.onnx"), "-o", str(out)], out)
    lib = tmp_path / "lib.so"
    _cli_fails(capsys, ["compile", str(truncated), "-o", str(lib)], lib)


def test_cli_import_writes_a_module_that_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.zeros((2, 3), np.float32)
    built = model([node("Sigmoid", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 3])})
    path = tmp_path / "m.onnx"
    onnx.save(built, str(path))
    out = tmp_path / "m.mlir"
    assert main(["import", str(path), "-o", str(out)]) == 0
    assert "graph.sigmoid" in out.read_text()
    assert main(["run", str(path), "--check", "--reference"]) == 0
    assert main(["stats", str(out), "--input-shape", "x=2x3"]) == 1
    assert "--input-shape applies to .onnx models only" in capsys.readouterr().err
