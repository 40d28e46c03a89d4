"""Packaging: the xdsl-opt plug-in is registered, and the wheel holds every module and
data file, installs into a fresh virtual environment and compiles there, away from the
source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from xdsl.universe import Universe

ROOT = Path(__file__).resolve().parent.parent
LATER_SUBPACKAGE = "passes/added_later"
"""A subpackage the test adds to its copy of the tree: found without editing a list."""
PACKAGE_DATA = (
    "graphfuse/py.typed",
    "graphfuse/passes/rewrites/rules/simplify.mlir",
    "graphfuse/runtime/parallel_runtime.c",
    "graphfuse/profiling/profile_runtime.c",
)
# Large enough for a parallel loop: two threads use the runtime built from the wheel's C file.
ADD_RELU_SUM = """\
func.func @main(%x: tensor<256x512xf32>, %b: tensor<512xf32>) -> tensor<256xf32> {
  %0 = graph.add %x, %b : (tensor<256x512xf32>, tensor<512xf32>) -> tensor<256x512xf32>
  %1 = graph.relu %0 : tensor<256x512xf32>
  %2 = graph.reduce_sum %1 axes = [1] : tensor<256x512xf32> -> tensor<256xf32>
  func.return %2 : tensor<256xf32>
}
"""
COMPILE_AND_COMPARE = """\
import numpy as np
import graphfuse
from graphfuse.compiler import CompileOptions

run = graphfuse.compile("add_relu_sum.mlir", options=CompileOptions(threads=2))
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 512)).astype(np.float32)
b = rng.standard_normal(512).astype(np.float32)
np.testing.assert_allclose(run(x, b), np.maximum(x + b, 0).sum(axis=1), rtol=1e-4)
print(graphfuse.__file__)
"""


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


class Installed(NamedTuple):
    """The wheel installed in a fresh virtual environment."""

    python: Path
    site: Path
    env: dict[str, str]


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tree (so the checkout gets no build/ litter), with one new subpackage."""
    source = tmp_path_factory.mktemp("tree") / "src"
    ignored = (".venv", ".git", "build", "*.egg-info", "__pycache__", "Output", ".hypothesis")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*ignored, ".pytest_cache"))
    (source / LATER_SUBPACKAGE).mkdir()
    (source / LATER_SUBPACKAGE / "__init__.py").write_text('"""Added by the test."""\n')
    return source


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
    run([*pip, "--no-build-isolation", "--wheel-dir", str(dist), str(source)])
    (built,) = dist.glob("graphfuse-*.whl")
    return built


def module_files(source: Path) -> set[str]:
    """Every .py file of the tree's packages, named as in the wheel (dialects/graph/ops.py is
    graphfuse/dialects/graph/ops.py), by pyproject's package-dir."""
    with open(source / "pyproject.toml", "rb") as pyproject:
        folders = tomllib.load(pyproject)["tool"]["setuptools"]["package-dir"]
    files: set[str] = set()
    for package, folder in folders.items():
        for path in (source / folder).rglob("*.py"):
            relative = path.relative_to(source / folder).as_posix()
            files.add(f"{package.replace('.', '/')}/{relative}")
    return files


def _dependency_farm(farm: Path) -> None:
    """Links to everything in this environment's site-packages except graphfuse itself.

    The fresh environment must import graphfuse from the wheel only. Its dependencies
    (xDSL, NumPy, ONNX, the MLIR and LLVM tools, pip) are this environment's, reached
    through a .pth line naming this folder: installing them again would need the network
    and minutes. Pointing the .pth line at site-packages itself would also expose the
    editable install's graphfuse-*.dist-info (a second graphfuse distribution and xdsl
    entry point) and its finder; leaving out graphfuse*, __editable__* and the .pth files
    (which a .pth-added folder would not run anyway) leaves nothing of it."""
    farm.mkdir()
    folders = {Path(sysconfig.get_path("purelib")), Path(sysconfig.get_path("platlib"))}
    for folder in sorted(folders):
        for entry in sorted(folder.iterdir()):
            own = entry.name.startswith(("graphfuse", "__editable__"))
            if not own and entry.suffix != ".pth" and not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", str(root / "fresh")])
    python = root / "fresh" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    # A cache of its own: the parallel runtime is built from the wheel's parallel_runtime.c.
    env.update(PYTHONNOUSERSITE="1", GRAPHFUSE_CACHE_DIR=str(root / "cache"))
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(run([str(python), "-c", where], env=env, cwd=root).stdout.strip())
    _dependency_farm(root / "dependencies")
    (site / "dependencies.pth").write_text(f"{root / 'dependencies'}\n")
    run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        env=env,
        cwd=root,
    )
    return Installed(python, site, env)


def test_wheel_holds_every_module_and_data_file(source: Path, wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    expected = module_files(source) | set(PACKAGE_DATA)
    assert f"graphfuse/{LATER_SUBPACKAGE}/__init__.py" in expected
    assert "graphfuse/runtime/compiled.py" in expected
    assert sorted(expected - names) == []


def test_wheel_install_compiles_outside_the_tree(installed: Installed, tmp_path: Path):
    (tmp_path / "add_relu_sum.mlir").write_text(ADD_RELU_SUM)
    python = [str(installed.python), "-c", COMPILE_AND_COMPARE]
    done = run(python, cwd=tmp_path, env=installed.env)
    module = Path(done.stdout.strip())
    assert module.is_relative_to(installed.site), module
    assert not module.resolve().is_relative_to(ROOT)


def test_wheel_install_console_script_writes_library_here(installed: Installed, tmp_path: Path):
    (tmp_path / "x.mlir").write_text(ADD_RELU_SUM)
    script = installed.python.parent / "graphfuse"
    command = [str(script), "compile", "x.mlir", "--threads", "2"]
    done = run(command, cwd=tmp_path, env=installed.env)
    assert done.stdout.startswith("wrote x.so: <compiled @main(256x512xf32, 512xf32) -> (256xf32)")
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written[1:] == ["x.mlir", "x.so"] and written[0].startswith("libgraphfuse_parallel-")


def test_xdsl_opt_lists_graphfuse_passes():
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run([str(xdsl_opt), "--help"], capture_output=True, text=True)
    listed = "".join(run.stdout.split())  # argparse wraps the list of passes
    assert "graph-fuse," in listed and "graph-report-fusion," in listed
