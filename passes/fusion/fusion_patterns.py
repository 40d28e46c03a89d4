"""Hand-written fusion patterns as data: chains of ops outlined as one kernel before the
partitioner runs (the classic vendor patterns: conv2d+bias+relu, conv2d+batch-norm+relu,
matmul+bias+activation).

A chain lists, step by step, the op names allowed (`|` separates alternatives); each op
after the first must read the previous op's result. A match also requires that every
value computed inside the chain is used only inside it, so outlining never duplicates
work or changes what leaves the kernel. Both the compound form (before `graph-decompose`)
and the opened form of each activation and normalisation are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from graphfuse.dialects.graph import FusionKind

_ACTIVATION = "graph.relu|graph.sigmoid|graph.tanh|graph.gelu|graph.silu"


@dataclass(frozen=True)
class ChainPattern:
    """A named chain of ops that becomes one kernel of `kind`."""

    name: str
    chain: tuple[str, ...]
    kind: FusionKind = FusionKind.OUT_ELEMWISE_FUSABLE

    def step_names(self, index: int) -> frozenset[str]:
        return frozenset(self.chain[index].split("|"))

    def match(self, root: Operation) -> list[Operation] | None:
        """The chain's ops starting at `root`, in order, or None if it does not match.

        Where a value has several users of the next step's kind, each is tried in turn
        (an opened GELU reads its input twice), so the first full match wins.
        """
        if root.name not in self.step_names(0) or len(root.results) != 1:
            return None
        return self._extend([root])

    def _extend(self, members: list[Operation]) -> list[Operation] | None:
        if len(members) == len(self.chain):
            return members if _self_contained(members) else None
        names = self.step_names(len(members))
        candidates = (use.operation for use in members[-1].results[0].uses)
        for user in candidates:
            if user.name not in names or user in members or len(user.results) != 1:
                continue
            if (found := self._extend([*members, user])) is not None:
                return found
        return None


def _self_contained(members: Sequence[Operation]) -> bool:
    """Values computed inside the chain (all but the last op's) are used only inside it."""
    inside = set(members)
    block = members[0].parent_block()
    if any(op.parent_block() is not block for op in members):
        return False
    return all(
        use.operation in inside
        for op in members[:-1]
        for result in op.results
        for use in result.uses
    )


PATTERNS: tuple[ChainPattern, ...] = (
    # Longest first: a conv followed by an opened batch-norm, then one with a bias.
    ChainPattern(
        "conv2d_bn_relu", ("graph.conv2d", "graph.sub", "graph.mul", "graph.add", "graph.relu")
    ),
    ChainPattern("conv2d_bn_relu", ("graph.conv2d", "graph.batch_norm", "graph.relu")),
    ChainPattern("conv2d_bias_relu", ("graph.conv2d", "graph.add", "graph.relu")),
    ChainPattern(
        "matmul_bias_gelu_tanh",
        (
            "graph.matmul",
            "graph.add",
            "graph.mul",
            "graph.mul",
            "graph.mul",
            "graph.add",
            "graph.mul",
            "graph.tanh",
            "graph.add",
            "graph.mul",
            "graph.mul",
        ),
    ),  # fmt: skip
    ChainPattern(
        "matmul_bias_gelu",
        (
            "graph.matmul",
            "graph.add",
            "graph.mul",
            "graph.erf",
            "graph.add",
            "graph.mul",
            "graph.mul",
        ),
    ),  # fmt: skip
    ChainPattern("matmul_bias_silu", ("graph.matmul", "graph.add", "graph.sigmoid", "graph.mul")),
    ChainPattern("matmul_bias_activation", ("graph.matmul", "graph.add", _ACTIVATION)),
)
