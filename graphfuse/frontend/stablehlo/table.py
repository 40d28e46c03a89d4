"""The registry of StableHLO converters: one function per op name, filled by the op
families (elementwise, shapes, contractions, reductions) when they are imported."""

from __future__ import annotations

from collections.abc import Callable

from graphfuse.frontend.onnx_builder import Value
from graphfuse.frontend.stablehlo.builder import HloBuilder, HloOp

Converter = Callable[[HloBuilder, HloOp], list[Value]]

CONVERTERS: dict[str, Converter] = {}


def converts(*names: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of each op in `names`."""

    def register(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
        return fn

    return register
