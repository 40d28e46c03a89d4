"""A topological labelling of a `Plan`'s kernel graph, kept up to date as the plan changes.

Only the refinement needs it (a plan left as the TVM rules made it has none): levels rise
along every path between kernels, so the search for a kernel between two that would merge
(`path_between`, which would close a cycle) stops at the highest level among them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graphfuse.passes.fusion.kernel_plan import Plan


@dataclass
class KernelLevels:
    """`level[k]` per kernel of `plan`: every kernel's level exceeds its producers'."""

    plan: Plan
    level: dict[int, int] = field(default_factory=dict[int, int])

    def compute(self) -> None:
        """Label every kernel from scratch."""
        self.level = {}
        for kernel in self.plan.ordered():
            self._level_from_producers(kernel)
        changed = True
        while changed:  # kernels need not be convex in IR order: settle
            changed = False
            for kernel in self.plan.ordered():
                changed |= self._raise_consumers(kernel)

    def _level_from_producers(self, kernel: int) -> None:
        below = [self.level.get(p, -1) for p in self.plan.producers(kernel) if p != kernel]
        self.level[kernel] = max(below, default=-1) + 1

    def _raise_consumers(self, kernel: int) -> bool:
        """Lift consumers (transitively) above `kernel`; whether any level changed."""
        changed = False
        stack = [kernel]
        # In an acyclic graph a raised level exceeds `kernel`'s by at most the length of
        # a path from it; past that a change made a cycle, which must fail here rather
        # than loop for ever.
        bound = self.level[kernel] + len(self.plan.kernels)
        while stack:
            current = stack.pop()
            for after in self.plan.consumers(current):
                if self.level.get(after, -1) <= self.level[current]:
                    self.level[after] = self.level[current] + 1
                    assert self.level[after] <= bound, "the kernel graph has a cycle"
                    stack.append(after)
                    changed = True
        return changed

    def relevel(self, added: Sequence[int]) -> None:
        """Restore the labelling after a committed change added `added`."""
        for kernel in sorted(added, key=lambda k: self.plan.kernels[k][0]):
            self._level_from_producers(kernel)
        for kernel in added:
            self._raise_consumers(kernel)

    def path_between(self, kernels: Iterable[int]) -> int | None:
        """A kernel outside `kernels` on a path from one of them to another (merging them
        would make a cycle), or None. Kernels at or above the highest level of `kernels`
        cannot lead back into them."""
        plan = self.plan
        group = set(kernels)
        top = max(self.level[k] for k in group)
        frontier = [c for k in group for c in plan.consumers(k) if c not in group]
        seen: set[int] = set()
        while frontier:
            current = frontier.pop()
            if current in seen or self.level[current] >= top:
                continue
            seen.add(current)
            for after in plan.consumers(current):
                if after in group:
                    return current
                frontier.append(after)
        return None
