"""Bad pass options: each pass refuses an out-of-range value naming itself, the option and
what it allows, before it changes the module; xdsl-opt shows that message as it shows any
exception (one line with --verify-diagnostics, the last line of a traceback without)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from graphfuse.lowering.cpu.gemm.loop_tile_matmul import LoopTileMatmulPass
from graphfuse.lowering.cpu.tuning.scf_interleave_loops import ScfInterleaveLoopsPass
from graphfuse.lowering.cpu.tuning.scf_predicate_short_loops import ScfPredicateShortLoopsPass
from graphfuse.parsing import check_at_least, check_one_of
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from tests.conftest import parse

XDSL_OPT = Path(sys.executable).parent / "xdsl-opt"
ADD = (
    "func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  func.return %0 : tensor<4xf32>\n}\n"
)


def test_check_at_least_spells_the_option_as_a_pipeline_does():
    with pytest.raises(PassFailedException, match=r"^p: option max-depth must be >= 1, got 0$"):
        check_at_least("p", "max_depth", 0, 1)
    check_at_least("p", "max_depth", 1, 1)


def test_check_one_of_lists_the_choices():
    with pytest.raises(PassFailedException, match=r"^p: option lanes must be 8 or 16, got 5$"):
        check_one_of("p", "lanes", 5, (8, 16))
    with pytest.raises(PassFailedException, match=r"must be 1, 2 or 4, got 3$"):
        check_one_of("p", "n", 3, (1, 2, 4))


@pytest.mark.parametrize(
    ("bad_pass", "message"),
    [
        (GraphFusePass(max_depth=0), r"^graph-fuse: option max-depth must be >= 1, got 0$"),
        (GraphFusePass(max_inputs=0), r"^graph-fuse: option max-inputs must be >= 1"),
        (GraphFusePass(target="tpu"), r"^graph-fuse: unknown target 'tpu'"),
        (
            GraphFusePass(rules="absent.pdl"),
            r"^absent\.pdl: cannot read PDL rules \(option rules\)",
        ),
        (LoopTileMatmulPass(lanes=5), r"^loop-tile-matmul: option lanes must be 8 or 16, got 5$"),
        (LoopTileMatmulPass(workers=0), r"^loop-tile-matmul: option workers must be >= 1, got 0$"),
        (ScfInterleaveLoopsPass(count=0), r"^scf-interleave-loops: option count must be >= 1"),
        (
            ScfInterleaveLoopsPass(reduction_count=-1),
            r"^scf-interleave-loops: option reduction-count must be >= 1, got -1$",
        ),
        (ScfInterleaveLoopsPass(lanes=4), r"^scf-interleave-loops: option lanes must be 8 or 16"),
        (
            ScfPredicateShortLoopsPass(lanes=32),
            r"^scf-predicate-short-loops: option lanes must be 8 or 16, got 32$",
        ),
    ],
)
def test_bad_option_refused_before_any_change(bad_pass: ModulePass, message: str):
    module = parse(ADD)
    before = str(module)
    with pytest.raises(PassFailedException, match=message):
        bad_pass.apply(Context(), module)
    assert str(module) == before


def _xdsl_opt(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "in.mlir").write_text(ADD)
    command = [str(XDSL_OPT), "in.mlir", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("graph-fuse{max-depth=0}", "graph-fuse: option max-depth must be >= 1, got 0"),
        ("loop-tile-matmul{lanes=5}", "loop-tile-matmul: option lanes must be 8 or 16, got 5"),
        ('graph-fuse{rules="absent.pdl"}', "absent.pdl: cannot read PDL rules (option rules)"),
    ],
)
def test_xdsl_opt_verify_diagnostics_prints_one_line(tmp_path: Path, spec: str, message: str):
    run = _xdsl_opt(tmp_path, "--verify-diagnostics", "-p", spec)
    assert run.stderr == ""
    assert run.stdout.splitlines()[0].startswith(message), run.stdout
    assert "builtin.module" not in run.stdout


def test_plain_xdsl_opt_ends_its_traceback_with_the_message(tmp_path: Path):
    """Plain xdsl-opt re-raises every exception (docs/cli.md says which doors print one
    line); the message naming the option is still the line a user reads last."""
    run = _xdsl_opt(tmp_path, "-p", "loop-tile-matmul{lanes=5}")
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last == (
        "xdsl.utils.exceptions.PassFailedException: loop-tile-matmul: option lanes must be "
        "8 or 16, got 5"
    )
