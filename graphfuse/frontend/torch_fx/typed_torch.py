"""Typed views of the torch APIs graphfuse calls whose annotations pyright cannot read.

torch's stubs leave some parameters unannotated (from_numpy, manual_seed), type an fx
node's target as any callable, and key the core ATen decomposition table by OperatorBase.
Each is cast here, once, to the type its documentation gives, so the code that uses them
(the front end, graphfuse.torch_backend, the test models) is checked strictly.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Protocol, cast

import numpy as np
import torch
from torch._decomp import core_aten_decompositions
from torch._ops import OpOverload


class _Untyped(Protocol):
    """The functions of the `torch` module used here, as documented."""

    def from_numpy(self, array: np.ndarray[Any, Any], /) -> torch.Tensor: ...

    def manual_seed(self, seed: int, /) -> torch.Generator: ...


_torch = cast(_Untyped, torch)
from_numpy = _torch.from_numpy
"""The tensor sharing an array's memory (torch.from_numpy)."""
manual_seed = _torch.manual_seed
"""Seed torch's random generators (torch.manual_seed)."""


def overload_of(node: torch.fx.Node) -> OpOverload | None:
    """The ATen op overload a call_function node calls, if it calls one."""
    target: object = node.target
    if not isinstance(target, OpOverload):
        return None
    # isinstance leaves OpOverload's signature parameters unknown; any overload will do.
    return cast(OpOverload, target)


@cache
def core_aten_table() -> dict[OpOverload, Callable[..., Any]]:
    """Core ATen's decompositions, in the type aot_module_simplified takes (the table is
    keyed by OperatorBase; every key is an op overload)."""
    return cast(dict[OpOverload, Callable[..., Any]], core_aten_decompositions())
