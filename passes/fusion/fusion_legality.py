"""When a refinement `Change` may be made: the limits, acyclicity, and no multiplied work.

Pure predicates over a `Plan` with the change applied (see `fusion_refine`):
- limits (Ascend-style stop-fusion options): ops, inputs and results per kernel;
- acyclicity: no path of kernels from one merged kernel to another through a third
  (`cycle_reason`); recomputing a producer in its consumers cannot close a cycle;
- no multiplied work, as a kernel recomputes a value wherever it is read:
  * an op read by matmul, conv2d or pooling would be recomputed per output: never fused,
    unless it and all upstream of it in the kernel are layout ops the anchor reads in
    place (`_read_in_place`): transposes (attention's `K^T`, read as onnxruntime's MatMul
    reads a transposed B) and, into a matmul, slices and reshapes (attention's heads);
    or one-flop elementwise ops into a pooling whose windows overlap little
    (`_cheap_into_pool`: ReLU before MaxPool);
  * an anchor's result may only flow on elementwise, at its own shape (TVM's epilogue);
  * two anchors never share a loop nest (`_shared_nests`): loop-tile-matmul takes a nest
    with one contraction, so SwiGLU's gate and up projections, merged as siblings sharing
    their input, would both run as untiled dot products;
  * a reduction may feed later ops (option `stitch`) only while they are no larger than
    its input, or it would be recomputed for each of the consumer's rows;
  * a reduction never reads its input through layout ops other than reshapes (`_shuffled`:
    transposes, slices, concats): a row kernel walks each row in two or three passes (a
    layer-norm's mean, variance, normalise), each of which would redo the gather element
    by element, where a copy kernel before it makes the rows contiguous once (MobileViT's
    unfold before its layer-norm: 538 us fused, 197 us as a copy and a row kernel).
Only violations a change *adds* count, so kernels the TVM rules formed stay legal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind
from graphfuse.dialects.graph.shape_rules import reshape_kept_dims
from graphfuse.dialects.graph.tiling_threshold import worth_tiling
from graphfuse.passes.analysis.cost_model import elementwise_flops
from graphfuse.passes.analysis.dataflow import DataflowGraph
from graphfuse.passes.analysis.post_dominators import combine
from graphfuse.passes.fusion.kernel_levels import KernelLevels
from graphfuse.passes.fusion.kernel_plan import Plan

K = FusionKind
_EPILOGUE = (K.ELEMWISE, K.BROADCAST)
"""Kinds an anchor's result may flow on into inside its kernel (read elementwise): any
other use would need the result stored anyway."""


@dataclass(frozen=True)
class Limits:
    """Stop-fusion limits a refined kernel must keep (pass options of graph-fuse)."""

    max_ops: int
    max_inputs: int
    max_results: int
    stitch: bool


def _edge_kind(dag: DataflowGraph, producer: int, consumer: int) -> FusionKind:
    kinds = [e.kind for e in dag.nodes[producer].outputs if e.consumer == consumer]
    result = kinds[0]
    for kind in kinds[1:]:
        result = combine(result, kind)
    return result


def violations(dag: DataflowGraph, nodes: Iterable[int], stitch: bool) -> set[tuple[int, int]]:
    """(upstream node, node) pairs of one kernel that would multiply work (module doc)."""
    members = sorted(set(nodes))
    inside = set(members)
    anchors: dict[int, set[int]] = {}
    reductions: dict[int, set[int]] = {}
    found: set[tuple[int, int]] = set()
    for node in members:
        kind = dag.nodes[node].kind
        anchors[node] = {node} if kind is K.OUT_ELEMWISE_FUSABLE else set()
        reductions[node] = {node} if dag.nodes[node].reduced is not None else set()
        for producer in dag.nodes[node].inputs:
            if producer not in inside:
                continue
            if (
                kind is K.OUT_ELEMWISE_FUSABLE
                and not _layout_only(dag, producer, node, inside)
                and not _cheap_into_pool(dag, producer, node, inside)
            ):
                found.add((producer, node))
            epilogue = kind in _EPILOGUE and _edge_kind(dag, producer, node) is K.ELEMWISE
            if not epilogue:
                found.update((a, node) for a in anchors[producer])
            anchors[node] |= anchors[producer]
            if not stitch:
                found.update((r, node) for r in reductions[producer])
            reductions[node] |= reductions[producer]
        if dag.nodes[node].reduced is not None:
            found.update(
                (producer, node)
                for producer in dag.nodes[node].inputs
                if producer in inside and _shuffled(dag, producer, inside)
            )
        size = dag.nodes[node].elements
        for reduction in reductions[node] - {node}:
            source = dag.nodes[reduction].reduced
            if source is not None and size > source:
                found.add((reduction, node))
    found.update(_shared_nests(dag, members, anchors))
    return found


def _splits_only(op: graph.ReshapeOp) -> bool:
    """Whether the reshape only splits one run of input dims (the dims it keeps at the front
    and back aside), so its index map reads the input at an affine index."""
    source = graph.shape_of(op.input)
    head, tail = reshape_kept_dims(source, graph.shape_of(op.result))
    return len(source) - head - tail <= 1


def _read_in_place(op: Operation, anchor: Operation) -> bool:
    """A layout op `anchor` can read through without recomputing anything. Any anchor reads
    through a transpose (an NHWC image into a convolution). Only a matmul reads through
    slices and reshapes: a convolution copies its input into a padded NHWC buffer only
    when it is a kernel input (a grouped convolution's per-group slices, read in place,
    made im2col pack point by point: 4x slower). A reshape that merges dims goes only into
    a matmul big enough to tile, whose operands are packed once per call (a small one would
    pay the div/mod for every multiply-add)."""
    if isinstance(op, graph.TransposeOp):
        return True
    if not isinstance(anchor, graph.MatmulOp):
        return False
    if isinstance(op, graph.ReshapeOp):
        return _splits_only(op) or _tiled_matmul(anchor)
    return isinstance(op, graph.SliceOp)


POOL_RECOMPUTE_LIMIT = 4
"""A pooling window reads each input element about kh*kw / (sh*sw) times; up to this many
recomputations of a one-flop elementwise producer cost less than storing and reloading it."""


def _cheap_into_pool(dag: DataflowGraph, node: int, anchor: int, inside: set[int]) -> bool:
    """`node` and everything upstream of it in the kernel are one-flop elementwise ops
    (ReLU, add, max, ...) and `anchor` is a pooling whose windows overlap little."""
    pool = dag.nodes[anchor].op
    if not isinstance(pool, graph.Pool2dOp):
        return False
    window = math.prod(pool.kernel.get_values()) / math.prod(pool.strides.get_values())
    if window > POOL_RECOMPUTE_LIMIT:
        return False
    upstream = _upstream_inside(dag, node, inside)
    return all(
        dag.nodes[n].kind in _EPILOGUE and elementwise_flops(dag.nodes[n].op) == 1 for n in upstream
    )


def _upstream_inside(dag: DataflowGraph, node: int, inside: set[int]) -> set[int]:
    pending, seen = [node], set[int]()
    while pending:
        current = pending.pop()
        if current not in seen:
            seen.add(current)
            pending.extend(p for p in dag.nodes[current].inputs if p in inside)
    return seen


def _shuffled(dag: DataflowGraph, node: int, inside: set[int]) -> bool:
    """`node` or an op upstream of it inside the kernel moves data other than by a reshape
    (a transpose, slice, concat, gather, pad or broadcast)."""
    return any(
        dag.nodes[n].kind is K.INJECTIVE and not isinstance(dag.nodes[n].op, graph.ReshapeOp)
        for n in _upstream_inside(dag, node, inside)
    )


def _tiled_matmul(op: Operation) -> bool:
    """An f32 matmul loop-tile-matmul computes as a GEMM, packing its operands."""
    if not isinstance(op, graph.MatmulOp):
        return False
    result = graph.tensor_type_of(op.result)
    if len(graph.shape_of(op.lhs)) < 2 or graph.shape_of(op.lhs)[-2] < 2:
        return False  # one row: loop-tile-matmul finds no rows to tile (contractions.py)
    points = math.prod(result.get_shape())
    reduction = graph.shape_of(op.lhs)[-1]
    return isinstance(result.get_element_type(), Float32Type) and worth_tiling(points, reduction)


def _layout_only(dag: DataflowGraph, node: int, anchor: int, inside: set[int]) -> bool:
    """`node` and every op upstream of it inside the kernel are read in place by `anchor`."""
    op = dag.nodes[anchor].op
    return all(_read_in_place(dag.nodes[n].op, op) for n in _upstream_inside(dag, node, inside))


def _shared_nests(
    dag: DataflowGraph, members: list[int], anchors: dict[int, set[int]]
) -> set[tuple[int, int]]:
    """Pairs of anchors that would share one loop nest: both flow into one op (SwiGLU's
    `silu(x @ wg) * (x @ wu)`), or their results have one shape (multi-output siblings
    get one nest). loop-tile-matmul tiles a nest with one contraction, so both would run
    as untiled dot products. Anchors of different shapes reading one input (a transposed
    image read by a convolution and a pooling) keep nests of their own and may share."""
    found: set[tuple[int, int]] = set()
    by_shape: dict[tuple[int, ...], int] = {}
    for node in members:
        meeting = sorted(anchors[node])
        found.update((meeting[0], other) for other in meeting[1:])
        if dag.nodes[node].kind is K.OUT_ELEMWISE_FUSABLE:
            shape = graph.shape_of(dag.nodes[node].op.results[0])
            if shape in by_shape:
                found.add((by_shape[shape], node))
            else:
                by_shape[shape] = node
    return found


def _reaches(dag: DataflowGraph, source: int, target: int) -> bool:
    pending, seen = [source], {source}
    while pending:
        for edge in dag.nodes[pending.pop()].outputs:
            if edge.consumer == target:
                return True
            if edge.consumer not in seen:
                seen.add(edge.consumer)
                pending.append(edge.consumer)
    return False


def _describe(dag: DataflowGraph, pair: tuple[int, int]) -> str:
    upstream, node = pair
    up, down = dag.label(upstream), dag.label(node)
    both_anchors = dag.nodes[upstream].kind is dag.nodes[node].kind is K.OUT_ELEMWISE_FUSABLE
    if both_anchors and not _reaches(dag, upstream, node):
        return f"{up} and {down} would share one loop nest, where neither could be tiled"
    if dag.nodes[node].kind is K.OUT_ELEMWISE_FUSABLE:
        return f"{up} would be recomputed for every use by {down}"
    if dag.nodes[upstream].kind is K.OUT_ELEMWISE_FUSABLE:
        return f"{down} is not an elementwise epilogue of {up}"
    if dag.nodes[node].reduced is not None and dag.nodes[upstream].kind is not K.REDUCTION:
        return f"{down} would read its rows through the layout ops of {up} on every pass"
    return f"{up} feeding the larger {down} would be recomputed per row (or stitching is off)"


def illegal(
    plan: Plan,
    added: Iterable[int],
    removed_violations: set[tuple[int, int]],
    limits: Limits,
) -> str | None:
    """Why the applied change's new kernels are not allowed, or None."""
    for kernel in added:
        if plan.size(kernel) > limits.max_ops:
            return f"the kernel would have {plan.size(kernel)} ops, over max-ops={limits.max_ops}"
        inputs = plan.inputs(kernel)
        if inputs > limits.max_inputs:
            return f"the kernel would take {inputs} inputs, over max-inputs={limits.max_inputs}"
        results = len(plan.written(kernel))
        if results > limits.max_results:
            return f"the kernel would have {results} results, over max-results={limits.max_results}"
        new = violations(plan.dag, plan.kernels[kernel], limits.stitch) - removed_violations
        if new:
            return _describe(plan.dag, min(new))
    return None


def duplicable(plan: Plan, kernel: int) -> bool:
    """Cheap kernels that may be recomputed in each consumer: no reduction, matmul,
    convolution, pooling or opaque op (Ascend recomputation; XLA never duplicates them)."""
    return plan.kinds(kernel) <= {K.ELEMWISE, K.BROADCAST, K.INJECTIVE}


def cycle_reason(levels: KernelLevels, kernels: tuple[int, ...]) -> str | None:
    """Why merging `kernels` into one would put a cycle between kernels, or None."""
    through = levels.path_between(kernels)
    if through is None:
        return None
    return f"merging would create a cycle between kernels through {levels.plan.label(through)}"
