"""Multi-output (sibling) fusion: kernels reading the same input merge, so it is read once.

Only kernels of one iteration space merge (their loops can be shared), and only when the
merge adds no bytes and saves time (`Refinement.merge`).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from graphfuse.passes.fusion.refine.state import Refinement


def sibling_fusion(state: Refinement) -> None:
    plan = state.plan
    readers: dict[SSAValue, list[int]] = {}
    for kernel in plan.ordered():
        if kernel not in plan.opaque:
            for value in plan.read(kernel):
                readers.setdefault(value, []).append(kernel)
    for kernels in list(readers.values()):
        first: int | None = None
        for kernel in kernels:
            if kernel not in plan.kernels or kernel == first:
                continue
            merged = None if first is None else _try_siblings(state, first, kernel, readers)
            first = merged if merged is not None else kernel


def _try_siblings(
    state: Refinement, a: int, b: int, readers: dict[SSAValue, list[int]]
) -> int | None:
    """Merge two readers of one value; the merged kernel joins its values' readers."""
    if a not in state.plan.kernels:
        return None
    merged = state.merge("multi-output", a, b)
    if merged is not None:
        for value in state.plan.read(merged):
            readers.setdefault(value, []).append(merged)
    return merged
