"""Initializers kept in external data files: read once, straight into the module's weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper, helper
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType, f32

from graphfuse.dialects import graph
from graphfuse.dialects.graph.elements import numpy_to_dense
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_checks import load_model, read_initializer
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import model

F = TensorProto.FLOAT


def _saved(tmp_path: Path) -> tuple[onnx.ModelProto, Path, np.ndarray]:
    """An Add of a 32x32 weight, and the same model saved with the weight beside it."""
    x = np.zeros((32, 32), np.float32)
    w = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    built = model(
        [helper.make_node("Add", ["x", "w"], ["y"])], {"x": x}, {"y": (F, [32, 32])}, {"w": w}
    )
    path = tmp_path / "add.onnx"
    saved = onnx.ModelProto()
    saved.CopyFrom(built)  # onnx.save moves the data of the model it saves out of it
    onnx.save(saved, str(path), save_as_external_data=True, location="add.data", size_threshold=0)
    return built, path, w


def _weight(module: ModuleOp) -> DenseIntOrFPElementsAttr:
    found = [op for op in module.walk() if isinstance(op, graph.ConstantOp)]
    assert len(found) == 1
    value = found[0].value
    assert isinstance(value, DenseIntOrFPElementsAttr)
    return value


def test_external_initializers_import_as_embedded_ones(tmp_path: Path) -> None:
    built, path, w = _saved(tmp_path)
    from_file, in_memory = from_onnx(path), from_onnx(built)
    assert str(from_file) == str(in_memory)
    assert _weight(from_file).data.data == w.tobytes()


def test_load_model_leaves_initializers_in_their_file(tmp_path: Path) -> None:
    _, path, w = _saved(tmp_path)
    deferred = load_model(path, initializers=False)
    (tensor,) = deferred.graph.initializer
    assert external_data_helper.uses_external_data(tensor)
    np.testing.assert_array_equal(read_initializer(tensor, path), w)
    (loaded,) = load_model(path).graph.initializer
    assert not external_data_helper.uses_external_data(loaded)


def test_unreadable_external_initializer_is_named(tmp_path: Path) -> None:
    _, path, _ = _saved(tmp_path)
    (tmp_path / "add.data").write_bytes(b"short")
    with pytest.raises(ImportFailure, match=r"add\.onnx: cannot read external data"):
        from_onnx(path)


def test_numpy_to_dense_keeps_the_bytes_an_array_views() -> None:
    raw = np.arange(16, dtype=np.float32).tobytes()
    viewed = np.frombuffer(raw, np.float32).reshape(4, 4)
    assert numpy_to_dense(viewed, TensorType(f32, [4, 4])).data.data is raw
    transposed = numpy_to_dense(viewed.T, TensorType(f32, [4, 4])).data.data
    assert transposed == np.ascontiguousarray(viewed.T).tobytes()
    part = numpy_to_dense(viewed[1:], TensorType(f32, [3, 4])).data.data
    assert part == viewed[1:].tobytes()
