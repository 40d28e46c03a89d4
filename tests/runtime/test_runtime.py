"""The compiled-function API, the build's diagnostics and cache, and the compile/run CLI."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.parsing import GraphfuseError
from graphfuse.runtime import ArgumentError
from graphfuse.runtime.build import build_shared_library
from graphfuse.toolchain import ToolchainError
from tests.conftest import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

ADD = """func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.exp %0 : tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}
"""


@pytest.fixture(scope="module")
def add_function():
    return graphfuse.compile(parse(ADD))


def test_compiled_function_computes(add_function):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    y = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    np.testing.assert_allclose(add_function(x, y), np.exp(x + y), rtol=1e-6)


def test_compiled_function_reports_kernels(add_function):
    assert add_function.kernel_count == 1
    assert "@main(2x3xf32, 3xf32) -> (2x3xf32)" in repr(add_function)


def test_compiled_function_wrong_count(add_function):
    with pytest.raises(ArgumentError, match=r"@main takes 2 arrays, got 1"):
        add_function(np.zeros((2, 3), np.float32))


def test_compiled_function_wrong_shape(add_function):
    with pytest.raises(ArgumentError, match=r"argument #1 has shape \(4,\), expected \(3,\)"):
        add_function(np.zeros((2, 3), np.float32), np.zeros(4, np.float32))


def test_compiled_function_wrong_dtype(add_function):
    with pytest.raises(ArgumentError, match=r"argument #0 has dtype float64, expected float32"):
        add_function(np.zeros((2, 3)), np.zeros(3, np.float32))


def test_argument_error_is_a_value_error(add_function):
    with pytest.raises(ValueError):
        add_function()


def test_compile_unknown_target():
    with pytest.raises(GraphfuseError, match=r"unknown target 'tpu'; valid targets: cpu"):
        graphfuse.compile(parse(ADD), target="tpu")


def test_compile_unknown_entry():
    with pytest.raises(GraphfuseError, match=r"no function @forward .*@main"):
        graphfuse.compile(parse(ADD), entry="forward")


def test_compile_accepts_a_path():
    compiled = graphfuse.compile(EXAMPLES / "resnet_block.mlir")
    assert len(compiled.inputs) == 7


def test_build_failure_names_stage_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(tmp_path / "cache"))
    output = tmp_path / "out.so"
    bad = "func.func @f(%a: memref<4xf32>) {\n  %0 = arith.addf %a, %a : f32\n  func.return\n}\n"
    with pytest.raises(ToolchainError, match=r"lowering to the LLVM dialect failed \(mlir-opt\)"):
        build_shared_library(bad, output=output)
    assert not output.exists()
    assert list((tmp_path / "cache").iterdir()) == []


def test_build_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(tmp_path))
    text = "func.func @f() {\n  func.return\n}\n"
    first = build_shared_library(text)
    modified = first.stat().st_mtime_ns
    second = build_shared_library(text)
    assert first == second and second.stat().st_mtime_ns == modified
    assert build_shared_library(text + "\n") != first


# ---- the command line --------------------------------------------------------------------


def graphfuse_cli(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _one_line_error(run: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert run.returncode == 1, run.stdout
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert re.search(pattern, lines[0]), lines[0]


def test_cli_compile_writes_library(tmp_path):
    output = tmp_path / "block.so"
    run = graphfuse_cli("compile", str(EXAMPLES / "resnet_block.mlir"), "-o", str(output))
    assert run.returncode == 0, run.stderr
    assert output.exists() and f"wrote {output}" in run.stdout


@pytest.mark.parametrize(
    ("stage", "pattern"),
    [
        ("graph", r"graph\.fused \"fused_"),
        ("loop", r"loop\.kernel @fused_.*\n(.*\n)*.*loop\.parallel"),
        ("upstream", r"func\.func @main\(.*llvm\.emit_c_interface"),
        ("llvm", r"define void @_mlir_ciface_main\("),
    ],
)
def test_cli_compile_emits_each_stage(stage, pattern, tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    run = graphfuse_cli("compile", str(path), "--emit", stage)
    assert run.returncode == 0, run.stderr
    assert re.search(pattern, run.stdout), run.stdout[:2000]


def test_cli_run_check_prints_max_error():
    run = graphfuse_cli("run", str(EXAMPLES / "resnet_block.mlir"), "--random-inputs", "--check")
    assert run.returncode == 0, run.stderr
    assert re.search(r"check: max abs error \S+, .* \(tolerance 1e-05\): ok", run.stdout)


def test_cli_compile_missing_tool_writes_nothing(tmp_path):
    output = tmp_path / "out.so"
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    env = {"GRAPHFUSE_MLIR_OPT": str(tmp_path / "no-such-mlir-opt")}
    run = graphfuse_cli("compile", str(path), "-o", str(output), env=env)
    _one_line_error(run, r"GRAPHFUSE_MLIR_OPT=.*no-such-mlir-opt does not name an executable")
    assert not output.exists()


def test_cli_compile_failing_stage_writes_nothing(tmp_path):
    failing = tmp_path / "llc"
    failing.write_text("#!/bin/sh\necho 'llc: error: out of registers' >&2\nexit 1\n")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    real_llc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from graphfuse.toolchain import find_tool; print(find_tool('llc').path)",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    # --version must still work for the cache key: answer it like the real llc.
    failing.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec {real_llc} --version; fi\n'
        "echo 'llc: error: out of registers' >&2\nexit 1\n"
    )
    output = tmp_path / "out.so"
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    env = {"GRAPHFUSE_LLC": str(failing), "GRAPHFUSE_CACHE_DIR": str(tmp_path / "cache")}
    run = graphfuse_cli("compile", str(path), "-o", str(output), env=env)
    _one_line_error(run, r"generating machine code failed \(llc\): llc: error: out of registers")
    assert not output.exists()


def test_cli_compile_external_kernel_is_refused(tmp_path):
    path = tmp_path / "ext.mlir"
    path.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = graph.external "my_kernel"(%x) : (tensor<4xf32>) -> tensor<4xf32>\n'
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    output = tmp_path / "out.so"
    run = graphfuse_cli("compile", str(path), "-o", str(output))
    _one_line_error(run, r"'graph\.external' has no loop lowering")
    assert not output.exists()


BIG_ADD = """
func.func @main(%x: tensor<256x256xf32>, %y: tensor<256xf32>) -> tensor<256x256xf32> {
  %0 = graph.add %x, %y : (tensor<256x256xf32>, tensor<256xf32>) -> tensor<256x256xf32>
  func.return %0 : tensor<256x256xf32>
}
"""


def test_threads_run_top_level_loops_in_parallel():
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    serial = lower_to(parse(BIG_ADD), Stage.UPSTREAM, CompileOptions(threads=1))
    threaded = lower_to(parse(BIG_ADD), Stage.UPSTREAM, CompileOptions(threads=2))
    assert "scf.parallel" not in serial
    assert re.search(r"\"?scf\.parallel\"?", threaded) and "scf.reduce" in threaded


def test_threads_count_the_reduction_inside_a_loop():
    """A 2x2 matmul over K = 8192 is small outside but 32k multiply-adds inside (its
    transposed-rhs copy, 16k iterations, stays serial)."""
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    text = """
func.func @main(%a: tensor<2x8192xf32>, %b: tensor<8192x2xf32>) -> tensor<2x2xf32> {
  %0 = graph.matmul %a, %b : (tensor<2x8192xf32>, tensor<8192x2xf32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}
"""
    threaded = lower_to(parse(text), Stage.UPSTREAM, CompileOptions(threads=2))
    assert re.search(r"\"?scf\.parallel\"?", threaded)


def test_threads_leave_small_loops_serial():
    """A 2x3 add costs less than handing it to worker threads."""
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    threaded = lower_to(parse(ADD), Stage.UPSTREAM, CompileOptions(threads=2))
    assert "scf.parallel" not in threaded


def test_threads_must_be_positive():
    from graphfuse.compiler import CompileOptions

    with pytest.raises(GraphfuseError, match=r"threads must be at least 1, got 0"):
        graphfuse.compile(parse(ADD), options=CompileOptions(threads=0))


def test_threaded_and_serial_builds_agree():
    from graphfuse.compiler import CompileOptions

    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    y = np.ones(256, np.float32)
    one = graphfuse.compile(parse(BIG_ADD), options=CompileOptions(threads=1))(x, y)
    two = graphfuse.compile(parse(BIG_ADD), options=CompileOptions(threads=2))(x, y)
    np.testing.assert_array_equal(one, two)


def test_out_receives_the_results(add_function):
    x = np.zeros((2, 3), np.float32)
    y = np.zeros(3, np.float32)
    out = np.full((2, 3), 7.0, np.float32)
    result = add_function(x, y, out=out)
    assert result is out
    np.testing.assert_array_equal(out, np.ones((2, 3), np.float32))


def test_out_of_wrong_shape_is_refused(add_function):
    x, y = np.zeros((2, 3), np.float32), np.zeros(3, np.float32)
    with pytest.raises(ArgumentError, match=r"out #0 must be a writable C-contiguous float32"):
        add_function(x, y, out=np.empty((3, 2), np.float32))


# A row sum with a costly epilogue (loop-split-epilogues applies; matmuls are tiled by
# loop-tile-matmul instead, which applies their epilogue per tile).
MATMUL_TANH = """func.func @main(%a: tensor<512x48x64xf32>) -> tensor<512x48xf32> {
  %0 = graph.reduce_sum %a axes = [2] : tensor<512x48x64xf32> -> tensor<512x48xf32>
  %1 = graph.tanh %0 : tensor<512x48xf32>
  func.return %1 : tensor<512x48xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_split_epilogue_rows_are_private_to_each_thread(threads):
    """The epilogue's row buffer is per outer iteration: parallel rows never share it."""
    from graphfuse.compiler import CompileOptions, Stage, lower_to
    from graphfuse.testing.compare import compile_and_compare

    module = parse(MATMUL_TANH)
    assert "memref.alloca_scope" in lower_to(parse(MATMUL_TANH), Stage.UPSTREAM)
    for seed in range(5):
        compile_and_compare(module, seed=seed, options=CompileOptions(threads=threads))


def _matmul_by_constant(w: np.ndarray) -> str:
    hex_bytes = w.astype(np.float32).tobytes().hex().upper()
    return f"""
func.func @main(%x: tensor<8x128xf32>) -> tensor<8x256xf32> {{
  %w = graph.constant dense<"0x{hex_bytes}"> : tensor<128x256xf32>
  %y = graph.matmul %x, %w : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}}
"""


def test_large_constants_are_loaded_not_built_in(tmp_path):
    """A 128 KiB weight stays out of the library (it is copied in after loading), unless
    the library is written out to stand alone; two graphs differing only in their
    weights each keep their own."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((2, 128, 256)).astype(np.float32)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    first = graphfuse.compile(parse(_matmul_by_constant(w1)))
    second = graphfuse.compile(parse(_matmul_by_constant(w2)))
    np.testing.assert_allclose(first(x), x @ w1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second(x), x @ w2, rtol=1e-4, atol=1e-4)
    standalone = graphfuse.compile(parse(_matmul_by_constant(w1)), output=tmp_path / "w.so")
    np.testing.assert_allclose(standalone(x), x @ w1, rtol=1e-4, atol=1e-4)
    assert (
        first.library_path.stat().st_size + w1.nbytes // 2 < standalone.library_path.stat().st_size
    )


def test_threaded_kernels_call_graphfuse_parallel_runtime():
    """scf.parallel becomes an OpenMP loop, dynamically scheduled, whose runtime calls are
    graphfuse's own (no libomp entry point is left to bind to another runtime in the
    process)."""
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    llvm_ir = lower_to(parse(BIG_ADD), Stage.LLVM, CompileOptions(threads=2))
    assert "@graphfuse_kmpc_fork_call(" in llvm_ir
    assert "graphfuse_kmpc_dispatch_next_8u" in llvm_ir
    assert "__kmpc_" not in llvm_ir


ROWS_3 = """
func.func @main(%x: tensor<3x16384xf32>, %y: tensor<16384xf32>) -> tensor<3x16384xf32> {
  %0 = graph.mul %x, %y : (tensor<3x16384xf32>, tensor<16384xf32>) -> tensor<3x16384xf32>
  %1 = graph.tanh %0 : tensor<3x16384xf32>
  func.return %1 : tensor<3x16384xf32>
}
"""


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_teams_larger_than_the_loop_or_the_machine(threads):
    """3 parallel rows on 2, 3 and 5 workers (more than this machine's cores): members
    without a row get an empty range, and every row is computed once."""
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    assert "scf.parallel" in lower_to(parse(ROWS_3), Stage.UPSTREAM, CompileOptions(threads=2))
    rng = np.random.default_rng(threads)
    x = rng.standard_normal((3, 16384)).astype(np.float32)
    y = rng.standard_normal(16384).astype(np.float32)
    compiled = graphfuse.compile(parse(ROWS_3), options=CompileOptions(threads=threads))
    out = np.full((3, 16384), np.nan, np.float32)
    for _ in range(20):  # regions back to back, with the workers still spinning
        compiled(x, y, out=out)
        np.testing.assert_allclose(out, np.tanh(x * y), rtol=1e-6, atol=1e-6)


def test_threaded_functions_called_from_several_threads_at_once():
    """Application threads calling threaded kernels together: one gets the worker pool,
    the others run their loops alone (never waiting on a busy pool); all results right."""
    from concurrent.futures import ThreadPoolExecutor

    from graphfuse.compiler import CompileOptions

    compiled = graphfuse.compile(parse(BIG_ADD), options=CompileOptions(threads=2))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(8)]
    y = rng.standard_normal(256).astype(np.float32)

    def run(x: np.ndarray) -> bool:
        return all(np.array_equal(compiled(x, y), x + y) for _ in range(50))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, inputs))


def test_threaded_function_runs_in_a_forked_child():
    """After fork() only the calling thread exists in the child: the runtime forgets the
    parent's workers and starts its own instead of waiting for them forever."""
    import os
    import signal

    from graphfuse.compiler import CompileOptions

    compiled = graphfuse.compile(parse(BIG_ADD), options=CompileOptions(threads=2))
    x = np.random.default_rng(2).standard_normal((256, 256)).astype(np.float32)
    y = np.ones(256, np.float32)
    np.testing.assert_array_equal(compiled(x, y), x + y)  # the parent's pool is running
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        signal.alarm(20)
        ok = all(np.array_equal(compiled(x, y), x + y) for _ in range(10))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"


def test_openmp_loops_the_runtime_cannot_schedule_are_refused():
    """The runtime implements dynamic schedules only: every converted loop gets one, and a
    loop printed otherwise is a one-line build error, not a library that fails to load."""
    from graphfuse.runtime.parallel import schedule_dynamically
    from graphfuse.toolchain import ToolchainError

    plain = "omp.wsloop {\n  omp.loop_nest ...\n}\nomp.wsloop {\n}"
    assert schedule_dynamically(plain).count("omp.wsloop schedule(dynamic) {") == 2
    with pytest.raises(ToolchainError, match=r"OpenMP loop graphfuse's parallel runtime cannot"):
        schedule_dynamically("omp.wsloop schedule(static) {\n}")


def test_a_threaded_library_written_out_carries_its_runtime(tmp_path, monkeypatch):
    """`output=` with threads: the parallel runtime is copied beside the library, which
    finds it there ($ORIGIN), so the pair still loads and runs moved elsewhere with the
    build cache gone."""
    from graphfuse.compiler import CompileOptions

    cache = tmp_path / "cache"
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(cache))
    built = tmp_path / "built"
    built.mkdir()
    graphfuse.compile(parse(BIG_ADD), options=CompileOptions(threads=2), output=built / "k.so")
    runtimes = sorted(p.name for p in built.iterdir() if p.name.startswith("libgraphfuse_parallel"))
    assert len(runtimes) == 1
    moved = tmp_path / "elsewhere"
    built.rename(moved)
    for path in cache.iterdir():
        path.unlink()
    script = "import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\nprint(hasattr(lib, 'k_main'))\n"
    run = subprocess.run(
        [sys.executable, "-c", script, str(moved / "k.so")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stdout.strip() == "True", run.stderr


def test_argument_and_result_attributes_are_kept_off_the_buffers():
    """An entry with argument and result attributes (as TOSA and StableHLO exporters write
    them) compiles: the inputs keep theirs, the output buffer gets none."""
    compiled = graphfuse.compile(
        parse(
            """
func.func @main(%x: tensor<4xf32> {foo.bar = "x"}, %y: tensor<4xf32>) -> (tensor<4xf32> {foo.r = 1 : i64}) {
  %0 = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = graph.neg %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}"""
        )
    )
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    np.testing.assert_array_equal(compiled(x, y), -(x + y))


SCRATCHED = """
func.func @main(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> tensor<64xf32> {
  %0 = graph.matmul %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %1 = graph.tanh %0 : tensor<64x256xf32>
  %2 = graph.matmul %1, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %3 = graph.reduce_sum %2 axes = [1] : tensor<64x256xf32> -> tensor<64xf32>
  func.return %3 : tensor<64xf32>
}"""


@pytest.mark.parametrize("written", [False, True])
def test_calls_at_once_from_several_threads_each_get_their_own_scratch(tmp_path, written):
    """Kernels with intermediate buffers (scratch) and packed weights, called from four
    threads at once with different inputs: every result right (each call running at once
    takes its own scratch, or its own context of a written library)."""
    from concurrent.futures import ThreadPoolExecutor

    from graphfuse.compiler import CompileOptions

    output = tmp_path / "libs.so" if written else None
    compiled = graphfuse.compile(parse(SCRATCHED), options=CompileOptions(threads=1), output=output)
    assert compiled.scratch, "the case must have scratch buffers"
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    inputs = [rng.standard_normal((64, 256)).astype(np.float32) for _ in range(4)]
    expected = [(np.tanh(x @ w) @ w).sum(axis=1) for x in inputs]

    def run(k: int) -> bool:
        return all(
            np.allclose(compiled(inputs[k], w), expected[k], rtol=1e-4, atol=1e-3)
            for _ in range(40)
        )

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(4)))
