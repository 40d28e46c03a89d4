"""The registry of ONNX converters (one per op type) and what every converter shares.

A converter gets the builder, the node's inputs (SSA tensors, known arrays, or None for an
omitted optional input) and its attributes, and returns one value per node output. The
converters live in one module per family (onnx_elementwise, onnx_compound, onnx_nn,
onnx_tensor); `onnx_ops.CONVERTERS` is the full table once they are imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphfuse.frontend.onnx_builder import (
    Builder,
    Value,
)

Attrs = dict[str, Any]
Inputs = list[Value | None]
Converter = Callable[[Builder, Inputs, Attrs], list[Value]]

CONVERTERS: dict[str, Converter] = {}


def converter(*names: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
        return fn

    return register


def required(inputs: Inputs, index: int = 0) -> Value:
    value = inputs[index] if index < len(inputs) else None
    assert value is not None, f"input #{index} is required"
    return value


def optional(inputs: Inputs, index: int) -> Value | None:
    return inputs[index] if index < len(inputs) else None
