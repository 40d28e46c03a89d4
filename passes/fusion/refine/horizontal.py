"""Horizontal fusion: independent small kernels of one iteration space launch as one.

Small means moving at most `horizontal_max_bytes` (option). Merging saves a kernel launch;
like multi-output fusion, it must add no bytes and save time (`Refinement.merge`).
"""

from __future__ import annotations

from graphfuse.passes.fusion.refine.state import Refinement


def horizontal_fusion(state: Refinement) -> None:
    plan = state.plan
    open_by_space: dict[tuple[int, ...], int] = {}
    for kernel in plan.ordered():
        if kernel in plan.opaque or kernel not in plan.kernels:
            continue
        if plan.cost(kernel).bytes_moved > state.options.horizontal_max_bytes:
            continue
        space = plan.space(kernel)
        earlier = open_by_space.get(space, -1)
        # Only independent kernels: one reading the other is the merger's business
        # (a path through a third kernel is refused as a cycle).
        if earlier not in plan.kernels or kernel in plan.consumers(earlier):
            open_by_space[space] = kernel
            continue
        merged = state.merge("horizontal", earlier, kernel)
        open_by_space[space] = merged if merged is not None else kernel
