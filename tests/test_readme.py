"""The README's shell commands, run as written.

Every ```sh block is split into commands (a trailing backslash continues a line, `#`
starts a comment) and each runs under bash from a fresh temporary folder holding what the
commands name: a copy of examples/ (the README's paths are relative to the repository
root), in.mlir (the ResNet block), model.onnx (a small MLP) and bert.onnx (inputs
input_ids and attention_mask of shape [batch, seq]). `.venv/bin/` stands for this
environment's bin folder, which also leads PATH for a bare `graphfuse`. A command that
exits non-zero fails its test.

Left out: the quick start's `make demo` and `make test`. `make test` runs every test,
this one included; both reinstall the project whenever pyproject.toml is newer than the
virtual environment, and the demo times the transformer block against every op compiled
as its own kernel, too long for one test. `--target cuda` needs a GPU and is skipped
without one, with the driver's reason; PTX (`--target nvptx`) needs none and runs.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphfuse.runtime.cuda_driver import unavailable_reason
from tests.subprocesses import VENV_BIN, run_as_user

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SKIPPED = ("make demo", "make test")
"""Commands left out, with the reason in the module docstring."""


def shell_commands(markdown: str) -> list[str]:
    """The commands of every ```sh block: continuation lines joined, comment lines dropped
    (a comment after a command stays, for bash to ignore)."""
    commands: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.M | re.S):
        joined = re.sub(r"\\\n", " ", block)
        lines = (line.strip() for line in joined.splitlines())
        commands += [line for line in lines if line and not line.startswith("#")]
    return commands


COMMANDS = shell_commands(README.read_text())


def mlp_model() -> onnx.ModelProto:
    """model.onnx: x[1, 64] -> MatMul, Add, Relu, Softmax -> y[1, 32]; the 8 KiB weight
    leaves the text (model.safetensors) when the model is imported."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((64, 32)).astype(np.float32),
        "b": rng.standard_normal(32).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        weights,
    )


def bert_like_model() -> onnx.ModelProto:
    """bert.onnx: token embeddings masked by attention_mask; both inputs [batch, seq]."""
    rng = np.random.default_rng(1)
    weights = {
        "embeddings": rng.standard_normal((32, 8)).astype(np.float32),
        "last_axis": np.array([2], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Gather", ["embeddings", "input_ids"], ["tokens"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask", "last_axis"], ["mask3"]),
        helper.make_node("Mul", ["tokens", "mask3"], ["hidden"]),
    ]
    dynamic = ["batch", "seq"]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, dynamic),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dynamic),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [*dynamic, 8])],
        weights,
    )


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    weights: dict[str, np.ndarray],
) -> onnx.ModelProto:
    initializers = [numpy_helper.from_array(a, n) for n, a in weights.items()]
    graph = helper.make_graph(nodes, "readme", inputs, outputs, initializers)
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    built.ir_version = 10
    onnx.checker.check_model(built, full_check=True)
    return built


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return {
        "model.onnx": mlp_model().SerializeToString(),
        "bert.onnx": bert_like_model().SerializeToString(),
    }


def _prepare(folder: Path, models: dict[str, bytes]) -> None:
    shutil.copytree(ROOT / "examples", folder / "examples")
    shutil.copyfile(ROOT / "examples" / "resnet_block.mlir", folder / "in.mlir")
    for name, data in models.items():
        (folder / name).write_bytes(data)


def _as_written_here(command: str) -> str:
    """The command with `.venv/bin/` pointing at this environment's bin folder."""
    return re.sub(r"(?<![\w/.])\.venv/bin/", f"{VENV_BIN}/", command)


def test_readme_commands_found():
    assert any(c.startswith("graphfuse import bert.onnx") for c in COMMANDS)
    assert any("--target nvptx" in c for c in COMMANDS)
    assert all(shlex.split(c, comments=True) for c in COMMANDS)


@pytest.mark.parametrize(
    "command",
    [c for c in COMMANDS if not c.startswith(SKIPPED)],
    ids=lambda c: " ".join(shlex.split(c, comments=True)),
)
def test_readme_command_runs(command: str, models: dict[str, bytes], tmp_path: Path):
    if "--target cuda" in command:
        reason = unavailable_reason()
        if reason is not None:
            pytest.skip(f"--target cuda runs on a GPU: {reason}")
    _prepare(tmp_path, models)
    done = run_as_user(_as_written_here(command), tmp_path)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
