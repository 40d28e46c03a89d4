"""Building compiled graphs and calling them with NumPy arrays.

`CompiledFunction` and `ArgumentError` are loaded on first use, so that the build modules
below (a cached library's install: compile_cache) import neither xDSL nor NumPy."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphfuse.runtime.compiled import ArgumentError, CompiledFunction

__all__ = ["ArgumentError", "CompiledFunction"]


def __getattr__(name: str):  # noqa: ANN202 - lazy, as graphfuse/__init__.py
    if name in __all__:
        from graphfuse.runtime import compiled

        return getattr(compiled, name)
    raise AttributeError(f"module 'graphfuse.runtime' has no attribute {name!r}")
