"""Priority fusion (XLA): producers fuse into all their consumers, best estimated gain first.

Every kernel is a producer in a priority queue keyed by the estimated time saved by fusing
it into all of its consumers at once; after each fusion the new kernel and its producers are
measured again. A producer with several consumers either merges with all of them into one
kernel (multi-output) or, when it is cheap (no reduction, matmul, conv or pooling), is
recomputed in each (Ascend recomputation, option `recompute`): whichever saves more, and
recomputation only when it moves fewer bytes. A reduction fusing into the elementwise ops
after it is reduction stitching (option `stitch`): softmax and layer-norm end as one kernel.
"""

from __future__ import annotations

import heapq
import itertools

from graphfuse.passes.fusion.fusion_legality import duplicable
from graphfuse.passes.fusion.kernel_plan import Change, Plan
from graphfuse.passes.fusion.refine.state import Refinement, Trial


def candidates(state: Refinement, producer: int) -> list[Change]:
    """Fusing `producer` into all its consumers: merged with them into one kernel, or
    (cheap producers with several consumers) recomputed in each."""
    plan = state.plan
    if producer in plan.opaque:
        return []
    consumers = plan.consumers(producer)
    if not consumers or any(c in plan.opaque for c in consumers):
        return []
    group = (producer, *consumers)
    merged = frozenset(n for k in group for n in plan.kernels[k])
    changes = [Change(group, (merged,))]
    if state.options.recompute and len(consumers) > 1 and duplicable(plan, producer):
        duplicated = _duplication(plan, producer, consumers)
        if duplicated is not None:
            changes.append(duplicated)
    return changes


def _duplication(plan: Plan, producer: int, consumers: list[int]) -> Change | None:
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


def best(state: Refinement, producer: int) -> Trial | None:
    """The producer's most beneficial allowed fusion, if any saves time."""
    found: Trial | None = None
    rejected: Trial | None = None
    for change in candidates(state, producer):
        trial = state.trial(change)
        duplicates = len(change.added) != 1
        if trial.reason is not None or (duplicates and trial.bytes_after >= trial.bytes_before):
            rejected = rejected or trial
            continue
        if trial.saved_time > 0 and (found is None or trial.saved_time > found.saved_time):
            found = trial
    if found is None and rejected is not None and rejected.reason is not None:
        state.reject("priority", rejected.change.removed, rejected.reason)
    return found


def priority_fusion(state: Refinement) -> None:
    """XLA's loop: pop the most beneficial producer and fuse it, then measure the new
    kernel and its producers again. An entry measured before the latest commit is
    measured again before it is trusted: a kernel formed since may make it illegal (a
    cycle through it) or change its benefit; if it no longer leads, it goes back."""
    plan = state.plan
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
        enqueue(kernel, best(state, kernel))
    while queue:
        _, _, kernel, seen, measured, trial = heapq.heappop(queue)
        if kernel not in plan.kernels or version[kernel] != seen:
            continue
        if measured != commits:
            fresh = _measure_again(state, trial)
            if fresh is None or (queue and fresh.saved_time < -queue[0][0]):
                enqueue(kernel, fresh)
                continue
            trial = fresh
        copies = len(trial.change.added) > 1
        what = f"recomputed in {len(trial.change.removed) - 1} consumers" if copies else "fused"
        added = state.commit("priority", trial, what)
        commits += 1
        for affected in sorted(set(added) | plan.neighbourhood(added)):
            enqueue(affected, best(state, affected))


def _measure_again(state: Refinement, trial: Trial) -> Trial | None:
    """`trial`'s change measured on the plan as it is now, if still allowed and
    worth it (its kernels all still exist, so the producer's consumers are the same);
    otherwise the producer's best change now."""
    change = trial.change
    producer = change.removed[0]
    if any(k not in state.plan.kernels for k in change.removed):
        return best(state, producer)
    fresh = state.trial(change)
    duplicates = len(change.added) != 1
    worse = duplicates and fresh.bytes_after >= fresh.bytes_before
    if fresh.reason is not None or fresh.saved_time <= 0 or worse:
        return best(state, producer)
    return fresh
