"""Comparing compiled results with the reference interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.dialects.graph import interpreter as reference

RTOL = 1e-5
"""Compiled f32 results agree with the reference to this relative tolerance; elements much
smaller than the result's largest value are held to RTOL times that value instead
(reassociated sums and polynomial tanh/erf round differently near zero)."""

ROUNDING_SLACK = 8.0
"""A result computed with cancellation (x - y for nearly equal x, y) is rounding noise: its
f32 reference is itself off from the exact value by some error e. The compiled code, with
another summation order, may be off by a like amount, so such results also get
ROUNDING_SLACK * e of absolute slack, e measured as the f32 reference's largest distance
from a float64 run of the same graph."""


def assert_matches(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    rtol: float = RTOL,
    exact: Sequence[np.ndarray] | None = None,
) -> None:
    """Compare results; `exact` (the reference run in float64) sizes the rounding slack."""
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert got.shape == want.shape, f"result #{index}: shape {got.shape} vs {want.shape}"
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want, err_msg=f"result #{index}")
            continue
        finite = want[np.isfinite(want)]
        scale = float(np.max(np.abs(finite), initial=0.0))
        np.testing.assert_allclose(
            got.astype(np.float64),
            want.astype(np.float64),
            rtol=rtol,
            atol=rtol * scale + ROUNDING_SLACK * _rounding_error(want, exact, index),
            equal_nan=True,
            err_msg=f"result #{index}",
        )


def _rounding_error(want: np.ndarray, exact: Sequence[np.ndarray] | None, index: int) -> float:
    """Largest |f32 reference - float64 reference| over elements finite in both."""
    if exact is None or want.dtype != np.float32:
        return 0.0
    with np.errstate(invalid="ignore"):  # inf - inf
        difference = np.abs(want.astype(np.float64) - exact[index].astype(np.float64))
    return float(np.max(difference[np.isfinite(difference)], initial=0.0))


def compile_and_compare(
    module: ModuleOp,
    name: str = "main",
    seed: int = 0,
    options: CompileOptions | None = None,
    rtol: float = RTOL,
    inputs: Sequence[Any] | None = None,
    target: str = "cpu",
) -> None:
    """Compile @name for `target`, run it on random (or given) inputs, compare with the
    reference."""
    function = reference.find_function(module, name)
    arrays = list(inputs) if inputs is not None else reference.random_inputs(function, seed)
    expected = reference.run(module, name, *arrays)
    exact = reference.run(module, name, *arrays, f32_as_f64=True)
    compiled = graphfuse.compile(
        module, entry=name, target=target, options=options or CompileOptions()
    )
    got = compiled(*arrays)
    assert_matches(got if isinstance(got, tuple) else (got,), expected, rtol, exact)
