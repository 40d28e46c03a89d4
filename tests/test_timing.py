"""`--timing`: the stage tree graphfuse.timing collects and the commands print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from graphfuse import timing

ROOT = Path(__file__).resolve().parent.parent


def test_timing_stages_nest_and_repeats_add_up() -> None:
    with timing.collect("root") as root:
        with timing.timed("outer"):
            with timing.timed("inner"):
                pass
            with timing.timed("inner"):
                pass
        with timing.timed("second"):
            pass
    assert [c.name for c in root.children] == ["outer", "second"]
    (outer, _) = root.children
    assert [c.name for c in outer.children] == ["inner"]
    assert 0 <= outer.children[0].seconds <= outer.seconds <= root.seconds


def test_timing_records_nothing_outside_a_tree() -> None:
    with timing.timed("alone"):
        pass
    with timing.collect("root") as root:
        pass
    assert root.children == []


def test_timing_render_indents_children_under_their_stage() -> None:
    root = timing.Stage(
        "graphfuse compile", 2.0, [timing.Stage("build", 1.5, [timing.Stage("llc", 1.0)])]
    )
    lines = timing.render(root).splitlines()
    assert lines[1:] == [
        "      2.000   100%  graphfuse compile",
        "      1.500    75%    build",
        "      1.000    50%      llc",
    ]


def test_timing_compile_prints_the_stage_tree(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphfuse.cli",
            "compile",
            str(ROOT / "examples" / "resnet_block.mlir"),
            "-o",
            "r.so",
            "--timing",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={
            "GRAPHFUSE_CACHE_DIR": str(tmp_path / "cache"),
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        },
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "r.so").exists()
    stages = [
        m.group(1) for m in re.finditer(r"^ +\d+\.\d{3} +\d+%  (?:  )*(\S.*)$", run.stderr, re.M)
    ]
    for stage in ("graphfuse compile", "load", "graph-fuse", "convert-loop-to-upstream", "build"):
        assert stage in stages, run.stderr
    assert any(stage.startswith("llc ") for stage in stages), run.stderr
    assert "   llc" not in run.stdout


def test_timing_is_offered_by_every_command() -> None:
    from graphfuse.cli import build_parser

    parser = build_parser()
    for command in ("doctor", "stats", "run", "compile", "fuse", "import"):
        assert parser.parse_args(
            [command, "--timing", *(["x"] if command != "doctor" else [])]
        ).timing
