"""Bad ONNX input ends in one line naming the problem, exit status 1 and no output file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.cli import main
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx, parse_input_shapes
from graphfuse.testing.onnx_models import model

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
        node("Frobnicate", ["r"], ["h1"], name="f1"),
        node("Twiddle", ["h1"], ["s"], name="tw"),
        node("Frobnicate", ["x"], ["h2"], name="f2"),
        node("Add", ["s", "h2"], ["y"]),
    ]
    built = model(nodes, {"x": x}, {"y": (F, [2, 3])}, check=False)
    with pytest.raises(ImportFailure) as info:
        from_onnx(built)
    message = str(info.value)
    assert "Frobnicate (f1, f2)" in message
    # Twiddle reads an unsupported op's output; it is reported too, as its own gap.
    assert "Twiddle (tw)" in message
    assert message.startswith("unsupported ONNX ops") and "\n" not in message


def test_dynamic_dimension_is_named_and_can_be_bound(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("y", F, ["batch", 4])],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(
        ImportFailure,
        match=r"input 'x' has a dynamic dimension #0 \('batch'\); "
        r"bind it with --input-shape x=Nx4",
    ):
        from_onnx(built)
    module = from_onnx(built, {"x": [3, 4]})
    assert "tensor<3x4xf32>" in str(module)
    with pytest.raises(ImportFailure, match="does not fit the declared shape"):
        from_onnx(built, {"x": [3, 5]})
    with pytest.raises(ImportFailure, match="'z', which is not a model input"):
        from_onnx(built, {"z": [3, 4]})


def test_shapes_that_disagree_name_the_node() -> None:
    x, y = np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)
    built = model(
        [node("Add", ["x", "y"], ["z"], name="bad_add")],
        {"x": x, "y": y},
        {"z": (F, [2, 3])},
        check=False,
    )
    with pytest.raises(ImportFailure, match=r"node bad_add \(Add\):"):
        from_onnx(built)


def test_declared_output_shape_is_checked() -> None:
    x = np.zeros((2, 3), np.float32)
    built = model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, [3, 2])}, check=False)
    with pytest.raises(ImportFailure, match="comes out 2x3, but the model declares 3x2"):
        from_onnx(built)


def test_old_opsets_are_converted() -> None:
    """An opset-11 model is brought to opset 13 by onnx.version_converter; one the
    converter cannot convert is refused in one line that says what to do."""
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    built = model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 3])}, opset=11)
    np.testing.assert_array_equal(graphfuse.compile(from_onnx(built))(x), np.maximum(x, 0))
    unknown = model(
        [node("NotAnOp", ["x"], ["y"])], {"x": x}, {"y": (F, [2, 3])}, opset=9, check=False
    )
    with pytest.raises(
        ImportFailure, match="uses opset 9 and onnx.version_converter cannot"
    ) as info:
        from_onnx(unknown)
    assert "re-export it with opset 13 or later" in str(info.value)
    assert "\n" not in str(info.value)


def test_cli_truncated_and_non_onnx_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_cli_import_writes_a_module_that_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def _every_command_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path, *extra: str
) -> str:
    """`graphfuse import` and `graphfuse compile` both refuse the model in one line."""
    out, lib = tmp_path / "out.mlir", tmp_path / "out.so"
    err = _cli_fails(capsys, ["import", str(path), "-o", str(out), *extra], out)
    assert _cli_fails(capsys, ["compile", str(path), "-o", str(lib), *extra], lib) == err
    return err


def _relu_model(x: np.ndarray | None = None) -> onnx.ModelProto:
    x = np.zeros((2, 3), np.float32) if x is None else x
    return model([node("Relu", ["x"], ["y"])], {"x": x}, {"y": (F, list(x.shape))})


def test_missing_external_data_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x, w = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    built = model([node("Add", ["x", "w"], ["y"])], {"x": x}, {"y": (F, [2, 3])}, {"w": w})
    path = tmp_path / "big.onnx"
    onnx.save(built, str(path), save_as_external_data=True, location="big.data", size_threshold=0)
    (tmp_path / "big.data").unlink()
    err = _every_command_fails(capsys, tmp_path, path)
    assert "big.onnx: external data file 'big.data' of tensor 'w' is missing" in err


def test_tensor_written_twice_names_both_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.zeros((2, 3), np.float32)
    nodes = [node("Relu", ["x"], ["y"], name="first"), node("Neg", ["x"], ["y"], name="second")]
    path = tmp_path / "twice.onnx"
    onnx.save(model(nodes, {"x": x}, {"y": (F, [2, 3])}, check=False), str(path))
    err = _every_command_fails(capsys, tmp_path, path)
    assert "tensor 'y' is written by both node first (Relu) and node second (Neg)" in err
    overwrite = model([node("Relu", ["x"], ["x"])], {"x": x}, {"x": (F, [2, 3])}, check=False)
    with pytest.raises(ImportFailure, match="'x' is written by both a graph input and node Relu#0"):
        from_onnx(overwrite)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("x=-1x3", "'x=-1x3': dimension -1 must be 1 or more"),
        ("x=0x3", "'x=0x3': dimension 0 must be 1 or more"),
        ("x=ax3", "'x=ax3': dimension 'a' is not a number"),
        ("x=", "x= does not fit the declared shape ?x3"),
        ("=3", "'=3': expected NAME=D0xD1x..."),
        ("z=2x3", "names 'z', which is not a model input (inputs: x)"),
    ],
)
def test_input_shape_option_values_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, reason: str
) -> None:
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", F, ["batch", 3])],
        [helper.make_tensor_value_info("y", F, ["batch", 3])],
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    err = _every_command_fails(capsys, tmp_path, path, "--input-shape", spec)
    assert f"--input-shape {reason}" in err
    with pytest.raises(ImportFailure, match="every dimension must be 1 or more"):
        from_onnx(str(path), {"x": [0, 3]})


def test_empty_tensors_fold_to_known_values() -> None:
    """An empty tensor holds no data, so what is computed from one is known at import:
    a reduction over an empty set is its identity, an empty result an empty constant. The
    argument stays, so the function's signature is the model's."""
    empty = np.zeros((2, 0, 4), np.float32)
    reduced = model(
        [node("ReduceSum", ["x"], ["y"], keepdims=1), node("Relu", ["x"], ["z"])],
        {"x": empty},
        {"y": (F, [1, 1, 1]), "z": (F, [2, 0, 4])},
    )
    compiled = graphfuse.compile(from_onnx(reduced))
    y, z = compiled(empty)
    np.testing.assert_array_equal(y, np.zeros((1, 1, 1), np.float32))
    assert z.shape == (2, 0, 4)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    one = np.array([1], np.int64)
    sliced = model(
        [node("Slice", ["x", "one", "one"], ["y"], name="nothing")],
        {"x": x},
        {"y": (F, [0, 3])},
        {"one": one},
    )
    assert graphfuse.compile(from_onnx(sliced))(x).shape == (0, 3)


def test_from_onnx_takes_a_model_its_bytes_or_a_path(tmp_path: Path) -> None:
    built = _relu_model()
    assert "graph.relu" in str(from_onnx(built.SerializeToString()))
    with pytest.raises(ImportFailure, match="not int"):
        from_onnx(42)
    with pytest.raises(ImportFailure, match="the bytes given: not a readable ONNX model"):
        from_onnx(b"\xff\xff\xff")
    with pytest.raises(ImportFailure, match="the bytes given: not an ONNX model"):
        from_onnx(b"")
    with pytest.raises(ImportFailure, match="missing.onnx: no such file"):
        from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(ImportFailure, match="is a directory"):
        from_onnx(str(tmp_path))
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ImportFailure, match="garbage.onnx: not"):
        from_onnx(garbage)


@pytest.mark.parametrize(
    ("type_proto", "shown"),
    [
        (helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])), "optional"),
        (helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2])), "seq"),
    ],
)
def test_optional_and_sequence_inputs_are_named(type_proto: onnx.TypeProto, shown: str) -> None:
    graph = helper.make_graph(
        [node("OptionalHasElement", ["o"], ["y"])],
        "opt",
        [helper.make_value_info("o", type_proto)],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [])],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(
        ImportFailure,
        match=rf"^input 'o' has type {shown}\(tensor\(float\)\), which graphfuse does not support",
    ):
        from_onnx(built)


def test_folded_sequence_value_is_refused() -> None:
    x = np.zeros((2,), np.float32)
    nodes = [
        node("SequenceConstruct", ["c", "c"], ["seq"], name="pack"),
        node("ConcatFromSequence", ["seq"], ["cat"], axis=0),
        node("Add", ["x", "cat"], ["y"]),
    ]
    built = model(nodes, {"x": x}, {"y": (F, [2])}, {"c": np.ones(1, np.float32)}, check=False)
    with pytest.raises(ImportFailure, match=r"node pack \(SequenceConstruct\) produces a list"):
        from_onnx(built)


@pytest.mark.parametrize(
    ("element", "message"),
    [
        (TensorProto.UNDEFINED, "input 'x' declares no element type"),
        (77, "input 'x' has element type 77, which ONNX does not define"),
        (TensorProto.STRING, "input 'x': element type string is not supported"),
        (TensorProto.FLOAT8E4M3FN, "input 'x': element type float8e4m3fn is not supported"),
    ],
)
def test_input_element_type_is_checked(element: int, message: str) -> None:
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "typed",
        [helper.make_tensor_value_info("x", element, [2, 3])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ImportFailure, match=message):
        from_onnx(built)


def test_model_structure_is_checked() -> None:
    with pytest.raises(ImportFailure, match="not an ONNX model \\(no graph"):
        from_onnx(onnx.ModelProto())
    no_outputs = helper.make_model(helper.make_graph([], "empty", [], []))
    with pytest.raises(ImportFailure, match="a graph without outputs"):
        from_onnx(no_outputs)
    other_domain = _relu_model()
    del other_domain.opset_import[:]
    other_domain.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(ImportFailure, match="imports no default-domain"):
        from_onnx(other_domain)
    custom = _relu_model()
    custom.graph.node[0].domain = "com.example"
    with pytest.raises(ImportFailure, match=r"unsupported ONNX ops: com\.example\.Relu \(Relu#0\)"):
        from_onnx(custom)


def test_graph_output_that_is_a_graph_input_passes_through() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "through",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [
            helper.make_tensor_value_info("x", F, [2, 3]),
            helper.make_tensor_value_info("y", F, [2, 3]),
        ],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    import graphfuse

    got = graphfuse.compile(from_onnx(built))(x)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], x)


def test_input_shape_with_no_dimensions_binds_a_scalar(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [node("Relu", ["x"], ["y"])],
        "unshaped",
        [helper.make_tensor_value_info("x", F, None)],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model_ = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = from_onnx(model_, parse_input_shapes(["x="]))
    assert "func.func @main(%x: tensor<f32>) -> tensor<f32>" in str(module)
