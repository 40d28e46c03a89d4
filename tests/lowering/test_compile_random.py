"""Random graphs compiled for the CPU give the reference interpreter's numbers.

CI runs 200 graphs (each a separate build), a quarter in each configuration: unfused and
fused, one thread and two. Four tests rather than one drawn configuration, so every
configuration always gets its share and pytest-xdist can run them side by side.
GRAPHFUSE_COMPILE_EXAMPLES raises the total.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfuse.compiler import CompileOptions
from graphfuse.random_graphs import random_graph
from tests.conftest import parse
from tests.lowering.compare import compile_and_compare

EXAMPLES = int(os.environ.get("GRAPHFUSE_COMPILE_EXAMPLES", "200"))
CONFIGURATIONS = [(fuse, threads) for fuse in (False, True) for threads in (1, 2)]


@pytest.mark.parametrize(("fuse", "threads"), CONFIGURATIONS)
@settings(
    max_examples=max(EXAMPLES // len(CONFIGURATIONS), 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(ops=st.integers(1, 24), seed=st.integers(0, 2**31 - 1))
def test_random_graph_compiled_matches_reference(
    fuse: bool, threads: int, ops: int, seed: int
) -> None:
    # The configuration salts the graph, so the four tests see different graphs.
    module = parse(random_graph(ops, (seed + 7919 * (2 * threads + fuse)) % 2**31))
    options = CompileOptions(fuse=fuse, threads=threads)
    compile_and_compare(module, seed=seed % 1000, options=options)
