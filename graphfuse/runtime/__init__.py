"""Building compiled graphs and calling them with NumPy arrays."""

from graphfuse.runtime.compiled import ArgumentError, CompiledFunction

__all__ = ["ArgumentError", "CompiledFunction"]
