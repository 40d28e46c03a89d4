"""TOSA graphfuse cannot take: one line naming the file, the op and what is wrong, exit
status 1, no output file; the xdsl-opt pass fails the same way; which files count as TOSA."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from graphfuse.cli import main
from graphfuse.compiler import input_kind
from graphfuse.frontend.tosa import from_tosa
from graphfuse.frontend.tosa.convert_tosa_to_graph import ConvertTosaToGraphPass
from graphfuse.parsing import GraphfuseError
from tests.frontend.tosa import tosa_text as t
from tests.subprocesses import xdsl_opt

ROOT = Path(__file__).resolve().parents[3]
MODELS = Path(__file__).resolve().parents[3] / "examples" / "tosa"


def _exp(typ: str) -> str:
    return t.function("main", [typ], [typ], [f"%y = tosa.exp %arg0 : ({typ}) -> {typ}"], "%y")


def _adds_resource_w() -> str:
    """@main adding a constant held as `dense_resource<w>` (tensor<2xf32>) to its input."""
    return t.function(
        "main",
        ["tensor<2xf32>"],
        ["tensor<2xf32>"],
        [
            '%c = "tosa.const"() <{values = dense_resource<w> : tensor<2xf32>}> : () -> '
            "tensor<2xf32>",
            "%y = tosa.add %arg0, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>",
        ],
        "%y",
    )


BAD = {
    "unsupported_op": (
        t.function(
            "main",
            ["tensor<4xi32>"],
            ["tensor<4xi32>"],
            ["%y = tosa.clz %arg0 : (tensor<4xi32>) -> tensor<4xi32>"],
            "%y",
        ),
        r"^bad\.tosa\.mlir:2:8: 'tosa\.clz' op is not supported by graphfuse's TOSA import",
    ),
    "malformed": (
        _exp("tensor<4xf32>").replace("(tensor<4xf32>)", "(tensor<4xf32)"),
        r"^bad\.tosa\.mlir:2:\d+: expected '>' in tensor type \(mlir-opt rejects it as TOSA\)$",
    ),
    "dynamic_shape": (
        _exp("tensor<?x4xf32>"),
        r"^bad\.tosa\.mlir:1:1: @main argument #0 has a dynamic dimension \(tensor<\?x4xf32>\)"
        r": graphfuse compiles static shapes only$",
    ),
    "quantised_type": (
        t.function(
            "main",
            ["tensor<4x!quant.uniform<i8:f32, 0.5>>"],
            ["tensor<4x!quant.uniform<i8:f32, 0.5>>"],
            [
                "%y = tosa.abs %arg0 : (tensor<4x!quant.uniform<i8:f32, 0.5>>) -> "
                "tensor<4x!quant.uniform<i8:f32, 0.5>>"
            ],
            "%y",
        ),
        r"^bad\.tosa\.mlir:1:1: @main argument #0 has element type !quant\.uniform.*"
        r"quantised types are not supported",
    ),
    "quantised_conv": (
        t.function(
            "main",
            ["tensor<1x4x4x2xi8>"],
            ["tensor<1x4x4x3xi32>"],
            [
                '%w = "tosa.const"() <{values = dense<1> : tensor<3x1x1x2xi8>}> : () -> '
                "tensor<3x1x1x2xi8>",
                '%b = "tosa.const"() <{values = dense<0> : tensor<3xi32>}> : () -> tensor<3xi32>',
                t.zero("zp", "i8"),
                "%y = tosa.conv2d %arg0, %w, %b, %zp, %zp {acc_type = i32, dilation = "
                "array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : "
                "(tensor<1x4x4x2xi8>, tensor<3x1x1x2xi8>, tensor<3xi32>, tensor<1xi8>, "
                "tensor<1xi8>) -> tensor<1x4x4x3xi32>",
            ],
            "%y",
        ),
        r"^bad\.tosa\.mlir:5:8: 'tosa\.conv2d' op on i8 is quantised arithmetic",
    ),
    "not_tosa_at_all": (
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = math.exp %x : tensor<4xf32>\n"
        "  %1 = tosa.exp %0 : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  return %1 : tensor<4xf32>\n}\n",
        r"^bad\.tosa\.mlir:2:8: 'math\.exp' op is not a TOSA op",
    ),
    "dense_resource_of_the_wrong_size": (
        _adds_resource_w()
        + '{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x040000000000803F"\n'
        "    }\n  }\n#-}\n",
        r"^bad\.tosa\.mlir:2:8: 'tosa\.const' op dense_resource<w> holds 4 bytes in "
        r"dialect_resources, tensor<2xf32> needs 8$",
    ),
    "dense_resource_without_data": (
        _adds_resource_w(),
        r"^bad\.tosa\.mlir:2:8: 'tosa\.const' op dense_resource<w> has no data",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_tosa_bad_input_one_line_exit_1_no_output(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, pattern = BAD[case]
    monkeypatch.chdir(tmp_path)
    Path("bad.tosa.mlir").write_text(text)
    assert main(["import", "bad.tosa.mlir", "-o", "out.mlir"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    message = err.removeprefix("graphfuse: error: ")
    assert re.search(pattern, message), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tosa.mlir"]


def test_tosa_cli_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    """As a user sees it: the command itself, on a file mlir-opt rejects."""
    (tmp_path / "bad.tosa.mlir").write_text(BAD["unsupported_op"][0])
    run = subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", "run", "bad.tosa.mlir", "--check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 1
    assert run.stderr.startswith("graphfuse: error: bad.tosa.mlir:2:8: 'tosa.clz' op")
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_tosa_without_mlir_opt_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHFUSE_MLIR_OPT", str(tmp_path / "no-such-mlir-opt"))
    with pytest.raises(GraphfuseError, match=r"^model\.tosa\.mlir: reading TOSA needs mlir-opt"):
        from_tosa(_exp("tensor<4xf32>"), "model.tosa.mlir")


def test_tosa_missing_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "no/such/model.tosa.mlir"]) == 1
    assert capsys.readouterr().err.strip().endswith("model.tosa.mlir: cannot read: no such file")


def test_convert_tosa_to_graph_pass_fails_with_the_op_named() -> None:
    context = Context(allow_unregistered=True)
    context.load_dialect(Builtin)
    context.load_dialect(Func)
    module = Parser(
        context,
        '"func.func"() <{function_type = (tensor<4xi32>) -> tensor<4xi32>, sym_name = "f"}> ({\n'
        "^bb0(%arg0: tensor<4xi32>):\n"
        '  %0 = "tosa.clz"(%arg0) : (tensor<4xi32>) -> tensor<4xi32>\n'
        '  "func.return"(%0) : (tensor<4xi32>) -> ()\n'
        "}) : () -> ()\n",
    ).parse_module()
    with pytest.raises(PassFailedException, match=r"^@f op #0: 'tosa\.clz' op is not supported"):
        ConvertTosaToGraphPass().apply(context, module)


def test_xdsl_opt_converts_and_fuses_generic_tosa(tmp_path: Path) -> None:
    """`xdsl-opt -p convert-tosa-to-graph,graph-fuse` on the generic form mlir-opt prints."""
    from graphfuse.toolchain import require_tool

    generic = subprocess.run(
        [require_tool("mlir-opt").path, "--mlir-print-op-generic", str(MODELS / "cnn.tosa.mlir")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    run = xdsl_opt(
        "--allow-unregistered-dialect", "-p", "convert-tosa-to-graph,graph-fuse", stdin=generic
    )
    assert run.returncode == 0, run.stderr
    assert "tosa." not in run.stdout
    assert 'graph.fused "fused_transpose_conv2d_add_min_max"' in run.stdout
    assert 'graph.fused "fused_conv2d_add_relu"' in run.stdout


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("m.tosa.mlir", "", "tosa"),
        ("m.STABLEHLO.mlir", "", "stablehlo"),
        ("m.mlir", _exp("tensor<4xf32>"), "tosa"),
        ("m.mlir", '  %0 = "tosa.const"() <{values = dense<1> : tensor<1xi8>}>', "tosa"),
        ("m.mlir", "  %0:2 = stablehlo.while(%a = %b) : tensor<i32>", "stablehlo"),
        ("m.mlir", "// tosa.add is in a comment only\nfunc.func @main() {\n}\n", "mlir"),
        ("m.onnx", "", "onnx"),
    ],
)
def test_input_kind_by_suffix_and_first_ops(tmp_path: Path, name: str, text: str, kind: str):
    path = tmp_path / name
    path.write_text(text)
    assert input_kind(path) == kind


def test_import_refuses_a_graph_dialect_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(ROOT / "examples" / "transformer_block.mlir")]) == 1
    assert "holds no TOSA or StableHLO ops" in capsys.readouterr().err
