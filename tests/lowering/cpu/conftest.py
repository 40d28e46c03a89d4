"""Fixtures shared by the tests of loop-tile-matmul's CPU rewrites."""

from __future__ import annotations

from typing import Any

import pytest

from tests.lowering.cpu.recorded import without_rewrite


@pytest.fixture
def padded_copy_path(monkeypatch: Any) -> None:
    """Depthwise convolutions at stride 2, or on rows of several vectors, are computed from
    the input rows by depthwise_rows.py; with this fixture they take the padded-copy path
    it replaced, which pools and the convolutions it leaves still take, so the tests of
    that path still reach it."""
    without_rewrite(monkeypatch, "depthwise_rows")
