"""Packaging: the xdsl-opt plug-in is registered, and a non-editable install imports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from xdsl.universe import Universe

ROOT = Path(__file__).resolve().parent.parent


def test_universe_registers_graph_dialect():
    multiverse = Universe.get_multiverse()
    assert "graph" in multiverse.all_dialects
    assert multiverse.all_dialects["graph"]().name == "graph"


def test_xdsl_opt_parses_graph_file():
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run(
        [str(xdsl_opt), str(ROOT / "examples" / "resnet_block.mlir")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "graph.conv2d" in run.stdout


def test_non_editable_install_imports(tmp_path):
    # Build from a copy so the checkout gets no build/ or egg-info litter.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", "Output"
        ),
    )
    target = tmp_path / "site"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert (target / "graphfuse" / "dialects" / "graph.py").is_file()
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import graphfuse.dialects.graph as g, graphfuse.passes, graphfuse.lowering, "
            "graphfuse.reference; print(g.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(target), PYTHONNOUSERSITE="1"),
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip().startswith(str(target))


def test_xdsl_opt_lists_graphfuse_passes():
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run([str(xdsl_opt), "--help"], capture_output=True, text=True)
    listed = "".join(run.stdout.split())  # argparse wraps the list of passes
    assert "graph-fuse," in listed and "graph-fusion-report," in listed
