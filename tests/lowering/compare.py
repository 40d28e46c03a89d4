"""Comparing compiled results with the reference interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import graphfuse
from graphfuse import reference
from graphfuse.compiler import CompileOptions

RTOL = 1e-5
"""Compiled f32 results agree with the reference to this relative tolerance; elements much
smaller than the result's largest value are held to RTOL times that value instead
(reassociated sums and polynomial tanh/erf round differently near zero)."""


def assert_matches(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float = RTOL
) -> None:
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
            atol=rtol * scale,
            equal_nan=True,
            err_msg=f"result #{index}",
        )


def compile_and_compare(
    module: ModuleOp,
    name: str = "main",
    seed: int = 0,
    options: CompileOptions | None = None,
    rtol: float = RTOL,
    inputs: Sequence[Any] | None = None,
) -> None:
    """Compile @name, run it on random (or given) inputs, compare with the reference."""
    function = reference.find_function(module, name)
    arrays = list(inputs) if inputs is not None else reference.random_inputs(function, seed)
    expected = reference.run(module, name, *arrays)
    compiled = graphfuse.compile(module, entry=name, options=options or CompileOptions())
    got = compiled(*arrays)
    assert_matches(got if isinstance(got, tuple) else (got,), expected, rtol)
