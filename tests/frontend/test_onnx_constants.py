"""Graph inputs graphfuse needs known at import (axes, pads, trip counts), bound by
`--constant NAME=...` or `constants=`: refused with the option to use, then folded in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.cli import main
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _reduce_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        "g",
        [
            helper.make_tensor_value_info("x", F, [2, 3, 4]),
            helper.make_tensor_value_info("axes", I64, [2]),
        ],
        [helper.make_tensor_value_info("y", F, [3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_axes_input_must_be_bound_and_then_folds(tmp_path: Path) -> None:
    path = _reduce_model(tmp_path / "m.onnx")
    with pytest.raises(
        ImportFailure, match=r"axes comes from graph input 'axes'.*--constant axes="
    ):
        from_onnx(str(path))
    module = from_onnx(str(path), constants={"axes": [0, 2]})
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    got = graphfuse.compile(module)(x)  # the bound input is no argument any more
    np.testing.assert_allclose(got, x.sum(axis=(0, 2)), rtol=1e-5)


def test_cli_constant_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _reduce_model(tmp_path / "m.onnx")
    library = tmp_path / "m.so"
    assert main(["compile", str(path), "-o", str(library)]) == 1
    assert "--constant axes=" in capsys.readouterr().err
    assert not library.exists()
    assert main(["compile", str(path), "--constant", "axes=0,2", "-o", str(library)]) == 0
    assert main(["run", str(path), "--constant", "axes=1", "--random-inputs", "--check"]) == 1
    err = capsys.readouterr().err  # one value for an input declared with two
    assert "--constant axes: 1 value of shape () (a scalar) do not fit the declared shape 2" in err
    np.save(tmp_path / "axes.npy", np.array([0, 2], np.int64))
    spec = f"axes={tmp_path / 'axes.npy'}"
    assert main(["run", str(path), "--constant", spec, "--random-inputs", "--check"]) == 0
    for bad, reason in [
        ("axes=0,x", "values must be numbers"),
        ("axes=3.5,1", "not every value is one"),
        ("axes=nan,1", "not every value is one"),
        ("axes=99999999999999999999,1", "not a int64 array"),
        ("axes", "expected NAME=V0,V1,..."),
        ("nothere=1,2", "'nothere', which is not a model input"),
    ]:
        assert main(["import", str(path), "--constant", bad]) == 1
        err = capsys.readouterr().err
        assert reason in err and err.count("\n") == 1, err
