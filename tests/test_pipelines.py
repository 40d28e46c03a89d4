"""graphfuse.pipelines: each spec parses with the universe, plain xdsl-opt running the
documented command lines prints what the in-process drivers print, the drivers run the
specs, and pass names follow the one naming rule (old names still run)."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from xdsl.passes import PassPipeline

from graphfuse import cli, pipelines
from graphfuse.compiler import CompileOptions, Stage, load, lower_to
from graphfuse.lowering.cpu.gemm.loop_tile_matmul import LoopTileMatmulPass
from graphfuse.lowering.gpu.convert_loop_to_gpu import ConvertLoopToGpuPass
from graphfuse.parsing import make_context, parse_text
from graphfuse.passes.fusion.graph_fuse import DEFAULT_MAX_DEPTH, GraphFusePass
from graphfuse.universe import ALL_PASSES, RENAMED_PASSES

ROOT = Path(__file__).resolve().parent.parent
TRANSFORMER = ROOT / "examples" / "transformer_block.mlir"
XDSL_OPT = Path(sys.executable).parent / "xdsl-opt"


def documented() -> dict[str, str]:
    """The module docstring's command lines (the README copies them): command -> spec."""
    line = r"^  (graphfuse [^:]*):\s+xdsl-opt in\.mlir -p '([^']*)'$"
    return dict(re.findall(line, pipelines.__doc__ or "", re.M))


SPECS = {
    "fuse": pipelines.graph_fuse(),
    "fuse, every option": pipelines.graph_fuse(
        max_depth=3, explain=True, rules="r.mlir", refine=False
    ),
    "fusion, cpu": pipelines.fusion(True, max_depth=1, refine=False),
    "fusion, gpu": pipelines.fusion(False),
    "to_loop, cpu": pipelines.to_loop(True),
    "to_loop, gpu": pipelines.to_loop(False),
    "cpu_lowering, serial": pipelines.cpu_lowering(parallel=False, lanes=16),
    "cpu_lowering, parallel": pipelines.cpu_lowering(parallel=True, lanes=8),
    "gpu_lowering": pipelines.gpu_lowering(block_size=128),
    "cpu": pipelines.cpu(True, 16, max_depth=4),
    "gpu": pipelines.gpu(64),
}


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_pipeline_parses_with_the_universe(spec: str) -> None:
    pipeline = PassPipeline.parse_spec(ALL_PASSES, spec)
    written = [
        pipelines.spec(step.name, **{f.name: getattr(step, f.name) for f in fields(step)})
        for step in pipeline.passes
    ]
    assert pipelines.join(*written) == spec


def test_pipeline_options_reach_the_passes() -> None:
    tile, *_ = pipelines.parse(pipelines.cpu_lowering(parallel=True, lanes=16)).passes
    assert tile == LoopTileMatmulPass(threads=True, lanes=16)
    launch, _ = pipelines.parse(pipelines.gpu_lowering(block_size=128)).passes
    assert launch == ConvertLoopToGpuPass(block_size=128)


@pytest.mark.parametrize(("threads", "workers"), [(1, 2), (2, 2), (3, 3), (8, 8)])
def test_the_gemm_tasks_are_balanced_for_the_compiled_team(threads: int, workers: int) -> None:
    """The compiler's thread count reaches loop-tile-matmul as the team its tasks are cut
    for (written only where it differs from the pass's default of 2; unused on 1 thread)."""
    spec = CompileOptions(threads=threads, lanes=16).cpu_lowering()
    tile, *_ = pipelines.parse(spec).passes
    assert tile == LoopTileMatmulPass(threads=threads > 1, lanes=16, workers=workers)
    assert ("workers=" in spec) == (workers != 2)


def test_spec_leaves_defaults_out() -> None:
    assert (
        pipelines.spec("graph-fuse", max_depth=DEFAULT_MAX_DEPTH, refine=True, rules=None)
        == "graph-fuse"
    )
    assert (
        pipelines.spec("graph-fuse", max_depth=3, refine=False)
        == "graph-fuse{max-depth=3 refine=false}"
    )


@pytest.mark.parametrize("path", ["my rules.mlir", 'a"b\\c}{,=.mlir', "é\n\t.mlir"])
def test_spec_string_options_round_trip(path: str) -> None:
    (fuse,) = pipelines.parse(pipelines.graph_fuse(rules=path)).passes
    assert fuse == GraphFusePass(rules=path)


def test_docstring_documents_each_pipeline() -> None:
    expected = {
        "graphfuse fuse": pipelines.graph_fuse(),
        "graphfuse compile --emit upstream": pipelines.cpu(parallel=True, lanes=8),
        "graphfuse compile --target nvptx --emit gpu": pipelines.gpu(
            ConvertLoopToGpuPass.block_size
        ),
    }
    assert documented() == expected


def _xdsl_opt(spec: str) -> str:
    run = subprocess.run(
        [XDSL_OPT, TRANSFORMER, "-p", spec], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.rstrip("\n")


@pytest.mark.parametrize(
    ("command", "stage", "options"),
    [
        ("graphfuse compile --emit upstream", Stage.UPSTREAM, CompileOptions(threads=2, lanes=8)),
        ("graphfuse compile --target nvptx --emit gpu", Stage.GPU, CompileOptions()),
    ],
)
def test_xdsl_opt_runs_what_the_compiler_runs(
    command: str, stage: Stage, options: CompileOptions
) -> None:
    assert _xdsl_opt(documented()[command]) == lower_to(load(TRANSFORMER), stage, options)


def test_xdsl_opt_runs_what_graphfuse_fuse_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fuse", str(TRANSFORMER), "--explain"]) == 0
    explained = capsys.readouterr().out.rstrip("\n")
    assert "// graph-fuse: @main:" in explained
    assert _xdsl_opt(pipelines.graph_fuse(explain=True)) == explained


def test_run_explained_returns_what_explain_prints(capsys: pytest.CaptureFixture[str]) -> None:
    explained = load(TRANSFORMER)
    decisions = pipelines.run_explained(pipelines.graph_fuse(explain=True), explained)
    assert capsys.readouterr().out == ""
    printed = load(TRANSFORMER)
    pipelines.run(pipelines.graph_fuse(explain=True), printed)
    assert capsys.readouterr().out.splitlines() == [f"// graph-fuse: {d}" for d in decisions]
    assert str(explained) == str(printed)


def test_compiler_runs_the_cpu_pipeline_stage_by_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(pipelines, "run", lambda spec, module: ran.append(spec))
    lower_to(load(TRANSFORMER), Stage.UPSTREAM, CompileOptions(threads=2, lanes=16, max_depth=5))
    assert pipelines.join(*ran) == pipelines.cpu(parallel=True, lanes=16, max_depth=5)


def test_compiler_runs_the_gpu_pipeline_stage_by_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(pipelines, "run", lambda spec, module: ran.append(spec))
    lower_to(load(TRANSFORMER), Stage.GPU, CompileOptions(block_size=64, fuse=False))
    assert pipelines.join(*ran) == pipelines.gpu(64, max_depth=1, refine=False)


NAMING_RULE = re.compile(r"convert-[a-z]+-to-[a-z]+|(graph|loop|scf|math)(-[a-z]+)+")


@pytest.mark.parametrize("name", sorted(set(ALL_PASSES) - set(RENAMED_PASSES)))
def test_pass_name_follows_the_naming_rule(name: str) -> None:
    assert NAMING_RULE.fullmatch(name)
    assert ALL_PASSES[name]().name == name


def test_renamed_passes_name_passes_of_the_universe() -> None:
    assert set(RENAMED_PASSES.values()) <= set(ALL_PASSES) - set(RENAMED_PASSES)


@pytest.fixture(scope="module")
def upstream() -> str:
    """The transformer block just converted to upstream MLIR, before the CPU tuning passes."""
    steps = pipelines.parse(pipelines.cpu(parallel=True, lanes=8)).passes
    end = [step.name for step in steps].index("convert-loop-to-upstream") + 1
    module = load(TRANSFORMER)
    PassPipeline(steps[:end]).apply(make_context(), module)
    return str(module)


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_PASSES.items()))
def test_old_pass_name_still_runs(
    old: str, new: str, upstream: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each old name does what its new name does, on the stage its pass reads."""
    outputs: list[tuple[str, str]] = []
    for name in (old, new):
        module = load(TRANSFORMER) if new.startswith("graph-") else parse_text(upstream)
        pipelines.run(name, module)
        outputs.append((str(module), capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    assert pipelines.parse(old).passes[0].name == old


def test_fewer_full_collections_spaces_them_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with pipelines.fewer_full_collections():
            assert gc.get_threshold() == (700, 10, pipelines.FULL_COLLECTION_SPACING)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(700, 10, 1000)
        with pipelines.fewer_full_collections():
            assert gc.get_threshold() == (700, 10, 1000)
    finally:
        gc.set_threshold(*before)


def test_run_applies_the_passes_under_fewer_full_collections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int, int]] = []
    monkeypatch.setattr(GraphFusePass, "apply", lambda *_: seen.append(gc.get_threshold()))
    young, middle, old = gc.get_threshold()
    pipelines.run("graph-fuse", parse_text(TRANSFORMER.read_text()))
    assert seen == [(young, middle, max(old, pipelines.FULL_COLLECTION_SPACING))]
    assert gc.get_threshold() == (young, middle, old)
