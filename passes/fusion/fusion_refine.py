"""Refinement of the TVM partition, driven by the cost model (XLA and Ascend auto-fusion).

The TVM rules leave kernels that XLA and Ascend would merge. Each step below edits the
`Plan` and is a graph-fuse option; they run in this order:

1. limits: a partitioner kernel over max-inputs / max-results splits into its ops;
2. priority fusion (XLA): every kernel is a producer in a priority queue keyed by the
   estimated time saved by fusing it into all of its consumers at once, and the best
   goes first; after each fusion the new kernel and its producers are re-prioritised.
   A producer with several consumers either merges with all of them into one kernel
   (multi-output) or, when it is cheap (no reduction, matmul, conv or pooling), is
   recomputed in each (Ascend recomputation) -- whichever saves more, and recomputation
   only when it moves fewer bytes. A reduction fusing into the elementwise ops after it
   is reduction stitching (option `stitch`): softmax and layer-norm end as one kernel;
3. multi-output (sibling) fusion: kernels reading the same input over the same
   iteration space merge, so the input is read once;
4. fusion merger (XLA): a kernel merges into its consumers whenever that moves no more
   bytes, even where the time model sees no gain;
5. rollback (Ascend): a kernel that moves as many bytes as its ops would alone splits;
6. horizontal fusion: independent small kernels of one iteration space launch as one.

Every decision is logged with its reason and estimated benefit for `explain`.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from graphfuse.dialects.graph import FusionKind
from graphfuse.passes.fusion.fusion_legality import (
    Limits,
    cycle_reason,
    duplicable,
    illegal,
    violations,
)
from graphfuse.passes.fusion.graph_report_fusion import format_bytes
from graphfuse.passes.fusion.kernel_plan import Change, Plan, kernel_cycle

HORIZONTAL_MAX_BYTES = 1 << 20
"""Kernels moving more bytes than this are not small enough for horizontal fusion."""


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
class Refiner:
    """Runs the refinement steps over one plan, collecting explanation lines."""

    plan: Plan
    options: RefineOptions
    log: list[str] = field(default_factory=list[str])

    def run(self) -> None:
        options = self.options
        self.plan.compute_levels()
        self.enforce_limits()
        steps = (
            (options.priority, self.priority_fusion),
            (options.multi_output, self.sibling_fusion),
            (options.merger, self.fusion_merger),
            (options.rollback, self.rollback),
            (options.horizontal, self.horizontal_fusion),
        )
        for enabled, step in steps:
            if enabled:
                step()

    # ---- trying a change ---------------------------------------------------------------

    def trial(self, change: Change) -> Trial:
        plan = self.plan
        before_ids = plan.neighbourhood(change.removed)
        before = [plan.cost(k) for k in before_ids]
        old = set[tuple[int, int]]()
        for kernel in change.removed:
            old |= violations(plan.dag, plan.kernels[kernel], self.options.limits.stitch)
        merge = len(change.added) == 1
        cycle = cycle_reason(plan, change.removed) if merge else None
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
        self.plan.relevel(undo.added_ids)
        return undo.added_ids

    def reject(self, step: str, kernels: tuple[int, ...], reason: str) -> None:
        names = " + ".join(self.plan.label(k) for k in kernels)
        self.log.append(f"[{step}] {names}: not fused, {reason}")

    # ---- 1. limits ---------------------------------------------------------------------

    def enforce_limits(self) -> None:
        limits = self.options.limits
        for kernel in self.plan.ordered():
            plan = self.plan
            if kernel in plan.opaque or len(plan.kernels[kernel]) == 1:
                continue
            inputs, results = plan.inputs(kernel), len(plan.written(kernel))
            if inputs > limits.max_inputs or results > limits.max_results:
                self.log.append(
                    f"[limits] {plan.label(kernel)}: split into its ops, {inputs} inputs and "
                    f"{results} results (max-inputs={limits.max_inputs}, "
                    f"max-results={limits.max_results})"
                )
                self.split(kernel)

    def split(self, kernel: int) -> bool:
        """The kernel's owned nodes become kernels of their own; its copies are dropped
        (their owners now write them)."""
        plan = self.plan
        owned = [n for n in plan.kernels[kernel] if plan.owner[n] == kernel]
        copies = len(owned) != len(plan.kernels[kernel])
        undo = plan.apply(Change((kernel,), tuple(frozenset({n}) for n in owned)))
        if copies and kernel_cycle(plan) is not None:
            # Dropped copies make their consumers read the originals, whose kernels
            # may depend on this one: keep the kernel whole.
            plan.undo(undo)
            return False
        plan.relevel(undo.added_ids)
        return True

    # ---- 2. priority fusion ------------------------------------------------------------

    def candidates(self, producer: int) -> list[Change]:
        """Fusing `producer` into all its consumers: merged with them into one kernel, or
        (cheap producers with several consumers) recomputed in each."""
        plan = self.plan
        if producer in plan.opaque:
            return []
        consumers = plan.consumers(producer)
        if not consumers or any(c in plan.opaque for c in consumers):
            return []
        group = (producer, *consumers)
        merged = frozenset(n for k in group for n in plan.kernels[k])
        changes = [Change(group, (merged,))]
        if self.options.recompute and len(consumers) > 1 and duplicable(plan, producer):
            duplicated = self._duplication(producer, consumers)
            if duplicated is not None:
                changes.append(duplicated)
        return changes

    def _duplication(self, producer: int, consumers: list[int]) -> Change | None:
        plan = self.plan
        nodes = set(plan.kernels[producer])
        cones: list[frozenset[int]] = []
        for consumer in consumers:
            wanted = [plan.node_of(v.owner) for v in plan.read(consumer)]
            roots = [n for n in wanted if n is not None and n in nodes]
            cones.append(frozenset(_cone(plan, roots, nodes)))
        extern = [
            n
            for n in nodes
            for r in plan.dag.nodes[n].op.results
            if any(u.operation not in plan.dag.index_of for u in r.uses)
        ]
        remaining = frozenset(_cone(plan, extern, nodes))
        if remaining.union(*cones) != frozenset(nodes):
            return None
        added = [remaining] if remaining else []
        pairs = zip(consumers, cones, strict=True)
        added += [frozenset(plan.kernels[c]) | cone for c, cone in pairs]
        return Change((producer, *consumers), tuple(added))

    def best(self, producer: int) -> Trial | None:
        """The producer's most beneficial allowed fusion, if any saves time."""
        best: Trial | None = None
        rejected: Trial | None = None
        for change in self.candidates(producer):
            trial = self.trial(change)
            duplicates = len(change.added) != 1
            if trial.reason is not None or (duplicates and trial.bytes_after >= trial.bytes_before):
                rejected = rejected or trial
                continue
            if trial.saved_time > 0 and (best is None or trial.saved_time > best.saved_time):
                best = trial
        if best is None and rejected is not None and rejected.reason is not None:
            self.reject("priority", rejected.change.removed, rejected.reason)
        return best

    def priority_fusion(self) -> None:
        """XLA's loop: pop the most beneficial producer and fuse it, then measure the new
        kernel and its producers again. An entry measured before the latest commit is
        measured again before it is trusted: a kernel formed since may make it illegal (a
        cycle through it) or change its benefit; if it no longer leads, it goes back."""
        plan = self.plan
        order = itertools.count()
        commits = 0
        version: dict[int, int] = {}
        queue: list[tuple[float, int, int, int, int, Trial]] = []

        def enqueue(kernel: int, trial: Trial | None) -> None:
            version[kernel] = version.get(kernel, 0) + 1
            if trial is not None:
                entry = (-trial.saved_time, next(order), kernel, version[kernel], commits, trial)
                heapq.heappush(queue, entry)

        for kernel in plan.ordered():
            enqueue(kernel, self.best(kernel))
        while queue:
            _, _, kernel, seen, measured, trial = heapq.heappop(queue)
            if kernel not in plan.kernels or version[kernel] != seen:
                continue
            if measured != commits:
                fresh = self._measure_again(trial)
                if fresh is None or (queue and fresh.saved_time < -queue[0][0]):
                    enqueue(kernel, fresh)
                    continue
                trial = fresh
            copies = len(trial.change.added) > 1
            what = f"recomputed in {len(trial.change.removed) - 1} consumers" if copies else "fused"
            added = self.commit("priority", trial, what)
            commits += 1
            for affected in sorted(set(added) | plan.neighbourhood(added)):
                enqueue(affected, self.best(affected))

    def _measure_again(self, trial: Trial) -> Trial | None:
        """`trial`'s change measured on the plan as it is now, if still allowed and
        worth it (its kernels all still exist, so the producer's consumers are the same);
        otherwise the producer's best change now."""
        change = trial.change
        producer = change.removed[0]
        if any(k not in self.plan.kernels for k in change.removed):
            return self.best(producer)
        fresh = self.trial(change)
        duplicates = len(change.added) != 1
        worse = duplicates and fresh.bytes_after >= fresh.bytes_before
        if fresh.reason is not None or fresh.saved_time <= 0 or worse:
            return self.best(producer)
        return fresh

    # ---- 3. multi-output (sibling) fusion ------------------------------------------------

    def sibling_fusion(self) -> None:
        plan = self.plan
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
                merged = None if first is None else self._try_siblings(first, kernel, readers)
                first = merged if merged is not None else kernel

    def _try_siblings(self, a: int, b: int, readers: dict[SSAValue, list[int]]) -> int | None:
        """Merge two readers of one value; the merged kernel joins its values' readers."""
        if a not in self.plan.kernels:
            return None
        merged = self._try_merge("multi-output", a, b, same_space=True)
        if merged is not None:
            for value in self.plan.read(merged):
                readers.setdefault(value, []).append(merged)
        return merged

    def _try_merge(self, step: str, a: int, b: int, same_space: bool) -> int | None:
        plan = self.plan
        if same_space and plan.space(a) != plan.space(b):
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

    # ---- 4. fusion merger ----------------------------------------------------------------

    def fusion_merger(self) -> None:
        """Sweeps in IR order until a sweep merges nothing (each merge removes a kernel)."""
        while any(self._merge_into_consumers(k) for k in self.plan.ordered()):
            pass

    def _merge_into_consumers(self, kernel: int) -> bool:
        if kernel not in self.plan.kernels:
            return False
        for change in self.candidates(kernel):
            if len(change.added) != 1:
                continue
            trial = self.trial(change)
            if trial.reason is None and trial.bytes_after <= trial.bytes_before:
                self.commit("merger", trial, "fused")
                return True
        return False

    # ---- 5. rollback ---------------------------------------------------------------------

    def rollback(self) -> None:
        plan = self.plan
        for kernel in plan.ordered():
            if kernel in plan.opaque or len(plan.kernels[kernel]) == 1:
                continue
            fused = plan.cost(kernel).bytes_moved
            alone = sum(_alone_bytes(plan, n) for n in plan.kernels[kernel])
            if fused < alone:
                continue
            label = plan.label(kernel)
            verdict = "split into its ops" if self.split(kernel) else "kept (a split would cycle)"
            self.log.append(
                f"[rollback] {label}: {verdict}, it moves {format_bytes(fused)} where its "
                f"ops alone move {format_bytes(alone)}"
            )

    # ---- 6. horizontal fusion --------------------------------------------------------------

    def horizontal_fusion(self) -> None:
        plan = self.plan
        open_by_space: dict[tuple[int, ...], int] = {}
        for kernel in plan.ordered():
            if kernel in plan.opaque or kernel not in plan.kernels:
                continue
            if plan.cost(kernel).bytes_moved > self.options.horizontal_max_bytes:
                continue
            space = plan.space(kernel)
            earlier = open_by_space.get(space, -1)
            # Only independent kernels: one reading the other is the merger's business
            # (a path through a third kernel is refused as a cycle).
            if earlier not in plan.kernels or kernel in plan.consumers(earlier):
                open_by_space[space] = kernel
                continue
            merged = self._try_merge("horizontal", earlier, kernel, same_space=True)
            open_by_space[space] = merged if merged is not None else kernel


_ANCHOR = FusionKind.OUT_ELEMWISE_FUSABLE


def _cone(plan: Plan, roots: list[int], within: set[int]) -> set[int]:
    """`roots` and every node of `within` they depend on."""
    found: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in found:
            continue
        found.add(node)
        stack.extend(p for p in plan.dag.nodes[node].inputs if p in within)
    return found


def _alone_bytes(plan: Plan, node: int) -> int:
    """Bytes one op moves as a kernel of its own: its operands and results."""
    op = plan.dag.nodes[node].op
    return sum(plan.value_bytes(v) for v in dict.fromkeys(op.operands)) + sum(
        plan.value_bytes(r) for r in op.results
    )
