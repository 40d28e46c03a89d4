"""graphfuse profile: per-kernel timers in an instrumented build, the report, the trace,
--by-op, and bad input. The machine's roofline is stubbed (measuring it takes a second)
except where its measurement and cache are tested."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.cli import main
from graphfuse.compiler import CompileOptions, Stage, fuse, lower
from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.profiling import machine as machine_module
from graphfuse.profiling import runtime
from graphfuse.profiling.builds import Builds, build
from graphfuse.profiling.instrument import ENTER, EXIT, RUN_BEGIN, RUN_END, instrument
from graphfuse.profiling.machine import Machine
from graphfuse.profiling.measure import measure
from graphfuse.profiling.report import kernel_rows
from graphfuse.runtime.kernel_split import split_kernels
from graphfuse.testing.onnx_models import model as onnx_model
from tests.conftest import graphfuse_command, parse

ATTENTION = """func.func @main(%x: tensor<32x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<64x64xf32>, %bk: tensor<64xf32>) -> tensor<32x64xf32> {
  %q0 = graph.matmul %x, %wq : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32>
  %q = graph.add %q0, %bq : (tensor<32x64xf32>, tensor<64xf32>) -> tensor<32x64xf32>
  %k0 = graph.matmul %x, %wk : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32>
  %k = graph.add %k0, %bk : (tensor<32x64xf32>, tensor<64xf32>) -> tensor<32x64xf32>
  %t = graph.transpose %k perm = [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  %s = graph.matmul %q, %t : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
  %p = graph.softmax %s axis = -1 : tensor<32x32xf32>
  %o = graph.matmul %p, %q : (tensor<32x32xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  func.return %o : tensor<32x64xf32>
}
"""
"""Q and K projections (identical kernels: one function, two call sites), scores, softmax."""

STUB = Machine("test cpu", 1, 20e9, 10e12, "stub", "stub", "now")
"""A peak no core reaches (a Zen 5 core ran this graph's matmul at 213 GFLOP/s, past the
100 GFLOP/s this stub had), so the table has no note of kernels faster than the peak."""
OPTIONS = CompileOptions(threads=1)
RUNS = 40


@pytest.fixture(autouse=True)
def stub_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "graphfuse.profiling.command.machine", lambda threads, remeasure=False: (STUB, False)
    )


@pytest.fixture(scope="module")
def attention() -> tuple[Builds, list[np.ndarray]]:
    module = parse(ATTENTION)
    inputs = reference.random_inputs(reference.find_function(module, "main"), 0)
    return build(module, "main", OPTIONS), inputs


@pytest.fixture(scope="module")
def attention_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "attention.mlir"
    path.write_text(ATTENTION)
    return path


def _fused_count(text: str) -> int:
    module = parse(text)
    fuse(module, OPTIONS)
    return sum(isinstance(op, graph.FusedOp) for op in module.walk())


def test_profile_one_row_per_kernel_function(attention):
    builds, inputs = attention
    counters = measure(builds, inputs, RUNS, 1.0).counters
    rows = kernel_rows(builds.sites, counters)
    assert len(builds.sites) == _fused_count(ATTENTION) == 5
    assert sorted(r.name for r in rows) == sorted({s.kernel for s in builds.sites})
    assert len(rows) == 4  # the two projections share one kernel function
    assert {r.name: r.calls for r in rows}["fused_matmul_add"] == 2 * RUNS
    assert sum(r.calls for r in rows) == RUNS * len(builds.sites)
    assert [r.total_ns for r in rows] == sorted((r.total_ns for r in rows), reverse=True)


def test_profile_kernel_times_add_up_to_the_run(attention):
    builds, inputs = attention
    counters = measure(builds, inputs, 200, 1.0).counters
    assert counters.runs == 200
    kernels = sum(counters.totals_ns)
    assert 0.9 * counters.run_total_ns <= kernels <= counters.run_total_ns


def test_profile_instrumented_build_computes_the_same(attention):
    builds, inputs = attention
    normal, timed = builds.normal(*inputs), builds.instrumented(*inputs)
    np.testing.assert_array_equal(normal, timed)
    (expected,) = reference.run(parse(ATTENTION), "main", *inputs)
    np.testing.assert_allclose(timed, expected, rtol=1e-4, atol=1e-5)


def test_profile_builds_share_kernels_not_libraries(attention):
    """The normal build is the library graphfuse.compile builds; the instrumented one is
    another library whose kernel modules are unchanged."""
    builds, _ = attention
    compiled = graphfuse.compile(parse(ATTENTION), options=OPTIONS)
    assert compiled.library_path == builds.normal.library_path
    assert builds.instrumented.library_path != builds.normal.library_path


def test_instrument_changes_the_entry_only():
    module = parse(ATTENTION)
    lower(module, Stage.UPSTREAM, OPTIONS)
    timed = module.clone()
    callees = instrument(timed, "main")
    assert callees == [
        "fused_matmul_add",
        "fused_matmul_add",
        "fused_transpose_matmul",
        "fused_reduce_max_sub_exp_reduce_sum_div",
        "fused_matmul",
    ]
    plain, instrumented = split_kernels(module), split_kernels(timed)
    assert {k: str(m) for k, m in plain.kernels.items()} == {
        k: str(m) for k, m in instrumented.kernels.items()
    }
    entry = str(instrumented.entry)
    assert entry.count(f"func.call @{ENTER}") == entry.count(f"func.call @{EXIT}") == 5
    assert entry.count(f"@{RUN_BEGIN}()") == entry.count(f"@{RUN_END}()") == 2  # decl + call
    assert ENTER not in str(plain.entry)


def test_profile_command_prints_the_table(attention_file, capsys):
    assert main(["profile", str(attention_file), "--runs", "5", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "5 kernel calls per run (4 kernel functions), 5 timed runs" in out
    assert "machine: test cpu, 1 thread: memory bandwidth 20 GB/s" in out
    table = out[out.index(" share") : out.index("coverage:")].splitlines()[1:]
    assert len(table) == 4
    assert any(line.endswith("fused_matmul_add") and "    10 " in line for line in table)
    assert "overhead: whole run timed from Python" in out
    assert re.search(r"the timers cost \d+ ns a kernel call here, [\d.]+ us a run", out)


def test_profile_notes_kernels_faster_than_the_peak(attention_file, capsys, monkeypatch):
    """Cached machine figures below what the kernels reach (taken on a busy machine) get
    a note under the table that says so and how to take them again."""
    low = Machine("test cpu", 1, 20e9, 1e3, "stub", "stub", "now")
    monkeypatch.setattr(
        "graphfuse.profiling.command.machine", lambda threads, remeasure=False: (low, False)
    )
    assert main(["profile", str(attention_file), "--runs", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "4 kernel(s) faster than the measured peak FLOP rate" in out
    assert "--remeasure takes them again" in out


def test_profile_trace_has_one_event_per_kernel_call(attention_file, tmp_path, capsys):
    out = tmp_path / "trace.json"
    argv = ["profile", str(attention_file), "--runs", "3", "--threads", "1", "--trace", str(out)]
    assert main(argv) == 0
    events = json.loads(out.read_text())["traceEvents"]
    calls = [e for e in events if e.get("cat") == "kernel"]
    runs = [e for e in events if e.get("cat") == "run"]
    assert len(calls) == 3 * 5 and len(runs) == 3
    for event in calls + runs:
        assert event["ph"] == "X" and event["dur"] >= 0 and event["ts"] >= 0
        assert {"pid", "tid", "name", "args"} <= event.keys()
    assert {e["name"] for e in calls} == {
        "fused_matmul_add",
        "fused_transpose_matmul",
        "fused_reduce_max_sub_exp_reduce_sum_div",
        "fused_matmul",
    }
    first = next(e for e in calls if e["name"] == "fused_matmul_add")
    assert first["args"]["flops"] == 2 * 32 * 64 * 64 + 32 * 64
    assert first["args"]["ops"] == ["matmul", "add"]
    run = runs[0]
    inside = [e for e in calls if e["args"]["run"] == 0]
    assert all(
        run["ts"] <= e["ts"] and e["ts"] + e["dur"] <= run["ts"] + run["dur"] for e in inside
    )
    assert f"trace: wrote {out} (3 runs of 3: 18 events)" in capsys.readouterr().out


def _named_onnx_model(path: Path) -> list[str]:
    """An MLP whose node outputs end in `_<n>` (as torch.onnx names them); returns the node
    names."""
    rng = np.random.default_rng(0)
    weights = {
        "w_1": rng.standard_normal((16, 32)).astype(np.float32),
        "b_1": rng.standard_normal(32).astype(np.float32),
        "w_2": rng.standard_normal((32, 8)).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w_1"], ["linear_1"], name="node_linear_1"),
        helper.make_node("Add", ["linear_1", "b_1"], ["add_1"], name="node_add_1"),
        helper.make_node("Relu", ["add_1"], ["relu_1"], name="node_relu_1"),
        helper.make_node("MatMul", ["relu_1", "w_2"], ["linear_2"], name="node_linear_2"),
        helper.make_node("Softmax", ["linear_2"], ["y"], name="node_softmax", axis=-1),
    ]
    inputs = {"x": np.zeros((4, 16), np.float32)}
    built = onnx_model(nodes, inputs, {"y": (TensorProto.FLOAT, [4, 8])}, weights)
    onnx.save(built, str(path))
    return [node.name for node in nodes]


def test_profile_by_op_names_the_onnx_nodes(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    names = _named_onnx_model(path)
    assert main(["profile", str(path), "--runs", "5", "--threads", "1", "--by-op"]) == 0
    out = capsys.readouterr().out
    rows = out[out.index("by op:") :].splitlines()[2:]
    labels = {line.split()[4] for line in rows}
    assert labels == set(names)
    assert "(unattributed)" not in out
    shares = sum(float(line.split()[0].rstrip("%")) for line in rows)
    coverage = float(out.split("inside the instrumented entry: ")[1].split("%")[0])
    assert shares == pytest.approx(coverage, abs=0.5)


def test_profile_by_op_names_mlir_ops(attention_file, capsys):
    assert main(["profile", str(attention_file), "--runs", "5", "--threads", "1", "--by-op"]) == 0
    out = capsys.readouterr().out
    assert "rows are ops of the .mlir entry" in out
    rows = out[out.index("by op:") :].splitlines()[2:]
    labels = {line.split()[4] for line in rows}
    assert labels == {"%q0", "%q", "%k0", "%k", "%t", "%s", "%p", "%o"}


def test_run_profile_prints_the_table_after_the_results(attention_file, capsys):
    assert main(["run", str(attention_file), "--profile", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert out.index("result #0:") < out.index("graphfuse run --profile attention.mlir @main")
    assert "coverage: kernels" in out


def test_machine_is_measured_once_per_cpu_and_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(tmp_path))
    taken: list[tuple[str, int]] = []

    def measured(cpu: str, threads: int) -> Machine:
        taken.append((cpu, threads))
        return Machine(cpu, threads, 1e10, 1e11, "stub", "stub", "now")

    monkeypatch.setattr(machine_module, "measure", measured)
    monkeypatch.setattr(machine_module, "cpu_model", lambda: "CPU A")
    assert machine_module.machine(2)[1] is True
    assert machine_module.machine(2) == (
        Machine("CPU A", 2, 1e10, 1e11, "stub", "stub", "now"),
        False,
    )
    assert machine_module.machine(1)[1] is True
    monkeypatch.setattr(machine_module, "cpu_model", lambda: "CPU B")
    assert machine_module.machine(2)[1] is True
    assert machine_module.machine(2, remeasure=True)[1] is True
    assert taken == [("CPU A", 2), ("CPU A", 1), ("CPU B", 2), ("CPU B", 2)]


def test_machine_measurements_are_plausible():
    assert 1e8 < machine_module.copy_bandwidth(1) < 1e13
    assert runtime.fma_lanes() in (4, 8, 16)
    assert 1e8 < runtime.fma_rate(1, 100_000) < 1e13
    assert 0 < runtime.timer_pair_ns(10_000) < 10_000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profile", "missing.mlir"], "missing.mlir"),
        (["profile", "missing.onnx", "--by-op"], "missing.onnx: no such file"),
        (["profile", "{attention}", "--target", "nvptx"], "--target nvptx is not supported"),
        (["run", "{attention}", "--profile", "--target", "cuda"], "--target cuda is not supported"),
        (["run", "{attention}", "--profile", "--reference"], "cannot go with --reference"),
        (["profile", "{attention}", "--trace", "{tmp}/no/such/folder/t.json"], "does not exist"),
        (["profile", "{attention}", "--entry", "nope"], "module has no function @nope"),
    ],
)
def test_profile_bad_input_is_one_line(argv, message, attention_file, tmp_path, capsys):
    argv = [a.format(attention=attention_file, tmp=tmp_path) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("graphfuse: error:")


def test_profile_usage_errors(attention_file, capsys):
    for argv in (["--runs", "0"], ["--seconds", "-1"], ["--runs", "3", "--seconds", "1"]):
        with pytest.raises(SystemExit) as exit_:
            main(["profile", str(attention_file), *argv])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.count("\n") == 1


def test_profile_failure_leaves_no_trace(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  graph.nope\n}\n")
    trace = tmp_path / "t.json"
    done = graphfuse_command(["profile", str(bad), "--trace", str(trace)], tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("graphfuse: error:") and "Traceback" not in done.stderr
    assert not trace.exists() and list(tmp_path.iterdir()) == [bad]


def test_profile_sites_carry_the_cost_model(attention):
    builds, _ = attention
    projection = builds.sites[0]
    assert projection.kind == "out_elemwise_fusable" and projection.ops == ("matmul", "add")
    assert projection.bytes_moved == 4 * (32 * 64 + 64 * 64 + 64 + 32 * 64)
    assert [c.op for c in projection.op_costs] == ["matmul", "add"]


def test_profile_function_without_kernels(tmp_path, capsys):
    path = tmp_path / "identity.mlir"
    path.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n"
    )
    assert main(["profile", str(path), "--runs", "3", "--threads", "1"]) == 0
    assert "0 kernel calls per run (0 kernel functions), 3 timed runs" in capsys.readouterr().out
