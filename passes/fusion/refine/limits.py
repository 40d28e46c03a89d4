"""The refinement steps that split kernels into their ops: limits and rollback (Ascend).

Limits run first: a partitioner kernel over max-inputs or max-results splits. Rollback runs
after the fusing steps: a kernel that moves as many bytes as its ops would alone gains
nothing from being one kernel, and splits. A split that would put a cycle between kernels
(see `split`) is not made.
"""

from __future__ import annotations

from graphfuse.passes.fusion.graph_report_fusion import format_bytes
from graphfuse.passes.fusion.kernel_plan import Change, Plan, kernel_cycle
from graphfuse.passes.fusion.refine.state import Refinement


def enforce_limits(state: Refinement) -> None:
    limits = state.options.limits
    plan = state.plan
    for kernel in plan.ordered():
        if kernel in plan.opaque or len(plan.kernels[kernel]) == 1:
            continue
        inputs, results = plan.inputs(kernel), len(plan.written(kernel))
        if inputs > limits.max_inputs or results > limits.max_results:
            state.log.append(
                f"[limits] {plan.label(kernel)}: split into its ops, {inputs} inputs and "
                f"{results} results (max-inputs={limits.max_inputs}, "
                f"max-results={limits.max_results})"
            )
            split(state, kernel)


def rollback(state: Refinement) -> None:
    plan = state.plan
    for kernel in plan.ordered():
        if kernel in plan.opaque or len(plan.kernels[kernel]) == 1:
            continue
        fused = plan.cost(kernel).bytes_moved
        alone = sum(_alone_bytes(plan, n) for n in plan.kernels[kernel])
        if fused < alone:
            continue
        label = plan.label(kernel)
        verdict = "split into its ops" if split(state, kernel) else "kept (a split would cycle)"
        state.log.append(
            f"[rollback] {label}: {verdict}, it moves {format_bytes(fused)} where its "
            f"ops alone move {format_bytes(alone)}"
        )


def split(state: Refinement, kernel: int) -> bool:
    """The kernel's owned nodes become kernels of their own; its copies are dropped
    (their owners now write them). Whether the split was made."""
    plan = state.plan
    owned = [n for n in plan.kernels[kernel] if plan.owner[n] == kernel]
    copies = len(owned) != len(plan.kernels[kernel])
    undo = plan.apply(Change((kernel,), tuple(frozenset({n}) for n in owned)))
    if copies and kernel_cycle(plan) is not None:
        # Dropped copies make their consumers read the originals, whose kernels
        # may depend on this one: keep the kernel whole.
        plan.undo(undo)
        return False
    state.levels.relevel(undo.added_ids)
    return True


def _alone_bytes(plan: Plan, node: int) -> int:
    """Bytes one op moves as a kernel of its own: its operands and results."""
    op = plan.dag.nodes[node].op
    return sum(plan.value_bytes(v) for v in dict.fromkeys(op.operands)) + sum(
        plan.value_bytes(r) for r in op.results
    )
