"""`dense_resource` handles kept by xDSL's own parser (plain `xdsl-opt`, other MLIR flows):
graph.constant holds them, passes read their data only when they need values, from the
weights file the module names or from the `dialect_resources` section, and missing or
misfit data is one line naming the handle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import DenseResourceAttr, ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import GraphfuseError, make_context, parse_text
from graphfuse.resources import blob_text, resources_section
from graphfuse.weights import module_text, write_module

XDSL_OPT = str(Path(sys.executable).parent / "xdsl-opt")
WEIGHT = np.arange(32 * 4 * 3 * 3, dtype=np.float32).reshape(32, 4, 3, 3) / 1000
"""4608 bytes: over the 4 KiB that stay in the text."""


def _conv_relu(weight: str) -> str:
    return f"""func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x32x8x8xf32> {{
  %w = graph.constant {weight} : tensor<32x4x3x3xf32>
  %c = graph.conv2d %x, %w padding = [1, 1, 1, 1] : (tensor<1x4x8x8xf32>, tensor<32x4x3x3xf32>) -> tensor<1x32x8x8xf32>
  %y = graph.relu %c : tensor<1x32x8x8xf32>
  func.return %y : tensor<1x32x8x8xf32>
}}
"""  # noqa: E501


def _written(folder: Path) -> Path:
    """m.mlir naming m.safetensors, whose `weight_0` is WEIGHT."""
    module = parse_text(_conv_relu(f'dense<"0x{WEIGHT.tobytes().hex().upper()}">'))
    write_module(module, folder / "m.mlir")
    return folder / "m.mlir"


def _xdsl_opt(
    *args: str, cwd: Path, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [XDSL_OPT, *args], capture_output=True, text=True, cwd=cwd, input=stdin, timeout=120
    )
    assert not check or done.returncode == 0, done.stderr[-3000:]
    return done


def _stock_parse(text: str) -> ModuleOp:
    """The module as xDSL's own parser reads it (handles kept, blobs in its table)."""
    return Parser(make_context(), text).parse_module()


def test_constant_verifies_a_handle_of_its_result_type() -> None:
    text = _conv_relu("dense_resource<w_verify>").replace(
        "%w = graph.constant dense_resource<w_verify> : tensor<32x4x3x3xf32>",
        '%w = "graph.constant"() <{value = dense_resource<w_verify> : tensor<32x4x3x4xf32>}>'
        " : () -> tensor<32x4x3x3xf32>",
    )
    module = _stock_parse(text)
    with pytest.raises(VerifyException, match="tensor<32x4x3x3xf32>"):
        module.verify()


def test_passes_that_need_no_values_load_none(tmp_path: Path) -> None:
    """graph-fuse on a conv whose weight file is gone: the handle is printed as read."""
    path = _written(tmp_path)
    (tmp_path / "m.safetensors").unlink()
    fused = _xdsl_opt("-p", "graph-fuse", path.name, cwd=tmp_path).stdout
    assert "graph.constant dense_resource<weight_0> : tensor<32x4x3x3xf32>" in fused
    assert 'graphfuse.weights = "m.safetensors"' in fused


def test_missing_weights_file_names_handle_and_file(tmp_path: Path) -> None:
    path = _written(tmp_path)
    (tmp_path / "m.safetensors").unlink()
    pipeline = "graph-fuse,convert-graph-to-loop"
    run = _xdsl_opt("-p", pipeline, path.name, cwd=tmp_path, check=False)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("graphfuse.errors.GraphfuseError: dense_resource<weight_0>: ")
    assert "weights file m.safetensors (named in graphfuse.weights) not found" in last
    # xdsl-opt prints a diagnostic in one line where asked to.
    run = _xdsl_opt("-p", pipeline, "--verify-diagnostics", path.name, cwd=tmp_path)
    assert run.stdout.strip().startswith("dense_resource<weight_0>: weights file m.safetensors")
    assert len(run.stdout.strip().splitlines()) == 1


def test_weights_found_beside_the_module_from_another_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    _written(tmp_path / "sub")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pipeline = "graph-fuse,convert-graph-to-loop"
    out = _xdsl_opt("-p", pipeline, "../sub/m.mlir", cwd=elsewhere).stdout
    assert "memref.global" in out and "dense_resource" not in out


def test_handle_missing_from_the_weights_file_is_named(tmp_path: Path) -> None:
    path = _written(tmp_path)
    path.write_text(path.read_text().replace("dense_resource<weight_0>", "dense_resource<nope>"))
    run = _xdsl_opt(
        "-p", "graph-fuse,convert-graph-to-loop", "--verify-diagnostics", path.name, cwd=tmp_path
    )
    assert (
        run.stdout.strip() == f"dense_resource<nope>: {tmp_path / 'm.safetensors'} holds no 'nope'"
    )


def test_section_under_xdsl_parser_gives_values_once() -> None:
    text = _conv_relu("dense_resource<w_once>") + resources_section_of("w_once", WEIGHT)
    module = _stock_parse(text)
    constant = next(op for op in module.walk() if isinstance(op, graph.ConstantOp))
    assert isinstance(constant.stored, DenseResourceAttr)
    assert constant.value is constant.value  # read once, then cached
    x = np.ones((1, 4, 8, 8), np.float32)
    expected = reference.run(parse_text(text), "main", x)[0]
    np.testing.assert_array_equal(reference.run(module, "main", x)[0], expected)


def test_blob_of_the_wrong_size_is_named() -> None:
    text = _conv_relu("dense_resource<w_short>") + resources_section_of("w_short", WEIGHT[:16])
    module = _stock_parse(text)
    constant = next(op for op in module.walk() if isinstance(op, graph.ConstantOp))
    with pytest.raises(GraphfuseError, match=r"^dense_resource<w_short> holds 2304 bytes"):
        _ = constant.value
    with pytest.raises(GraphfuseError, match=r"^c\.mlir:2:3: 'graph\.constant' op "):
        parse_text(text, "c.mlir")


def test_handle_without_data_is_named() -> None:
    module = _stock_parse(_conv_relu("dense_resource<w_nowhere>"))
    constant = next(op for op in module.walk() if isinstance(op, graph.ConstantOp))
    with pytest.raises(GraphfuseError, match=r"^dense_resource<w_nowhere> has no data"):
        _ = constant.value


def resources_section_of(handle: str, array: np.ndarray) -> str:
    return (
        f'{{-#\n  dialect_resources: {{\n    builtin: {{\n      {handle}: "'
        f'{blob_text(array.tobytes(), 4)}"\n    }}\n  }}\n#-}}\n'
    )


@pytest.mark.parametrize(
    ("dtype", "alignment"),
    [(np.float32, "04000000"), (np.int64, "08000000"), (np.int8, "01000000")],
)
def test_inline_text_is_mlirs_resources_section(dtype: type, alignment: str) -> None:
    """Each blob starts with its element's alignment, as upstream MLIR writes it; the text
    reads back into the same module."""
    from xdsl.dialects.builtin import TensorType

    from graphfuse.dialects.graph.elements import numpy_dtype, numpy_to_dense

    values = np.arange(8192).astype(dtype)
    typ = TensorType(_element(np.dtype(dtype)), values.shape)
    dense = numpy_to_dense(values, typ)
    assert numpy_dtype(typ.get_element_type()) == np.dtype(dtype)
    section = resources_section({"w": dense})
    assert f'w: "0x{alignment}' in section
    text = f"""func.func @main() -> {typ} {{
  %w = graph.constant dense_resource<w> : {typ}
  func.return %w : {typ}
}}
{section}"""
    module = parse_text(text)
    assert module_text(module, inline=True) == module_text(parse_text(text), inline=True)
    np.testing.assert_array_equal(reference.run(module, "main")[0], values)


def _element(dtype: np.dtype) -> object:
    from xdsl.dialects.builtin import IntegerType, f32

    return f32 if dtype == np.float32 else IntegerType(dtype.itemsize * 8)


def test_graphfuse_reads_what_xdsl_opt_printed(tmp_path: Path) -> None:
    """A section module through xdsl-opt keeps its section; graphfuse reads the result."""
    text = _conv_relu("dense_resource<w_round>") + resources_section_of("w_round", WEIGHT)
    out = _xdsl_opt("-p", "graph-fuse", cwd=tmp_path, stdin=text).stdout
    assert "dialect_resources" in out and "w_round" in out
    x = np.ones((1, 4, 8, 8), np.float32)
    expected = reference.run(parse_text(text), "main", x)[0]
    np.testing.assert_allclose(reference.run(parse_text(out), "main", x)[0], expected, 1e-6)
