"""Bad StableHLO input: one line naming the op (and the line of JAX code that made it)
and what is wrong, as a GraphfuseError; and StableHLO text read without JAX (the file API,
private functions inlined, the older stablehlo.dot)."""

from __future__ import annotations

import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import graphfuse
from graphfuse.frontend.stablehlo import from_jax, from_stablehlo, import_stablehlo_file
from graphfuse.parsing import GraphfuseError

ARGS = (np.ones((4, 8), np.float32),)

TEXT = """
module @jit_f {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<8x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.dot %arg0, %arg1 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    %1 = call @relu(%0) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %1 : tensor<4x3xf32>
  }
  func.func private @relu(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x3xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4x3xf32>
    return %1 : tensor<4x3xf32>
  }
}
"""


def _one_line(error: pytest.ExceptionInfo[GraphfuseError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_stablehlo_text_with_private_call_runs(tmp_path: Path) -> None:
    path = tmp_path / "f.stablehlo.mlir"
    path.write_text(TEXT)
    compiled = graphfuse.compile(import_stablehlo_file(path))
    x, w = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32)
    w = w.T[:, :3].copy()
    np.testing.assert_allclose(compiled(x, w), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("module { func.func @main( }", r"^StableHLO text does not parse at line 1: "),
        ("not mlir at all", r"^StableHLO text does not parse at line 1: "),
        (
            TEXT.replace("stablehlo.dot %arg0", "stablehlo.dot %arg7"),
            r"^StableHLO text does not parse at line 4: use of undeclared SSA value",
        ),
        (TEXT.replace("@main", "@entry"), r"^the module has no function @main \(functions: @entry"),
        (
            TEXT.replace("tensor<4x8xf32>, %arg1", "tensor<?x8xf32>, %arg1").replace(
                "(tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>",
                "(tensor<?x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>",
            ),
            r"^argument #0 of @main has dynamic shape tensor<\?x8xf32>; graphfuse needs static",
        ),
        (
            TEXT.replace(
                "%0 = stablehlo.dot %arg0, %arg1 :",
                "%0 = stablehlo.custom_call @my_kernel(%arg0, %arg1) :",
            ),
            r"^stablehlo.custom_call \(line 4\): custom_call @my_kernel is not supported",
        ),
    ],
    ids=["malformed", "garbage", "undefined_value", "no_main", "dynamic_shape", "custom_call"],
)
def test_stablehlo_bad_text_names_what_is_wrong(text: str, pattern: str) -> None:
    with pytest.raises(GraphfuseError) as error:
        from_stablehlo(text)
    assert re.search(pattern, _one_line(error)), str(error.value)


def test_stablehlo_sort_is_refused_naming_the_line_of_jax_code() -> None:
    with pytest.raises(GraphfuseError) as error:
        from_jax(lambda x: jnp.sort(x) + 1, *ARGS)
    message = _one_line(error)
    assert message.startswith("stablehlo.sort (sort at ")
    assert "test_errors.py:" in message and message.endswith("lists the ops it reads)")


def test_stablehlo_argmax_reduction_is_refused() -> None:
    with pytest.raises(
        GraphfuseError,
        match=r"stablehlo.reduce .*: a reduction of 2 operands "
        r"together \(an argmax or argmin\) is not supported",
    ):
        from_jax(lambda x: jnp.argmax(x, axis=1), *ARGS)


def test_stablehlo_complex_element_type_is_refused() -> None:
    with pytest.raises(
        GraphfuseError,
        match=r"argument #0 of @main has element type "
        r"complex<f32>, which graphfuse does not support",
    ):
        from_jax(lambda x: x * 2, np.ones((3,), np.complex64))


def test_stablehlo_constant_refused_names_the_users_line_not_graphfuses() -> None:
    """A closure constant is placed where jit(f) was lowered: inside from_jax; the message
    names the caller's line (this file), not graphfuse's own."""
    with pytest.raises(GraphfuseError) as error:
        from_jax(lambda x: x + jnp.array([1j, 2j, 3j], jnp.complex64).real, np.ones(3))
    message = _one_line(error)
    assert message.startswith("stablehlo.constant (jit(<lambda>) at "), message
    assert f"{Path(__file__).name}:" in message and "graphfuse/frontend" not in message


def test_stablehlo_internal_error_is_not_called_malformed_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in a converter (here a KeyError) surfaces as itself, with its traceback, not
    as a one-line 'malformed op' blaming the verified input."""
    from graphfuse.frontend.stablehlo import table

    def broken(b: object, op: object) -> list[object]:
        raise KeyError("internal")

    monkeypatch.setitem(table.CONVERTERS, "stablehlo.maximum", broken)
    with pytest.raises(KeyError, match="internal"):
        from_stablehlo(TEXT)


def test_stablehlo_unreadable_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.stablehlo.mlir"
    with pytest.raises(GraphfuseError, match=r"missing\.stablehlo\.mlir: cannot read StableHLO"):
        import_stablehlo_file(missing)
    bad = tmp_path / "bad.stablehlo.mlir"
    bad.write_text("module {")
    with pytest.raises(
        GraphfuseError, match=r"bad\.stablehlo\.mlir: StableHLO text does not parse"
    ):
        import_stablehlo_file(bad)
