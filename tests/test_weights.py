"""Weights outside the text: `graphfuse import -o` writes a module and a safetensors file,
which read back into the same module; printed stages show weights by name and shape."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from graphfuse.compiler import load
from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.dialects.graph.elements import dense_to_numpy, numpy_to_dense
from graphfuse.parsing import GraphfuseError, parse_file, parse_text
from graphfuse.testing.onnx_models import model
from graphfuse.weights import module_text, weights_file_for, write_module
from tests.conftest import graphfuse_command

HEX_OVER_4K = re.compile(r'dense<"0x[0-9A-F]{8194,}"')
BLOB_OVER_4K = re.compile(r'^ +\w+: "0x04000000[0-9A-F]{8192,}"', re.M)
"""A weight's bytes in MLIR's dialect_resources section: alignment 4, then over 4 KiB."""


def graphfuse(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return graphfuse_command(list(args), cwd)


def _mlp(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """MatMul + Add + Relu with a 64x48 weight (12 KiB: outside the text) and a small bias."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    built = model(
        [
            helper.make_node("MatMul", ["x", "dense/kernel:0"], ["h"]),
            helper.make_node("Add", ["h", "bias"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        {"x": x},
        {"y": (TensorProto.FLOAT, [4, 48])},
        {
            "dense/kernel:0": rng.standard_normal((64, 48)).astype(np.float32),
            "bias": rng.standard_normal(48).astype(np.float32),
        },
    )
    path = folder / "mlp.onnx"
    onnx.save(built, str(path))
    return path, {"x": x}


def test_import_writes_module_and_weights_that_read_back(tmp_path: Path) -> None:
    onnx_path, inputs = _mlp(tmp_path)
    run = graphfuse("import", "mlp.onnx", "-o", "mlp.mlir", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "mlp.mlir").read_text()
    assert 'graphfuse.weights = "mlp.safetensors"' in text
    # The weight by its (sanitised) ONNX name and type; no bytes in the text.
    assert "dense_resource<dense_kernel_0> : tensor<64x48xf32>" in text
    assert not HEX_OVER_4K.search(text)
    assert (tmp_path / "mlp.safetensors").stat().st_size > 64 * 48 * 4

    original = load(onnx_path)
    reread = load(tmp_path / "mlp.mlir")
    assert module_text(reread, inline=True) == module_text(original, inline=True)
    expected = reference.run(original, "main", inputs["x"])
    got = reference.run(reread, "main", inputs["x"])
    np.testing.assert_array_equal(got[0], expected[0])


def test_the_pair_compiles_from_another_folder(tmp_path: Path) -> None:
    """The weights file is found beside the module, not in the current folder."""
    _mlp(tmp_path)
    assert graphfuse("import", "mlp.onnx", "-o", "mlp.mlir", cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = graphfuse("run", "../mlp.mlir", "--check", cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    assert re.search(r"^check: .*: ok$", run.stdout, re.M), run.stdout


def test_stdout_and_inline_weights_keep_every_byte(tmp_path: Path) -> None:
    _mlp(tmp_path)
    run = graphfuse("import", "mlp.onnx", cwd=tmp_path)
    assert run.returncode == 0 and "graphfuse.weights" not in run.stdout
    assert "dense_resource<dense_kernel_0>" in run.stdout and BLOB_OVER_4K.search(run.stdout)
    assert not HEX_OVER_4K.search(run.stdout)
    run = graphfuse("import", "mlp.onnx", "-o", "one.mlir", "--inline-weights", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "one.safetensors").exists()
    assert BLOB_OVER_4K.search((tmp_path / "one.mlir").read_text())
    assert parse_file(tmp_path / "one.mlir")


def test_emit_shows_weights_by_name_and_shape(tmp_path: Path) -> None:
    _mlp(tmp_path)
    for stage in ("graph", "loop", "upstream"):
        run = graphfuse("compile", "mlp.onnx", "--emit", stage, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert re.search(r"dense_resource<\w+> : (tensor|memref)<64x48xf32>", run.stdout), stage
        assert not HEX_OVER_4K.search(run.stdout), stage
    run = graphfuse("compile", "mlp.onnx", "--emit", "upstream", "--inline-weights", cwd=tmp_path)
    assert BLOB_OVER_4K.search(run.stdout) and not HEX_OVER_4K.search(run.stdout)


def test_emit_to_a_file_writes_its_weights_beside(tmp_path: Path) -> None:
    onnx_path, inputs = _mlp(tmp_path)
    run = graphfuse("compile", "mlp.onnx", "--emit", "graph", "-o", "fused.mlir", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    fused = load(tmp_path / "fused.mlir")
    expected = reference.run(load(onnx_path), "main", inputs["x"])
    np.testing.assert_allclose(reference.run(fused, "main", inputs["x"])[0], expected[0], 1e-6)


def _constant_module(values: np.ndarray, element: object) -> ModuleOp:
    typ = TensorType(element, values.shape)  # type: ignore[arg-type]
    block = Block()
    constant = graph.ConstantOp(numpy_to_dense(values, typ))
    block.add_ops([constant, ReturnOp(constant.result)])
    function = FuncOp.from_region("main", [], [typ], Region(block))
    return ModuleOp([function])


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i1", "i64", "f16"])
def test_every_element_type_round_trips(tmp_path: Path, dtype: str) -> None:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type, IntegerType

    rng = np.random.default_rng(1)
    element, values = {
        "f32": (f32, rng.standard_normal((40, 40)).astype(np.float32)),
        "bf16": (BFloat16Type(), rng.standard_normal((64, 64)).astype(np.float32)),
        "i1": (IntegerType(1), rng.random((80, 80)) > 0.5),
        "i64": (IntegerType(64), rng.integers(-9, 9, (30, 30))),
        "f16": (Float16Type(), rng.standard_normal((64, 64)).astype(np.float16)),
    }[dtype]
    module = _constant_module(values, element)
    side = write_module(module, tmp_path / "c.mlir")
    assert side == tmp_path / "c.safetensors"
    assert "dense_resource" in (tmp_path / "c.mlir").read_text()
    back = parse_file(tmp_path / "c.mlir")
    before = next(op for op in module.walk() if isinstance(op, graph.ConstantOp)).value
    after = next(op for op in back.walk() if isinstance(op, graph.ConstantOp)).value
    assert after.data.data == before.data.data
    np.testing.assert_array_equal(dense_to_numpy(after), dense_to_numpy(before))


def test_same_file_parsed_twice_keeps_its_names(tmp_path: Path) -> None:
    """xDSL's own reading renames a handle seen before in the process (`w` -> `w_0`)."""
    module = _constant_module(np.ones((40, 40), np.float32) * 3, f32)
    write_module(module, tmp_path / "c.mlir")
    first = module_text(parse_file(tmp_path / "c.mlir"))
    second = module_text(parse_file(tmp_path / "c.mlir"))
    assert first == second and "dense_resource<weight" in first


def _written(tmp_path: Path) -> Path:
    module = _constant_module(np.arange(1600, dtype=np.float32).reshape(40, 40), f32)
    write_module(module, tmp_path / "c.mlir")
    return tmp_path / "c.mlir"


def test_missing_weights_file_is_one_line(tmp_path: Path) -> None:
    path = _written(tmp_path)
    weights_file_for(path).unlink()
    run = graphfuse("stats", "c.mlir", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1
    assert "'graph.constant' op dense_resource<weight_0> has no data: weights file" in run.stderr
    assert "c.safetensors not found" in run.stderr


def test_weight_of_another_shape_is_named(tmp_path: Path) -> None:
    path = _written(tmp_path)
    path.write_text(path.read_text().replace("tensor<40x40xf32>", "tensor<20x80xf32>"))
    with pytest.raises(
        GraphfuseError,
        match=r"c\.mlir:\d+:\d+: 'graph\.constant' op dense_resource<weight_0> is 20x80xf32",
    ):
        parse_file(path)


def test_handle_missing_from_the_file_is_named(tmp_path: Path) -> None:
    path = _written(tmp_path)
    path.write_text(path.read_text().replace("dense_resource<weight_0>", "dense_resource<nope>"))
    with pytest.raises(GraphfuseError, match=r"c\.safetensors holds no 'nope'"):
        parse_file(path)


def test_truncated_or_foreign_weights_file(tmp_path: Path) -> None:
    path = _written(tmp_path)
    side = weights_file_for(path)
    data = side.read_bytes()
    side.write_bytes(data[: len(data) - 100])
    with pytest.raises(GraphfuseError, match="truncated"):
        parse_file(path)
    side.write_bytes(b"not a safetensors file at all")
    with pytest.raises(GraphfuseError, match="not a safetensors weights file"):
        parse_file(path)


def test_text_without_its_file_cannot_have_resources(tmp_path: Path) -> None:
    text = _written(tmp_path).read_text()
    with pytest.raises(GraphfuseError, match="has no data: text parsed without its file"):
        parse_text(text, "c.mlir")
    without = text.replace('attributes {graphfuse.weights = "c.safetensors"} ', "")
    with pytest.raises(GraphfuseError, match="names no weights file"):
        parse_text(without, "c.mlir")


def test_weights_file_is_safetensors(tmp_path: Path) -> None:
    """Other tools read the weights: the file is safetensors with the usual dtypes."""
    from safetensors import safe_open

    path = _written(tmp_path)
    with safe_open(str(weights_file_for(path)), framework="numpy") as opened:
        array = opened.get_tensor("weight_0")
    np.testing.assert_array_equal(array, np.arange(1600, dtype=np.float32).reshape(40, 40))
    (length,) = struct.unpack("<Q", weights_file_for(path).read_bytes()[:8])
    header = json.loads(weights_file_for(path).read_bytes()[8 : 8 + length])
    assert header["__metadata__"] == {"format": "graphfuse"}


def test_failed_write_leaves_neither_file(tmp_path: Path) -> None:
    module = _constant_module(np.ones((40, 40), np.float32), f32)
    missing = tmp_path / "no-such-folder" / "c.mlir"
    with pytest.raises(GraphfuseError, match="no-such-folder does not exist"):
        write_module(module, missing)
    assert not any(tmp_path.rglob("*.safetensors"))


def test_non_ascii_module_name_reads_back(tmp_path: Path) -> None:
    module = _constant_module(np.arange(1600, dtype=np.float32).reshape(40, 40), f32)
    write_module(module, tmp_path / "modèle.mlir")
    assert "mod\\C3\\A8le.safetensors" in (tmp_path / "modèle.mlir").read_text()
    back = parse_file(tmp_path / "modèle.mlir")
    assert module_text(back, inline=True) == module_text(module, inline=True)


def test_failed_rewrite_keeps_the_pair_that_was_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _written(tmp_path)
    before = (path.read_bytes(), weights_file_for(path).read_bytes())
    other = _constant_module(np.ones((40, 40), np.float32), f32)

    def full_disk(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(GraphfuseError, match="c.mlir: cannot write: No space left on device"):
        write_module(other, path)
    monkeypatch.undo()
    assert (path.read_bytes(), weights_file_for(path).read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.mlir", "c.safetensors"]


def test_malformed_header_is_one_line(tmp_path: Path) -> None:
    path = _written(tmp_path)
    header = b'["not", "a", "dict"]'
    weights_file_for(path).write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(GraphfuseError, match="malformed header"):
        parse_file(path)
