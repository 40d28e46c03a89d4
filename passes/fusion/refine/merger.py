"""Fusion merger (XLA): a kernel merges into all its consumers whenever that adds no bytes,
even where the time model sees no gain (priority fusion wants a gain)."""

from __future__ import annotations

from graphfuse.passes.fusion.refine.priority import candidates
from graphfuse.passes.fusion.refine.state import Refinement


def fusion_merger(state: Refinement) -> None:
    """Sweeps in IR order until a sweep merges nothing (each merge removes a kernel)."""
    while any(_merge_into_consumers(state, k) for k in state.plan.ordered()):
        pass


def _merge_into_consumers(state: Refinement, kernel: int) -> bool:
    if kernel not in state.plan.kernels:
        return False
    for change in candidates(state, kernel):
        if len(change.added) != 1:
            continue
        trial = state.trial(change)
        if trial.reason is None and trial.bytes_after <= trial.bytes_before:
            state.commit("merger", trial, "fused")
            return True
    return False
