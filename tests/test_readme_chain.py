"""The README's chain on real models with weights, through plain `xdsl-opt`.

`graphfuse import model.onnx -o model.mlir`, then `xdsl-opt -p graph-fuse`, then
`graphfuse compile`, as the README writes it, on Hugging Face networks from
graphfuse.testing.model_zoo (tiny configs, random weights): the module holds its weights as
`dense_resource` handles with their bytes in model.safetensors, which xdsl-opt's passes read
from there. graph-fuse run again on its own output prints the same module, and the fused
module compiles to the numbers onnxruntime gives. The README's other pipelines run through
plain xdsl-opt on an imported model too, and a module written with `--inline-weights`
(MLIR's `dialect_resources` section) goes through xdsl-opt and upstream mlir-opt.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.parsing import parse_file
from graphfuse.testing.model_zoo import Exported, export, onnxruntime_run
from tests.subprocesses import VENV_BIN, run_as_user
from tests.test_readme import README, shell_commands

MODELS = ("resnet", "bert", "gpt2")
"""A convolutional network (batch norms, whose folding makes new constants) and two
transformers (embeddings, attention, layer norms); each has weights over 4 KiB."""
TOLERANCE = 1e-4
CHAIN = next(c for c in shell_commands(README.read_text()) if "xdsl-opt -p graph-fuse" in c)
"""The README's command: import, fuse with plain xdsl-opt, compile."""
PIPELINES = re.findall(r"xdsl-opt examples/resnet_block\.mlir -p '([^']+)'", README.read_text())
"""The README's pipeline specs (graphfuse/pipelines.py defines them)."""
HEX_OVER_4K = re.compile(r'"0x[0-9A-F]{8194,}"')


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exported]:
    folder = tmp_path_factory.mktemp("zoo")
    return {name: export(name, folder) for name in MODELS}


def _run(command: list[str] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = run_as_user(command, cwd)
    assert done.returncode == 0, f"{command}\n{done.stderr[-4000:]}"
    return done


def _check(module_path: Path, model: Exported) -> None:
    compiled = graphfuse.compile(module_path, options=CompileOptions(threads=1))
    got = compiled(*model.inputs.values())
    got = got if isinstance(got, tuple) else (got,)
    expected = onnxruntime_run(model)
    assert len(got) == len(expected)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        scale = float(np.max(np.abs(e)))
        np.testing.assert_allclose(
            g, e, rtol=TOLERANCE, atol=TOLERANCE * scale, err_msg=f"output #{index}"
        )


def test_readme_shows_the_chain() -> None:
    assert "graphfuse import model.onnx -o model.mlir" in CHAIN
    assert "graphfuse compile fused.mlir" in CHAIN
    assert len(PIPELINES) == 3


@pytest.mark.parametrize("name", MODELS)
def test_readme_chain_with_plain_xdsl_opt(
    name: str, exported: dict[str, Exported], tmp_path: Path
) -> None:
    shutil.copyfile(exported[name].path, tmp_path / "model.onnx")
    _run(CHAIN.replace(".venv/bin/", f"{VENV_BIN}/"), tmp_path)
    text = (tmp_path / "model.mlir").read_text()
    assert 'graphfuse.weights = "model.safetensors"' in text and "dense_resource<" in text
    assert not HEX_OVER_4K.search(text)
    assert (tmp_path / "libmodel.so").is_file()

    # graph-fuse on its own output: the same module, which graphfuse reads again.
    _run(
        [str(VENV_BIN / "xdsl-opt"), "-p", "graph-fuse", "fused.mlir", "-o", "again.mlir"], tmp_path
    )
    fused = (tmp_path / "fused.mlir").read_text()
    assert (tmp_path / "again.mlir").read_text() == fused
    assert "dense_resource<" in fused and parse_file(tmp_path / "again.mlir")
    _check(tmp_path / "fused.mlir", exported[name])


@pytest.mark.parametrize("pipeline", PIPELINES, ids=["fuse", "cpu", "gpu"])
def test_readme_pipelines_on_a_model_with_weights(
    pipeline: str, exported: dict[str, Exported], tmp_path: Path
) -> None:
    shutil.copyfile(exported["resnet"].path, tmp_path / "model.onnx")
    _run([str(VENV_BIN / "graphfuse"), "import", "model.onnx", "-o", "model.mlir"], tmp_path)
    done = _run([str(VENV_BIN / "xdsl-opt"), "model.mlir", "-p", pipeline], tmp_path)
    assert "func.func @main" in done.stdout


def test_inline_weights_through_xdsl_opt_and_mlir_opt(
    exported: dict[str, Exported], tmp_path: Path
) -> None:
    """`--inline-weights` writes MLIR's dialect_resources section: plain xdsl-opt fuses it
    (idempotently), upstream mlir-opt reads it, and it compiles to the right numbers."""
    from graphfuse.toolchain import require_tool

    shutil.copyfile(exported["bert"].path, tmp_path / "model.onnx")
    graphfuse_bin, xdsl_opt = str(VENV_BIN / "graphfuse"), str(VENV_BIN / "xdsl-opt")
    _run([graphfuse_bin, "import", "model.onnx", "-o", "model.mlir", "--inline-weights"], tmp_path)
    assert not (tmp_path / "model.safetensors").exists()
    assert "dialect_resources" in (tmp_path / "model.mlir").read_text()
    _run([xdsl_opt, "-p", "graph-fuse", "model.mlir", "-o", "fused.mlir"], tmp_path)
    _run([xdsl_opt, "-p", "graph-fuse", "fused.mlir", "-o", "again.mlir"], tmp_path)
    fused = (tmp_path / "fused.mlir").read_text()
    assert (tmp_path / "again.mlir").read_text() == fused and "dialect_resources" in fused
    generic = _run([xdsl_opt, "fused.mlir", "--print-op-generic"], tmp_path).stdout
    mlir_opt = require_tool("mlir-opt").path
    (tmp_path / "generic.mlir").write_text(generic)
    upstream = _run([mlir_opt, "--allow-unregistered-dialect", "generic.mlir"], tmp_path).stdout
    assert "dialect_resources" in upstream and "dense_resource<" in upstream
    _check(tmp_path / "fused.mlir", exported["bert"])
