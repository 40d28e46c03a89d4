"""The cost-model refinement of the TVM partition (XLA and Ascend auto-fusion): the driver.

The TVM rules leave kernels that XLA and Ascend would merge. `Refiner` runs these steps over
the kernel `Plan`, in this order; each is a graph-fuse option and a module of `refine/`:

1. limits: a partitioner kernel over max-inputs / max-results splits into its ops;
2. priority fusion (XLA): producers fuse into all their consumers, best estimated time
   saved first, merged with them or recomputed in each (Ascend); reductions stitch;
3. multi-output (sibling) fusion: kernels reading one input over one space merge;
4. fusion merger (XLA): a kernel merges into its consumers whenever no bytes are added;
5. rollback (Ascend): a kernel moving as many bytes as its ops would alone splits;
6. horizontal fusion: independent small kernels of one iteration space launch as one.

Every decision is logged with its reason and estimated benefit for `explain`.
"""

from __future__ import annotations

from graphfuse.passes.fusion.refine import horizontal, limits, merger, multi_output, priority
from graphfuse.passes.fusion.refine.state import HORIZONTAL_MAX_BYTES, Refinement, RefineOptions

__all__ = ["HORIZONTAL_MAX_BYTES", "RefineOptions", "Refiner"]


class Refiner(Refinement):
    """Runs the refinement steps over one plan in order, collecting explanation lines.

    Each step is a function of its `refine` module over the shared `Refinement`, bound
    here as a method, so that one step can also run alone."""

    enforce_limits = limits.enforce_limits
    priority_fusion = priority.priority_fusion
    sibling_fusion = multi_output.sibling_fusion
    fusion_merger = merger.fusion_merger
    rollback = limits.rollback
    horizontal_fusion = horizontal.horizontal_fusion

    def run(self) -> None:
        options = self.options
        self.levels.compute()
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
