"""What an ATen builder gets: one fx node's arguments as graph values, and torch's types.

A builder turns one ATen op overload into graph-dialect ops through the ONNX front end's
`Builder` (onnx_builder), so known arrays (frozen weights, constants) fold at import and
every op is verified as it is made. Tensor arguments arrive as SSA values or NumPy arrays,
scalars and lists as Python values; the result's shape and element type come from the fake
tensor torch traced, so a builder never recomputes what torch already knows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np
import torch
from xdsl.ir import Attribute, SSAValue

from graphfuse.frontend.onnx_builder import Builder, Value, element_type_of

NUMPY_DTYPES: dict[torch.dtype, np.dtype[Any]] = {
    torch.float32: np.dtype(np.float32),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.bool: np.dtype(np.bool_),
}
"""The torch dtypes a mapped op may take or give (others run eagerly)."""

FLOAT = frozenset({torch.float32})
INDEX = frozenset({torch.float32, torch.int64, torch.int32})
"""float32 data with integer indices (embedding) or integer shape-only ops."""
LOGICAL = frozenset({torch.float32, torch.int64, torch.int32, torch.bool})
"""Comparisons, masks and selects."""


def element_of_dtype(dtype: torch.dtype, where: str) -> Attribute:
    """The graph element type of a torch dtype that NUMPY_DTYPES lists."""
    return element_type_of(NUMPY_DTYPES[dtype], where)


def is_value(value: object) -> TypeGuard[Value]:
    """Whether an argument is a tensor: an SSA value, or an array known at import."""
    return isinstance(value, SSAValue | np.ndarray)


@dataclass(frozen=True)
class Call:
    """One ATen call: `args`/`kwargs` as the fx node holds them, tensors as graph values."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    shape: tuple[int, ...]
    """The (first) result's shape, as torch traced it."""
    dtype: torch.dtype
    """The (first) result's dtype."""
    shapes: tuple[tuple[int, ...], ...] = ()
    """Every tensor result's shape (ops with several results)."""

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Positional argument `index`, else keyword `name`, else `default`."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)

    def scalar(self, value: float | int | bool) -> np.ndarray[Any, Any]:
        """A Python scalar as a known array of the result's dtype (torch's promotion:
        a scalar never changes a tensor's type)."""
        return np.asarray(value, NUMPY_DTYPES[self.dtype])


Build = Callable[[Builder, Call], Value | tuple[Value, ...]]
Accepts = Callable[[torch.fx.Node], bool]


def _always(node: torch.fx.Node) -> bool:
    return True


@dataclass(frozen=True)
class AtenOp:
    """How one ATen overload becomes graph ops, and which calls of it graphfuse takes."""

    build: Build
    dtypes: frozenset[torch.dtype] = FLOAT
    """The dtypes every tensor argument and result may have."""
    results: int = 1
    """How many leading results graphfuse computes (native_layer_norm: the output, not its
    saved mean and rstd); the others are never used in inference graphs."""
    accepts: Accepts = field(default=_always)
    """Whether graphfuse computes this call (ceil_mode=False, a 2-D convolution, ...)."""


def int_list(value: Any, count: int) -> list[int]:
    """An ATen int[] argument (one int repeated, or a list) as `count` ints."""
    if isinstance(value, int):
        return [value] * count
    values = [int(v) for v in value]
    return values * count if len(values) == 1 else values


def dims(value: Any, rank: int) -> list[int]:
    """An ATen dim / dim[] argument normalised; None or [] means every dimension."""
    if value is None:
        return list(range(rank))
    listed: Sequence[int] = [value] if isinstance(value, int) else list(value)
    if not listed:
        return list(range(rank))
    return sorted(d % rank if rank else 0 for d in listed)
