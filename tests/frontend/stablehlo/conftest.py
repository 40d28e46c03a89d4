"""JAX's default precision for these tests: graphfuse.testing.to_jax turns on 64-bit mode
for the whole process when some other test imports it first (pytest-xdist puts tests of
several files in one worker), and then a Python float is float64 in the functions traced
here (`jnp.pad(x, 1, constant_values=0.0)` on float32 fails inside JAX)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _jax_32_bit() -> Iterator[None]:
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", before)
