"""TOSA weights as torch-mlir writes them: `tosa.const` holding `dense_resource<handle>`,
the bytes in the file's `dialect_resources` section. Imported, compiled and run, and
converted by plain `xdsl-opt`, each checked against NumPy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.cli import main
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.tosa import from_tosa
from graphfuse.parsing import parse_text
from graphfuse.resources import blob_text
from tests.frontend.tosa import tosa_text as t
from tests.subprocesses import xdsl_opt

Array = np.ndarray


def _resource_const(name: str, handle: str, array: Array) -> str:
    typ = t.ttype_of(array)
    return f'%{name} = "tosa.const"() <{{values = dense_resource<{handle}> : {typ}}}> : () -> {typ}'


def _section(blobs: dict[str, Array]) -> str:
    entries = ",\n".join(
        f'      {handle}: "{blob_text(array.tobytes(), 4)}"' for handle, array in blobs.items()
    )
    return f"{{-#\n  dialect_resources: {{\n    builtin: {{\n{entries}\n    }}\n  }}\n#-}}\n"


@pytest.fixture(scope="module")
def weights() -> dict[str, Array]:
    rng = np.random.default_rng(7)
    return {
        "w": (rng.standard_normal((16, 3, 3, 16)) * 0.3).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
        "shift": rng.standard_normal((1, 1, 1, 16)).astype(np.float32),
    }


def conv_add_text(weights: dict[str, Array]) -> str:
    """An NHWC conv2d (its 9 KiB of weights and its bias behind handles named as
    torch-mlir names them) followed by a tosa.add of a third resource."""
    handles = {
        "w": "torch_tensor_16_3_3_16_torch.float32",
        "b": "torch_tensor_16_torch.float32",
        "shift": "_param_shift",
    }
    body = [
        _resource_const("w", handles["w"], weights["w"]),
        _resource_const("b", handles["b"], weights["b"]),
        _resource_const("shift", handles["shift"], weights["shift"]),
        t.zero(),
        "%c = tosa.conv2d %arg0, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, "
        "pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, "
        "tensor<16x3x3x16xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> "
        "tensor<1x8x8x16xf32>",
        "%y = tosa.add %c, %shift : (tensor<1x8x8x16xf32>, tensor<1x1x1x16xf32>) -> "
        "tensor<1x8x8x16xf32>",
    ]
    function = t.function("forward", ["tensor<1x8x8x16xf32>"], ["tensor<1x8x8x16xf32>"], body, "%y")
    return function + _section({handles[k]: a for k, a in weights.items()})


def _expected(weights: dict[str, Array], x: Array) -> Array:
    return t.conv2d(x, weights["w"], weights["b"], [1, 1, 1, 1], [1, 1], [1, 1]) + weights["shift"]


def _input() -> Array:
    return np.random.default_rng(8).standard_normal((1, 8, 8, 16)).astype(np.float32)


def test_tosa_resources_import_compile_and_run(
    weights: dict[str, Array], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("model.tosa.mlir").write_text(conv_add_text(weights))
    assert main(["import", "model.tosa.mlir", "-o", "model.mlir"]) == 0
    assert Path("model.safetensors").is_file()  # the weights left the text again
    x = _input()
    got = graphfuse.compile(Path("model.mlir"), "forward")(x)
    np.testing.assert_allclose(got, _expected(weights, x), rtol=1e-4, atol=1e-4)


def test_tosa_resources_from_text(weights: dict[str, Array]) -> None:
    module = from_tosa(conv_add_text(weights), "model.tosa.mlir")
    x = _input()
    got = reference.run(module, "forward", x)[0]
    np.testing.assert_allclose(got, _expected(weights, x), rtol=1e-4, atol=1e-4)


def test_xdsl_opt_converts_tosa_resources(weights: dict[str, Array], tmp_path: Path) -> None:
    """mlir-opt's generic form keeps the section; plain xdsl-opt reads it and converts.
    xDSL 0.74's own `tosa.const` takes dense values only, so its verifier would refuse
    the input before the first pass: `--disable-verify` skips that check, and the
    output is verified when graphfuse reads it."""
    from graphfuse.toolchain import require_tool

    (tmp_path / "model.tosa.mlir").write_text(conv_add_text(weights))
    generic = subprocess.run(
        [require_tool("mlir-opt").path, "--mlir-print-op-generic", "model.tosa.mlir"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert "dialect_resources" in generic
    run = xdsl_opt(
        "--disable-verify",
        "--allow-unregistered-dialect",
        "-p",
        "convert-tosa-to-graph,graph-fuse",
        stdin=generic,
    )
    assert run.returncode == 0, run.stderr
    assert "tosa." not in run.stdout
    x = _input()
    got = reference.run(parse_text(run.stdout, "fused.mlir"), "forward", x)[0]
    np.testing.assert_allclose(got, _expected(weights, x), rtol=1e-4, atol=1e-4)
