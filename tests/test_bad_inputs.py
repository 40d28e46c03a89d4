"""Bad input of every kind: one line naming the thing and what is wrong, a non-zero exit,
and nothing left behind (no output file, no temporary file, no new folder).

Most cases call `graphfuse.cli.main` in this process (an exception escaping it fails the
test just as a traceback would); a few run the command itself to see exactly what a user
sees on stderr.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import graphfuse
from graphfuse.cli import main
from graphfuse.compiler import CompileOptions
from graphfuse.parsing import GraphfuseError
from tests.conftest import graphfuse_command

ROOT = Path(__file__).resolve().parent.parent
ADD = (
    "func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  func.return %0 : tensor<4xf32>\n}\n"
)


def _unary(typ: str, extra_args: str = "") -> str:
    return (
        f"func.func @main(%x: {typ}{extra_args}) -> {typ} {{\n"
        f"  %0 = graph.neg %x : {typ}\n  func.return %0 : {typ}\n}}\n"
    )


BAD_FILES = {
    "use_before_def": (
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %1 = graph.neg %0 : tensor<4xf32>\n  %0 = graph.neg %x : tensor<4xf32>\n"
        "  func.return %1 : tensor<4xf32>\n}\n",
        r"bad\.mlir:2:3: 'graph\.neg' op operand #0 is used before it is defined$",
    ),
    "op_at_top_level": (
        "%0 = graph.constant dense<1.0> : tensor<2xf32>\n",
        r"bad\.mlir:1:1: 'graph\.constant' op is at module top level",
    ),
    "empty": ("", r"bad\.mlir: no function: the file is empty or holds only comments$"),
    "comments_only": ("// a comment\n\n// another\n", r"bad\.mlir: no function"),
    "unclosed_brace": (
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n",
        r"bad\.mlir:1:53: '\{' is never closed",
    ),
    "unclosed_brace_after_comments": (
        "// a model\n\n" + ADD.removesuffix("}\n"),
        r"bad\.mlir:3:72: '\{' is never closed \(the file ends first\)$",
    ),
    "unclosed_second_function": (
        ADD + _unary("tensor<4xf32>").replace("@main", "@g").removesuffix("}\n"),
        r"bad\.mlir:5:50: '\{' is never closed \(the file ends first\)$",
    ),
    "extra_brace": (ADD + "}\n", r"bad\.mlir:5:1: '\}' closes no '\{'$"),
    "garbage_start": ("@@@ " + ADD, r"bad\.mlir:1:1: .*identifier"),
    "binary": ("\x00\x01\x02" + ADD, r"bad\.mlir:1:1: Unexpected character: \\x00$"),
    "i4": (
        _unary("tensor<4xi4>"),
        r"bad\.mlir:2:3: 'graph\.neg' op element type i4 .*not supported",
    ),
    "dynamic_dim": (
        _unary("tensor<?x4xf32>"),
        r"bad\.mlir:2:3: 'graph\.neg' op operand #0 has a dynamic dimension \(#0 of "
        r"tensor<\?x4xf32>\): dynamic dimensions are not supported yet$",
    ),
    "dynamic_dim_meets_static": (
        ADD.replace("%x: tensor<4xf32>", "%x: tensor<?xf32>").replace(
            "(tensor<4xf32>, tensor", "(tensor<?xf32>, tensor"
        ),
        r"bad\.mlir:2:3: 'graph\.add' op operand #0 has a dynamic dimension \(#0 of "
        r"tensor<\?xf32>\): dynamic dimensions are not supported yet$",
    ),
    "unused_dynamic_argument": (
        _unary("tensor<4xf32>", ", %y: tensor<2x?xf32>"),
        r"bad\.mlir:1:1: @main argument #1 has a dynamic dimension \(#1 of tensor<2x\?xf32>\): "
        r"dynamic dimensions are not supported yet",
    ),
    "unused_f80_argument": (
        _unary("tensor<4xf32>", ", %y: tensor<4xf80>"),
        r"bad\.mlir:1:1: @main argument #1 has element type f80 \(tensor<4xf80>\)",
    ),
    "op_on_empty_tensor": (
        _unary("tensor<0x4xf32>"),
        r"bad\.mlir:2:3: 'graph\.neg' op result #0 is empty \(dimension #0 of tensor<0x4xf32>",
    ),
}


def _run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code if isinstance(exit_.code, int) else 1
    return status, capsys.readouterr().err


def _assert_one_line(status: int, err: str, pattern: str, code: int = 1) -> None:
    assert status == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(pattern, lines[0]), lines[0]


def _left_behind(folder: Path, before: set[str]) -> set[str]:
    return {p.name for p in folder.iterdir()} - before


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["stats", "run", "compile", "fuse"])
def test_bad_file_one_line_nothing_written(case, command, tmp_path, monkeypatch, capsys):
    text, pattern = BAD_FILES[case]
    (tmp_path / "bad.mlir").write_text(text)
    monkeypatch.chdir(tmp_path)
    argv = [command, "bad.mlir"] + (["-o", "out.mlir"] if command == "fuse" else [])
    status, err = _run_main(argv, capsys)
    _assert_one_line(status, err, r"^graphfuse: error: " + pattern)
    assert _left_behind(tmp_path, {"bad.mlir"}) == set()


DECLARATION = "func.func private @main(%x: tensor<2xf32>) -> tensor<2xf32>\n"


@pytest.mark.parametrize("command", ["run", "compile"])
def test_declaration_as_entry_is_refused(command, tmp_path, monkeypatch, capsys):
    """A declaration may sit in a module (a callee), but it cannot be run or compiled."""
    (tmp_path / "bad.mlir").write_text(DECLARATION)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main([command, "bad.mlir"], capsys)
    _assert_one_line(status, err, r"bad\.mlir:1:1: function @main is a declaration without a body")
    assert _left_behind(tmp_path, {"bad.mlir"}) == set()
    with pytest.raises(GraphfuseError, match="@main is a declaration without a body"):
        graphfuse.compile("bad.mlir")


CALLS_DECLARATION = DECLARATION.replace("@main", "@ext") + (
    "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
    "  %0 = graph.neg %x : tensor<2xf32>\n"
    "  %1 = func.call @ext(%0) : (tensor<2xf32>) -> tensor<2xf32>\n"
    "  func.return %1 : tensor<2xf32>\n}\n"
)


@pytest.mark.parametrize(
    "argv",
    [["run"], ["run", "--reference"], ["compile"], ["compile", "-o", "x.so"], ["profile"]],
)
def test_call_of_a_declaration_is_refused(argv, tmp_path, monkeypatch, capsys):
    """The declared callee is named before any pass or tool runs (not as a symbol the
    tools cannot find)."""
    (tmp_path / "bad.mlir").write_text(CALLS_DECLARATION)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main([argv[0], "bad.mlir", *argv[1:]], capsys)
    _assert_one_line(
        status,
        err,
        r"^graphfuse: error: bad\.mlir:4:3: 'func\.call' op in @main calls @ext, a "
        r"declaration without a body",
    )
    assert _left_behind(tmp_path, {"bad.mlir"}) == set()
    with pytest.raises(GraphfuseError, match="calls @ext, a declaration without a body"):
        graphfuse.compile("bad.mlir")


def test_call_of_a_declaration_through_a_callee(tmp_path, monkeypatch, capsys):
    text = CALLS_DECLARATION.replace("@main", "@mid") + (
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %0 = func.call @mid(%x) : (tensor<2xf32>) -> tensor<2xf32>\n"
        "  func.return %0 : tensor<2xf32>\n}\n"
    )
    (tmp_path / "bad.mlir").write_text(text)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(["run", "bad.mlir", "--reference"], capsys)
    _assert_one_line(status, err, r"bad\.mlir:4:3: 'func\.call' op in @mid calls @ext")


@pytest.mark.parametrize(
    ("callee", "pattern"),
    [
        (DECLARATION.replace("@main", "@ext"), r"calls @ext, a declaration without a body"),
        (
            _unary("tensor<2xf32>").replace("@main", "@ext"),
            r"calls @ext: calls between graph functions are not compiled yet \(inline @ext "
            r"into @main\)",
        ),
    ],
)
def test_call_at_a_stage_of_the_whole_module(callee, pattern, tmp_path, monkeypatch, capsys):
    """`--emit` lowers every function: convert-graph-to-loop names the call it cannot
    lower, not a graph-fuse that did run."""
    main_text = CALLS_DECLARATION.split("\n", 1)[1]
    (tmp_path / "bad.mlir").write_text(callee + main_text)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(["compile", "bad.mlir", "--emit", "loop"], capsys)
    _assert_one_line(status, err, r"^graphfuse: error: 'func\.call' in @main " + pattern)


def test_module_with_a_declared_callee_still_fuses(tmp_path, monkeypatch, capsys):
    (tmp_path / "callee.mlir").write_text(DECLARATION.replace("@main", "@ext") + ADD)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(["fuse", "callee.mlir"], capsys)
    assert status == 0, err


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["compile", "in.mlir", "-o", "folder"], r"folder: is a folder; name the output file"),
        (["compile", "in.mlir", "-o", ""], r"output file name is empty"),
        (
            ["compile", "in.mlir", "-o", "missing/x.so"],
            r"missing/x\.so: folder missing does not exist",
        ),
        (["compile", "in.mlir", "--emit", "loop", "-o", "folder"], r"folder: is a folder"),
        (
            ["fuse", "in.mlir", "-o", "missing/f.mlir"],
            r"missing/f\.mlir: folder missing does not exist",
        ),
        (["fuse", "in.mlir", "--dot", "folder"], r"folder: is a folder"),
        (
            ["compile", "in.mlir", "--target", "nvptx", "-o", "missing/ptx"],
            r"missing/ptx: folder missing does not exist",
        ),
        (
            ["compile", "in.mlir", "--target", "nvptx", "-o", "in.mlir"],
            r"in\.mlir: exists and is not a folder",
        ),
        (["run", "in.txt"], r"in\.txt: not a \.mlir or \.onnx file"),
        (["compile", "noext"], r"noext: not a \.mlir or \.onnx file"),
        (["run", "folder.mlir"], r"folder\.mlir: cannot read"),
        (["run", "absent.mlir"], r"absent\.mlir: cannot read"),
        (["run", "in.mlir", "--cpu", "skylakee"], r"unknown CPU 'skylakee'.*did you mean skylake"),
        (["compile", "in.mlir", "--emit", "llvm", "--cpu", "nonsense"], r"unknown CPU 'nonsense'"),
        (
            ["stats", "in.mlir", "--input-shape", "x=2"],
            r"in\.mlir: --input-shape applies to \.onnx models only",
        ),
    ],
)
def test_bad_arguments_one_line_nothing_written(argv, pattern, tmp_path, monkeypatch, capsys):
    (tmp_path / "in.mlir").write_text(ADD)
    (tmp_path / "in.txt").write_text(ADD)
    (tmp_path / "noext").write_text(ADD)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.mlir").mkdir()
    before = {p.name for p in tmp_path.iterdir()}
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(argv, capsys)
    _assert_one_line(status, err, r"^graphfuse: error: " + pattern)
    assert _left_behind(tmp_path, before) == set()
    assert list((tmp_path / "folder").iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (
            ["run", "in.mlir", "--lanes", "3"],
            r"argument --lanes: invalid choice: 3 \(choose from 8, 16\)",
        ),
        (
            ["run", "in.mlir", "--seed", "-1"],
            r"argument --seed: expected an integer >= 0, got '-1'",
        ),
        (
            ["run", "in.mlir", "--max-depth", "0"],
            r"argument --max-depth: expected an integer >= 1, got '0'",
        ),
        (
            ["fuse", "in.mlir", "--max-depth", "-1"],
            r"argument --max-depth: expected an integer >= 1",
        ),
        (["compile", "in.mlir", "--threads", "0"], r"argument --threads: expected an integer >= 1"),
        (
            ["run", "in.mlir", "--threads", "two"],
            r"argument --threads: expected an integer >= 1, got 'two'",
        ),
        (["compile", "in.mlir", "--target", "tpu"], r"argument --target: invalid choice: 'tpu'"),
        (["run", "in.mlir", "--frobnicate"], r"unrecognized arguments: --frobnicate"),
        (["run"], r"the following arguments are required: file"),
        (["explode"], r"argument command: invalid choice: 'explode'"),
    ],
)
def test_usage_errors_are_one_line(argv, pattern, tmp_path, monkeypatch, capsys):
    (tmp_path / "in.mlir").write_text(ADD)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(argv, capsys)
    _assert_one_line(status, err, r"^graphfuse( \w+)?: error: " + pattern, code=2)


_command = graphfuse_command


def test_cache_folder_that_is_a_file(tmp_path):
    (tmp_path / "in.mlir").write_text(ADD)
    (tmp_path / "cache").write_text("not a folder")
    run = _command(["compile", "in.mlir"], tmp_path, GRAPHFUSE_CACHE_DIR=str(tmp_path / "cache"))
    assert "Traceback" not in run.stderr
    _assert_one_line(run.returncode, run.stderr, r"cache: cannot use it as graphfuse's build cache")
    assert _left_behind(tmp_path, {"in.mlir", "cache"}) == set()


def test_tool_that_prints_nothing(tmp_path):
    """An mlir-opt that exits 0 with no output is named, not fed on to the next tool."""
    fake = tmp_path / "fake-mlir-opt"
    fake.write_text("#!/bin/sh\ncat > /dev/null\nexit 0\n")
    fake.chmod(0o755)
    (tmp_path / "in.mlir").write_text(ADD)
    env = {"GRAPHFUSE_MLIR_OPT": str(fake), "GRAPHFUSE_CACHE_DIR": str(tmp_path / "cache")}
    run = _command(["compile", "in.mlir", "-o", "out.so"], tmp_path, **env)
    assert "Traceback" not in run.stderr
    _assert_one_line(run.returncode, run.stderr, r"fake-mlir-opt exited 0 but printed nothing")
    assert not (tmp_path / "out.so").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    ("argument", "pattern"),
    [
        (42, r"expected an xDSL ModuleOp or the path of a \.mlir or \.onnx file, got int"),
        (ADD, r"got MLIR text where a path is expected: parse it first"),
        ("model.txt", r"model\.txt: not a \.mlir or \.onnx file"),
        ("module_net.txt", r"module_net\.txt: not a \.mlir or \.onnx file"),
        ("func.func @main() {}", r"got MLIR text where a path is expected"),
        ("absent.mlir", r"absent\.mlir: cannot read"),
    ],
)
def test_api_compile_refuses_what_is_not_a_graph(argument, pattern):
    with pytest.raises(GraphfuseError, match=pattern):
        graphfuse.compile(argument)


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"max_depth": 0}, r"max_depth must be at least 1, got 0"),
        ({"max_depth": -1}, r"max_depth must be at least 1, got -1"),
        ({"threads": 0}, r"threads must be at least 1"),
        ({"lanes": 4}, r"lanes must be 8 or 16, got 4"),
        ({"opt_level": 5}, r"opt_level must be 0, 1, 2 or 3, got 5"),
        ({"cpu": ""}, r"cpu is empty"),
        ({"max_depth": "3"}, r"max_depth must be an integer, got '3'"),
        ({"threads": 2.5}, r"threads must be an integer, got 2\.5"),
    ],
)
def test_api_options_checked_where_made(options, pattern):
    with pytest.raises(GraphfuseError, match=pattern):
        CompileOptions(**options)


def test_api_output_checked_before_any_work(tmp_path):
    with pytest.raises(GraphfuseError, match="is a folder"):
        graphfuse.compile(ROOT / "examples" / "resnet_block.mlir", output=tmp_path)
    with pytest.raises(GraphfuseError, match="does not exist"):
        graphfuse.compile(ROOT / "examples" / "resnet_block.mlir", output=tmp_path / "no" / "x.so")
    assert list(tmp_path.iterdir()) == []


def test_api_options_of_the_wrong_type():
    options: Any = {"threads": 1}
    with pytest.raises(GraphfuseError, match="options must be a CompileOptions, got dict"):
        graphfuse.compile(ROOT / "examples" / "resnet_block.mlir", options=options)


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (
            ["compile", "in.mlir", "-o", "/proc/graphfuse-out.so"],
            r"/proc/graphfuse-out\.so: cannot write",
        ),
        (
            ["fuse", "in.mlir", "-o", "/proc/graphfuse-out.mlir"],
            r"/proc/graphfuse-out\.mlir: cannot write",
        ),
    ],
)
def test_output_folder_that_refuses_writes(argv, pattern, tmp_path, monkeypatch, capsys):
    """A folder that exists but takes no files (/proc, even for root): the output is named,
    not the temporary file it was staged in."""
    (tmp_path / "in.mlir").write_text(ADD)
    monkeypatch.chdir(tmp_path)
    status, err = _run_main(argv, capsys)
    _assert_one_line(status, err, r"^graphfuse: error: " + pattern)
    assert _left_behind(tmp_path, {"in.mlir"}) == set()
