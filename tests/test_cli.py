"""The `graphfuse` command: one-line diagnostics for bad input, and its normal output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def graphfuse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_one_line_error(run: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert re.search(pattern, lines[0]), lines[0]


BAD_INPUTS = {
    "malformed": (
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = graph.exp %x : tensor<4xf32\n",
        r"^graphfuse: error: .*bad\.mlir:3:1: Expected '>' after builtin parameter list$",
    ),
    "unknown_op": (
        "func.func @main(%x: tensor<4xf32>) {\n  %0 = graph.frobnicate %x : tensor<4xf32>\n  func.return\n}\n",
        r"bad\.mlir:2:\d+: Operation graph.frobnicate is not registered",
    ),
    "wrong_shapes": (
        "func.func @main(%x: tensor<4x8xf32>, %y: tensor<3xf32>) {\n"
        "  %0 = graph.add %x, %y : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>\n"
        "  func.return\n}\n",
        r"bad\.mlir:2:3: 'graph\.add' op operand shapes 4x8 and 3 are not broadcast-compatible",
    ),
    "wrong_element_type": (
        "func.func @main(%x: tensor<4xf32>, %y: tensor<4xi32>) {\n"
        "  %0 = graph.add %x, %y : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>\n"
        "  func.return\n}\n",
        r"bad\.mlir:2:3: 'graph\.add' op attribute f32 expected from variable 'E', but got i32",
    ),
    "nested_in_fused": (
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = graph.fused "k" (%x) kind = elemwise : (tensor<4xf32>) -> tensor<4xf32> {\n'
        "  ^bb0(%a: tensor<4xf32>):\n"
        "    %t = graph.transpose %a perm = [1] : tensor<4xf32> -> tensor<4xf32>\n"
        "    graph.yield %t : tensor<4xf32>\n  }\n"
        "  func.return %0 : tensor<4xf32>\n}\n",
        r"bad\.mlir:4:5: 'graph\.transpose' op perm \[1\] is not a permutation",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", ["stats", "run"])
def test_cli_bad_input_one_line(case, command, tmp_path):
    text, pattern = BAD_INPUTS[case]
    bad = tmp_path / "bad.mlir"
    bad.write_text(text)
    _assert_one_line_error(graphfuse(command, str(bad)), pattern)


def test_cli_missing_file(tmp_path):
    missing = tmp_path / "missing.mlir"
    _assert_one_line_error(graphfuse("stats", str(missing)), r"missing\.mlir: cannot read")


def test_cli_run_unknown_entry():
    run = graphfuse("run", str(EXAMPLES / "resnet_block.mlir"), "--entry", "forward")
    _assert_one_line_error(run, r"no function @forward \(functions: @main\)")


def test_cli_stats_counts_transformer_ops():
    run = graphfuse("stats", str(EXAMPLES / "transformer_block.mlir"))
    assert run.returncode == 0, run.stderr
    text = (EXAMPLES / "transformer_block.mlir").read_text()
    # Independent count: ops written in the file, one per `= graph.` line.
    written = re.findall(r"= (graph\.\w+)", text)
    assert f"{len(written)} ops" in run.stdout
    for name in set(written):
        assert re.search(rf"{re.escape(name)}\s+{written.count(name)}\n", run.stdout), name
    # 8 matmuls are out-elemwise-fusable; layer_norm x2, softmax, gelu are compound (opaque).
    assert re.search(r"out_elemwise_fusable\s+8\n", run.stdout)
    assert re.search(r"opaque\s+4\n", run.stdout)


def test_cli_run_prints_result_summary():
    run = graphfuse("run", str(EXAMPLES / "transformer_block.mlir"), "--seed", "3")
    assert run.returncode == 0, run.stderr
    assert re.search(r"result #0: 1x128x256 float32 mean=", run.stdout)


def test_cli_doctor_lists_every_tool():
    run = graphfuse("doctor")
    for tool in ("mlir-opt", "mlir-translate", "opt", "llc", "cc", "ptxas"):
        assert re.search(rf"^{tool}\s", run.stdout, re.MULTILINE), tool
    assert "LLVM version 22.1.8" in run.stdout
    assert "NVPTX target: yes" in run.stdout


def test_cli_fuse_writes_module_and_dot(tmp_path):
    out, dot = tmp_path / "fused.mlir", tmp_path / "fused.dot"
    run = graphfuse(
        "fuse", str(EXAMPLES / "resnet_block.mlir"), "-o", str(out), "--dot", str(dot), "--check"
    )
    assert run.returncode == 0, run.stderr
    # Opening batch-norm rounds differently from the compound op: close, not bit-equal.
    assert "check: @main matches the unfused results, relative error" in run.stdout
    fused = out.read_text()
    kernels = re.findall(r'graph\.fused "(\w+)"', fused)
    # conv2d + opened batch-norm + relu pre-formed by a pattern; the second block's conv
    # grew its epilogue (batch-norm, residual add, relu) in the partitioner, and the
    # refinement's priority fusion pulled in the per-channel scale and bias it reads
    # (mul, reshape; reshape), which the TVM rules leave as kernels of their own.
    assert kernels.count("fused_conv2d_sub_mul_add_relu") == 1
    assert kernels.count("fused_conv2d_mul_reshape_reshape_sub_mul_add_add_relu") == 1
    picture = dot.read_text()
    assert picture.startswith('digraph "main"')
    assert picture.count("subgraph cluster_") == len(kernels)
    # The residual add reads the block input %x (drawn as arg0) inside the add_relu cluster.
    assert re.search(
        r'label="fused_conv2d_sub_mul_add_relu \(out_elemwise_fusable\)";\n\s+n\d+ \[label="conv2d"\]',
        picture,
    )


def test_cli_fuse_bad_input_writes_nothing(tmp_path):
    text, pattern = BAD_INPUTS["wrong_shapes"]
    bad = tmp_path / "bad.mlir"
    bad.write_text(text)
    out, dot = tmp_path / "out.mlir", tmp_path / "out.dot"
    run = graphfuse("fuse", str(bad), "-o", str(out), "--dot", str(dot))
    _assert_one_line_error(run, pattern)
    assert not out.exists() and not dot.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_cli_fuse_explain_and_report_partition_only():
    run = graphfuse(
        "fuse",
        str(EXAMPLES / "resnet_block.mlir"),
        "--explain",
        "--report",
        "--check",
        "--no-decompose",
        "--no-simplify",
        "--no-patterns",
    )
    assert run.returncode == 0, run.stderr
    assert "// graph-fuse: @main: [phase 0] graph.add %sum -> graph.relu %out: fused" in run.stdout
    assert re.search(r"// before: @main: 7 kernels, 7 ops;", run.stdout)
    assert re.search(r"// after:  @main: 6 kernels, 7 ops;", run.stdout)
    assert "// check: @main gives bit-identical results before and after (1 results)" in run.stdout
    assert "func.func @main" in run.stdout


@pytest.mark.parametrize(
    ("rules", "pattern"),
    [
        ("unknown_op.mlir", r"unknown_op\.mlir:4:3: PDL rule names unknown op 'graph\.expp'$"),
        ("bad_syntax.mlir", r"bad_syntax\.mlir:4:51: Expected '\)'$"),
        ("missing.mlir", r"missing\.mlir: cannot read PDL rules"),
    ],
)
def test_cli_fuse_bad_rules_file_one_line(rules, pattern, tmp_path):
    out = tmp_path / "out.mlir"
    rules_path = ROOT / "lit_tests" / "passes" / "rewrites" / "Inputs" / rules
    run = graphfuse(
        "fuse", str(EXAMPLES / "resnet_block.mlir"), "--rules", str(rules_path), "-o", str(out)
    )
    _assert_one_line_error(run, pattern)
    assert not out.exists()


def test_cli_fuse_user_rules_apply(tmp_path):
    source = tmp_path / "in.mlir"
    source.write_text(
        "func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
        "  %l = graph.log %x : tensor<8xf32>\n  %e = graph.exp %l : tensor<8xf32>\n"
        "  func.return %e : tensor<8xf32>\n}\n"
    )
    rules_path = ROOT / "lit_tests" / "passes" / "rewrites" / "Inputs" / "exp_of_log.mlir"
    run = graphfuse("fuse", str(source), "--rules", str(rules_path))
    assert run.returncode == 0, run.stderr
    assert "graph.exp" not in run.stdout and "graph.log" not in run.stdout
    assert "func.return %x" in run.stdout


def test_cli_fuse_multi_block_function_is_refused(tmp_path):
    source = tmp_path / "cf.mlir"
    source.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %e = graph.exp %x : tensor<4xf32>\n  cf.br ^next\n"
        "^next:\n  func.return %e : tensor<4xf32>\n}\n"
    )
    out = tmp_path / "out.mlir"
    run = graphfuse("fuse", str(source), "-o", str(out))
    _assert_one_line_error(run, r"@main has 2 blocks; graph passes handle functions of one block")
    assert not out.exists()


def test_compile_nvptx_writes_ptx_per_kernel(tmp_path: Path) -> None:
    folder = tmp_path / "tb.nvptx"
    run = graphfuse(
        "compile", str(EXAMPLES / "transformer_block.mlir"), "--target", "nvptx", "-o", str(folder)
    )
    assert run.returncode == 0, run.stderr
    # 11 kernel launches, 8 distinct kernels: the Q, K and V projections share one, the
    # two layer norms another (loop-dedupe-kernels); the heads' reshapes and transposes are
    # read in place by the attention matmuls and the output projection.
    assert "8 kernels as PTX 8.0 for sm_90" in run.stdout
    files = sorted(p.name for p in folder.iterdir())
    assert len(files) == 9 and "module.mlir" in files
    for name in files:
        if name.endswith(".ptx"):
            text = (folder / name).read_text()
            assert ".target sm_90" in text and f".entry {name[:-4]}(" in text
    assert (folder / "module.mlir").read_text().count('"gpu.launch_func"') >= 11


@pytest.mark.parametrize(
    ("option", "pattern"),
    [
        (("--chip", "sm_99"), r"unknown GPU chip 'sm_99'; valid chips: sm_70, .*, sm_90, "),
        (("--ptx-isa", "7.0"), r"unsupported PTX ISA version '7\.0'; valid versions: 8\.0, "),
        (("--block-size", "100"), r"block size 100 is invalid: use a multiple of 32"),
        (("--emit", "llvm"), r"--target nvptx emits gpu or ptx, not llvm"),
    ],
)
def test_compile_nvptx_bad_options(option: tuple[str, str], pattern: str, tmp_path: Path) -> None:
    folder = tmp_path / "out.nvptx"
    run = graphfuse(
        "compile",
        str(EXAMPLES / "resnet_block.mlir"),
        "--target",
        "nvptx",
        "-o",
        str(folder),
        *option,
    )
    _assert_one_line_error(run, pattern)
    assert not folder.exists()


def test_run_on_cuda_without_a_gpu_is_one_line() -> None:
    run = graphfuse("run", str(EXAMPLES / "resnet_block.mlir"), "--target", "cuda")
    if run.returncode == 0:
        pytest.skip("a GPU is present: the run succeeded")
    _assert_one_line_error(run, r"^graphfuse: error: target 'cuda'")


def test_cli_run_lanes_16_gives_the_same_results():
    """--lanes 16 builds the AVX-512 geometry (run here on AVX2 halves): same summary as 8."""
    runs = [
        graphfuse("run", str(EXAMPLES / "resnet_block.mlir"), "--seed", "3", "--lanes", lanes)
        for lanes in ("8", "16")
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    wide, narrow = (run.stdout.splitlines()[1] for run in runs)
    assert wide == narrow and "mean=" in wide
    assert runs[0].stdout.splitlines()[0] != runs[1].stdout.splitlines()[0]  # two libraries


def test_cli_start_up_leaves_the_interpreters_unloaded() -> None:
    """`graphfuse --help` and the pass registry import no interpreter: xDSL's interpreter
    framework alone costs about 0.2 s of start-up, and only folding and PDL rules need it."""
    probe = (
        "import sys, graphfuse.cli, graphfuse.pipelines, graphfuse.passes.fusion.graph_fuse; "
        "print(sorted(m for m in sys.modules if m.startswith('xdsl.interpreters') "
        "or m == 'graphfuse.dialects.graph.interpreter'))"
    )
    assert _printed_by(probe) == "[]"


def _printed_by(probe: str) -> str:
    """What a fresh interpreter running `probe` prints (it must succeed)."""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_cli_start_up_imports_neither_xdsl_nor_numpy() -> None:
    """Building the whole parser and printing every command's usage loads no xDSL and no
    NumPy: that is what keeps `graphfuse --help` fast (the commands import them when they
    run). Checked by the modules loaded, never by a timing."""
    probe = (
        "import sys, contextlib, io, graphfuse.cli as cli\n"
        "for argv in (['--help'], ['compile', '--help'], ['fuse', '--help'], ['run', '--help']):\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        cli.main(argv)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'xdsl', 'numpy'}))"
    )
    assert _printed_by(probe) == "[]"


def test_cli_defaults_agree_with_the_compiler() -> None:
    """The values the parser shows (graphfuse.options) are the ones a build uses."""
    from graphfuse import options as defaults
    from graphfuse.compiler import AT_LEAST, CompileOptions
    from graphfuse.lowering.gpu.convert_loop_to_gpu import ConvertLoopToGpuPass
    from graphfuse.passes.fusion.graph_fuse import LEAST, GraphFusePass
    from graphfuse.runtime.cpu_tools import CpuTarget
    from graphfuse.runtime.nvptx import DEFAULT_CHIP, NvptxTarget

    options = CompileOptions()
    assert options.max_depth == GraphFusePass().max_depth == defaults.MAX_DEPTH
    assert AT_LEAST == defaults.AT_LEAST
    assert LEAST["max_depth"] == defaults.AT_LEAST["max_depth"]
    assert options.nvptx == NvptxTarget(chip=defaults.GPU_CHIP, ptx_isa=defaults.PTX_ISA)
    assert DEFAULT_CHIP == defaults.GPU_CHIP
    assert options.block_size == ConvertLoopToGpuPass().block_size == defaults.BLOCK_SIZE
    assert (options.cpu, options.opt_level) == (CpuTarget.cpu, CpuTarget.opt_level)


def test_cli_help_shows_the_defaults() -> None:
    run = graphfuse("compile", "--help")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "(default: sm_90, or the GPU's own)" in text
    assert "PTX ISA version (default: 8.0)" in text and "(default: 256)" in text


TOSA_MODELS = ROOT / "examples" / "tosa"


def test_cli_import_tosa_prints_graph_ops():
    run = graphfuse("import", str(TOSA_MODELS / "mlp.tosa.mlir"))
    assert run.returncode == 0, run.stderr
    assert "func.func @forward" in run.stdout and "graph.matmul" in run.stdout
    assert "tosa." not in run.stdout


def test_cli_run_tosa_random_inputs_check(tmp_path: Path):
    """A TOSA file whose name says nothing (`.mlir`) is recognised by its ops."""
    plain = tmp_path / "cnn.mlir"
    plain.write_text((TOSA_MODELS / "cnn.tosa.mlir").read_text())
    for path in (TOSA_MODELS / "cnn.tosa.mlir", plain):
        run = graphfuse("run", str(path), "--random-inputs", "--check")
        assert run.returncode == 0, run.stderr
        assert re.search(r"result #0: 1x10 float32", run.stdout)
        assert re.search(r"check: max abs error .*: ok", run.stdout)


def test_cli_import_and_run_stablehlo(tmp_path: Path):
    """jax's lowered text through `graphfuse import` and `graphfuse run --check`."""
    pytest.importorskip("graphfuse.frontend.stablehlo")
    jax = pytest.importorskip("jax")
    import numpy as np

    def f(x, w):
        return jax.numpy.tanh(x @ w) * 2.0

    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    path = tmp_path / "f.stablehlo.mlir"
    path.write_text(jax.jit(f).lower(x, w).as_text())
    run = graphfuse("import", str(path))
    assert run.returncode == 0, run.stderr
    assert "graph.matmul" in run.stdout and "graph.tanh" in run.stdout
    run = graphfuse("run", str(path), "--check")
    assert run.returncode == 0, run.stderr
    assert re.search(r"check: max abs error .*: ok", run.stdout)
