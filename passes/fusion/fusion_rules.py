"""The fusion rules of the partitioner, as one declarative table (TVM FuseOps' three phases).

A group fuses into its node's immediate post-dominator when a rule of the current phase
matches: the group's kind is one of `source`, the combined kind of the edges to the
post-dominator is one of `dominator_edge` (when given), every node strictly between
belongs to a group whose kind is one of `path`, the post-dominator's group kind is one of
`sink`, and the post-dominator itself is one of `sink_node`. TVM's RunFuse, as data:

- phase 0: out-elemwise-fusable anchors (matmul, conv2d, pooling) absorb an elementwise
  epilogue; elemwise/broadcast ops fuse into injective, reduction or anchor consumers;
- phase 1: elemwise/broadcast rule again, then injective ops (and tuples) into injective
  consumers, deferred so that anchors have finished growing;
- phase 2: injective ops join a tuple fused into an injective consumer. graphfuse has no
  tuple-producing op (concat takes its operands directly), so this fires only for ops
  declaring the tuple kind; it is kept so the table stays TVM's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from graphfuse.dialects.graph import FusionKind

K = FusionKind


class Phase(IntEnum):
    """The partitioner's passes over the DAG, in order."""

    ANCHORS = 0
    INJECTIVE = 1
    TUPLES = 2


@dataclass(frozen=True)
class FusionRule:
    """When a group may fuse into its node's immediate post-dominator."""

    name: str
    phases: frozenset[Phase]
    source: frozenset[FusionKind]
    dominator_edge: frozenset[FusionKind] | None
    path: frozenset[FusionKind]
    sink: frozenset[FusionKind]
    sink_node: frozenset[FusionKind]

    def describe(self) -> str:
        return f"{self.name} (phase {', '.join(str(int(p)) for p in sorted(self.phases))})"


_UP_TO_BROADCAST = frozenset({K.ELEMWISE, K.BROADCAST})
_UP_TO_INJECTIVE = frozenset({K.ELEMWISE, K.BROADCAST, K.INJECTIVE})
_NOT_TUPLE = frozenset(k for k in K if k is not K.TUPLE)

RULES: tuple[FusionRule, ...] = (
    FusionRule(
        name="anchor-epilogue",
        phases=frozenset({Phase.ANCHORS}),
        source=frozenset({K.OUT_ELEMWISE_FUSABLE}),
        dominator_edge=frozenset({K.ELEMWISE}),
        path=_UP_TO_BROADCAST,
        sink=_UP_TO_BROADCAST,
        sink_node=_NOT_TUPLE,
    ),
    FusionRule(
        name="elemwise-into-consumer",
        phases=frozenset({Phase.ANCHORS, Phase.INJECTIVE}),
        source=_UP_TO_BROADCAST,
        dominator_edge=_UP_TO_INJECTIVE | {K.REDUCTION},
        path=_UP_TO_INJECTIVE,
        sink=_UP_TO_INJECTIVE | {K.REDUCTION, K.OUT_ELEMWISE_FUSABLE},
        sink_node=_NOT_TUPLE,
    ),
    FusionRule(
        name="injective-chain",
        phases=frozenset({Phase.INJECTIVE}),
        source=frozenset({K.INJECTIVE, K.TUPLE}),
        dominator_edge=None,
        path=_UP_TO_INJECTIVE,
        sink=_UP_TO_INJECTIVE,
        sink_node=_NOT_TUPLE,
    ),
    FusionRule(
        name="into-fused-tuple",
        phases=frozenset({Phase.TUPLES}),
        source=_UP_TO_INJECTIVE,
        dominator_edge=None,
        path=_UP_TO_INJECTIVE,
        sink=_UP_TO_INJECTIVE,
        sink_node=frozenset({K.TUPLE}),
    ),
)


def rule_for(phase: Phase, source: FusionKind) -> FusionRule | None:
    """The rule that governs a group of kind `source` in `phase`, if any."""
    for rule in RULES:
        if phase in rule.phases and source in rule.source:
            return rule
    return None
