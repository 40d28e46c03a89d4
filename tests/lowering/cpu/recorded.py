"""Recording what a CPU rewrite does as loop-tile-matmul calls it: the tests check that a
rewrite was taken (or not), not only that the results still match."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphfuse.lowering.cpu.gemm import loop_tile_matmul


def record_returns(monkeypatch: Any, name: str, rewrite: Callable[..., int]) -> list[int]:
    """Replaces loop_tile_matmul's `name` (which is `rewrite`) by a wrapper that records
    what it returns for each kernel, in a list the caller reads after compiling."""
    returned: list[int] = []

    def record(*args: Any) -> int:
        returned.append(rewrite(*args))
        return returned[-1]

    monkeypatch.setattr(loop_tile_matmul, name, record)
    return returned


def without_rewrite(monkeypatch: Any, name: str) -> None:
    """loop_tile_matmul runs without its rewrite `name` (a function of the kernel that
    returns how many nests it took): the tests of the paths it replaces still reach them."""
    monkeypatch.setattr(loop_tile_matmul, name, lambda *args: 0)
