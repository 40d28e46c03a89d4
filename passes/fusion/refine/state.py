"""What the refinement steps share, and how one of them tries a change before making it.

A `Refinement` holds the kernel plan, its levels, the options and the explanation log. A
step measures a `Change` with `trial` (apply, measure, undo: nothing stays changed), then
makes it with `commit` or logs with `reject` why it may not; `merge` does all three for two
kernels. Benefits are the cost model's estimated time and bytes moved (`cost_model`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.fusion.fusion_legality import Limits, cycle_reason, illegal, violations
from graphfuse.passes.fusion.graph_report_fusion import format_bytes
from graphfuse.passes.fusion.kernel_levels import KernelLevels
from graphfuse.passes.fusion.kernel_plan import Change, Plan

HORIZONTAL_MAX_BYTES = 1 << 20
"""Kernels moving more bytes than this are not small enough for horizontal fusion."""

_ANCHOR = FusionKind.OUT_ELEMWISE_FUSABLE


@dataclass(frozen=True)
class RefineOptions:
    """Which refinement steps run, and their limits (graph-fuse options)."""

    limits: Limits
    priority: bool = True
    recompute: bool = True
    multi_output: bool = True
    merger: bool = True
    rollback: bool = True
    horizontal: bool = True
    horizontal_max_bytes: int = HORIZONTAL_MAX_BYTES


@dataclass(frozen=True)
class Trial:
    """A change's estimated effect, or why it is not allowed."""

    change: Change
    saved_time: float
    bytes_before: int
    bytes_after: int
    reason: str | None

    def describe(self) -> str:
        return (
            f"saves {format_bytes(self.bytes_before - self.bytes_after)}, "
            f"{self.saved_time * 1e6:.2f} us"
        )


@dataclass
class Refinement:
    """One plan being refined, with the explanation lines collected so far."""

    plan: Plan
    options: RefineOptions
    log: list[str] = field(default_factory=list[str])
    levels: KernelLevels = field(init=False)
    """The plan's kernel levels: empty until the driver computes them (`KernelLevels`)."""

    def __post_init__(self) -> None:
        self.levels = KernelLevels(self.plan)

    def trial(self, change: Change) -> Trial:
        plan = self.plan
        before_ids = plan.neighbourhood(change.removed)
        before = [plan.cost(k) for k in before_ids]
        old = set[tuple[int, int]]()
        for kernel in change.removed:
            old |= violations(plan.dag, plan.kernels[kernel], self.options.limits.stitch)
        merge = len(change.added) == 1
        # Recomputing a producer in its consumers cannot close a cycle: they already
        # depended on everything the copies read.
        cycle = cycle_reason(self.levels, change.removed) if merge else None
        undo = plan.apply(change, before_ids)
        try:
            reason = cycle or illegal(plan, undo.added_ids, old, self.options.limits)
            after_ids = (before_ids - set(change.removed)) | set(undo.added_ids)
            after = [plan.cost(k) for k in after_ids]
        finally:
            plan.undo(undo)
        target = plan.target
        saved = sum(c.time(target) for c in before) - sum(c.time(target) for c in after)
        return Trial(
            change,
            saved,
            sum(c.bytes_moved for c in before),
            sum(c.bytes_moved for c in after),
            reason,
        )

    def commit(self, step: str, trial: Trial, what: str) -> list[int]:
        names = " + ".join(self.plan.label(k) for k in trial.change.removed)
        undo = self.plan.apply(trial.change)
        self.log.append(f"[{step}] {names}: {what}, {trial.describe()}")
        self.levels.relevel(undo.added_ids)
        return undo.added_ids

    def reject(self, step: str, kernels: tuple[int, ...], reason: str) -> None:
        names = " + ".join(self.plan.label(k) for k in kernels)
        self.log.append(f"[{step}] {names}: not fused, {reason}")

    def merge(self, step: str, a: int, b: int) -> int | None:
        """Merge kernels `a` and `b` of one iteration space when allowed and no bytes are
        added; the merged kernel, or None."""
        plan = self.plan
        if plan.space(a) != plan.space(b):
            return None
        if _ANCHOR in plan.kinds(a) and _ANCHOR in plan.kinds(b):
            # Two matmuls (convs) in one kernel share no loads: each re-reads its input
            # along its own reduction, so the bytes the model saves are not saved. XLA
            # likewise never multi-output fuses its library-call GEMMs.
            self.reject(step, (a, b), "both kernels hold a matmul, conv or pooling")
            return None
        change = Change((a, b), (frozenset(plan.kernels[a]) | frozenset(plan.kernels[b]),))
        trial = self.trial(change)
        if trial.reason is not None:
            self.reject(step, change.removed, trial.reason)
            return None
        if trial.saved_time <= 0 or trial.bytes_after > trial.bytes_before:
            return None
        return self.commit(step, trial, "fused")[0]
