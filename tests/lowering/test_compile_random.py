"""Random graphs compiled for the CPU give the reference interpreter's numbers.

CI runs 200 graphs (each a separate build); GRAPHFUSE_COMPILE_EXAMPLES raises it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfuse.compiler import CompileOptions
from graphfuse.random_graphs import random_graph
from tests.conftest import parse
from tests.lowering.compare import compile_and_compare

EXAMPLES = int(os.environ.get("GRAPHFUSE_COMPILE_EXAMPLES", "200"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    ops=st.integers(1, 24),
    seed=st.integers(0, 2**31 - 1),
    fuse=st.booleans(),
    threads=st.sampled_from([1, 2]),
)
def test_random_graph_compiled_matches_reference(
    ops: int, seed: int, fuse: bool, threads: int
) -> None:
    module = parse(random_graph(ops, seed))
    options = CompileOptions(fuse=fuse, threads=threads)
    compile_and_compare(module, seed=seed % 1000, options=options)
