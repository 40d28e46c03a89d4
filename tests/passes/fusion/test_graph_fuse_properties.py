"""Property tests of graph-fuse on random DAGs: same numbers, no cycles, one kernel per op.

The partitioner alone must keep every op and every bit; the whole pipeline (which opens
compound ops, folds and merges) must keep every op inside a kernel and the numbers within
rounding. CI runs 500 examples each; GRAPHFUSE_PROPERTY_EXAMPLES=10000 for a long run.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import verify
from graphfuse.passes.fusion.fusion_legality import Limits
from graphfuse.passes.fusion.fusion_refine import RefineOptions
from graphfuse.passes.fusion.graph_fuse import GraphFusePass, fuse_function
from graphfuse.testing.random_graphs import random_graph
from tests.conftest import parse

EXAMPLES = int(os.environ.get("GRAPHFUSE_PROPERTY_EXAMPLES", "500"))
PARTITION_ONLY = {"decompose": False, "simplify": False, "patterns": False, "refine": False}
NO_FRONT_END = {"decompose": False, "simplify": False, "patterns": False}
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=EXAMPLES <= 500,
)


def _computing_ops(module: ModuleOp) -> Counter[str]:
    """Graph ops that compute (not constants, kernels or yields), wherever they sit."""
    skip = (graph.ConstantOp, graph.FusedOp, graph.YieldOp)
    return Counter(
        op.name for op in module.walk() if op.dialect_name() == "graph" and not isinstance(op, skip)
    )


def _main(module: ModuleOp) -> func.FuncOp:
    function = next(iter(module.ops))
    assert isinstance(function, func.FuncOp)
    return function


def _ops_outside_kernels(function: func.FuncOp) -> list[str]:
    return [
        op.name
        for op in function.body.block.ops
        if op.dialect_name() == "graph" and not isinstance(op, graph.FusedOp | graph.ConstantOp)
    ]


def _assert_kernels_acyclic(function: func.FuncOp) -> None:
    """Each kernel reads only values defined before it: the kernel graph is a DAG."""
    defined = set(function.body.block.args)
    for op in function.body.block.ops:
        assert all(operand in defined for operand in op.operands), f"{op.name} reads ahead"
        defined.update(op.results)


def _assert_kernels_within(function: func.FuncOp, max_depth: int) -> None:
    for kernel in function.body.block.ops:
        if isinstance(kernel, graph.FusedOp):
            inner = [op for op in kernel.body.block.ops if not isinstance(op, graph.ConstantOp)]
            assert len(inner) - 1 <= max_depth  # the yield is not an op of the kernel


@PROPERTY_SETTINGS
@given(
    ops=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    max_depth=st.sampled_from([2, 3, 5, 256]),
)
def test_graph_fuse_random_dags(ops: int, seed: int, max_depth: int):
    module = parse(random_graph(ops, seed))
    inputs = reference.random_inputs(_main(module), seed % 1000)
    before = reference.run(module, "main", *inputs)
    ops_before = _computing_ops(module)

    GraphFusePass(max_depth=max_depth, **PARTITION_ONLY).apply(Context(), module)
    verify(module)
    function = _main(module)
    _assert_kernels_acyclic(function)
    # Every computing op is in exactly one kernel: none left outside, none lost or copied.
    assert _ops_outside_kernels(function) == []
    assert _computing_ops(module) == ops_before
    _assert_kernels_within(function, max_depth)
    after = reference.run(module, "main", *inputs)
    for expected, actual in zip(before, after, strict=True):
        np.testing.assert_array_equal(actual, expected)


@PROPERTY_SETTINGS
@given(
    ops=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    max_depth=st.sampled_from([2, 3, 5, 256]),
)
def test_graph_fuse_pipeline_random_dags(ops: int, seed: int, max_depth: int):
    module = parse(random_graph(ops, seed))
    inputs = reference.random_inputs(_main(module), seed % 1000)
    before = reference.run(module, "main", *inputs)

    GraphFusePass(max_depth=max_depth).apply(Context(), module)
    verify(module)
    function = _main(module)
    _assert_kernels_acyclic(function)
    assert _ops_outside_kernels(function) == []
    # Pre-formed pattern kernels count their ops against max-depth too.
    _assert_kernels_within(function, max_depth)
    after = reference.run(module, "main", *inputs)
    for expected, actual in zip(before, after, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@PROPERTY_SETTINGS
@given(
    ops=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    max_depth=st.sampled_from([2, 5, 256]),
    max_inputs=st.sampled_from([2, 64]),
    stitch=st.booleans(),
)
def test_graph_fuse_refined_random_dags(
    ops: int, seed: int, max_depth: int, max_inputs: int, stitch: bool
):
    """The TVM partition refined by the cost model (recomputation, multi-output,
    horizontal, merger, rollback): same bits, no cycle, every op in exactly one kernel,
    and the ops beyond the original ones are exactly the recomputed copies."""
    module = parse(random_graph(ops, seed))
    inputs = reference.random_inputs(_main(module), seed % 1000)
    before = reference.run(module, "main", *inputs)
    ops_before = _computing_ops(module)

    function = _main(module)
    refine = RefineOptions(Limits(max_depth, max_inputs, 8, stitch))
    copies = fuse_function(function, max_depth, refine).copies
    verify(module)
    _assert_kernels_acyclic(function)
    assert _ops_outside_kernels(function) == []
    after_ops = _computing_ops(module)
    assert ops_before - after_ops == Counter()  # nothing lost ...
    assert sum(after_ops.values()) == sum(ops_before.values()) + copies  # ... copies counted
    _assert_kernels_within(function, max_depth)
    _assert_inputs_within(function, max_inputs)
    after = reference.run(module, "main", *inputs)
    for expected, actual in zip(before, after, strict=True):
        np.testing.assert_array_equal(actual, expected)


def _assert_inputs_within(function: func.FuncOp, max_inputs: int) -> None:
    """Kernels the refinement formed keep max-inputs (a TVM kernel over it was split)."""
    for kernel in function.body.block.ops:
        if isinstance(kernel, graph.FusedOp):
            inner = [op for op in kernel.body.block.ops if not isinstance(op, graph.YieldOp)]
            assert len(inner) == 1 or len(kernel.inputs) <= max_inputs
