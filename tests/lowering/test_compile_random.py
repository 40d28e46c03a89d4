"""Random graphs compiled for the CPU give the reference interpreter's numbers.

CI runs 200 graphs (each a separate build), a quarter in each configuration: unfused and
fused, one thread and two. Four tests rather than one drawn configuration, so every
configuration always gets its share and pytest-xdist can run them side by side.
GRAPHFUSE_COMPILE_EXAMPLES raises the total. The random graphs' tiny shapes never reach
worker threads or the tiled GEMM, so a few larger graphs on two threads do.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.testing.compare import compile_and_compare
from graphfuse.testing.random_graphs import random_graph
from tests.conftest import parse

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


LARGE = {
    # name: (graph, what its upstream text must hold)
    "gemm_epilogue": (
        """
func.func @main(%a: tensor<64x128xf32>, %b: tensor<128x80xf32>, %c: tensor<80xf32>, %r: tensor<64x80xf32>) -> tensor<64x80xf32> {
  %m = graph.matmul %a, %b : (tensor<64x128xf32>, tensor<128x80xf32>) -> tensor<64x80xf32>
  %s = graph.add %m, %c : (tensor<64x80xf32>, tensor<80xf32>) -> tensor<64x80xf32>
  %t = graph.tanh %s : tensor<64x80xf32>
  %y = graph.add %t, %r : (tensor<64x80xf32>, tensor<64x80xf32>) -> tensor<64x80xf32>
  func.return %y : tensor<64x80xf32>
}""",
        ("scf.parallel", "vector.fma"),
    ),
    "batched_gemm_transposed": (
        """
func.func @main(%q: tensor<2x96x64xf32>, %k: tensor<2x80x64xf32>) -> tensor<2x96x80xf32> {
  %kt = graph.transpose %k perm = [0, 2, 1] : tensor<2x80x64xf32> -> tensor<2x64x80xf32>
  %m = graph.matmul %q, %kt : (tensor<2x96x64xf32>, tensor<2x64x80xf32>) -> tensor<2x96x80xf32>
  %y = graph.relu %m : tensor<2x96x80xf32>
  func.return %y : tensor<2x96x80xf32>
}""",
        ("scf.parallel", "vector.fma"),
    ),
    "elementwise_and_rows": (
        """
func.func @main(%x: tensor<128x384xf32>, %v: tensor<384xf32>) -> (tensor<128x384xf32>, tensor<128x384xf32>) {
  %a = graph.mul %x, %v : (tensor<128x384xf32>, tensor<384xf32>) -> tensor<128x384xf32>
  %b = graph.sigmoid %a : tensor<128x384xf32>
  %s = graph.softmax %x axis = 1 : tensor<128x384xf32>
  func.return %b, %s : tensor<128x384xf32>, tensor<128x384xf32>
}""",
        ("scf.parallel",),
    ),
}


@pytest.mark.parametrize("name", sorted(LARGE))
def test_large_graph_on_two_threads_matches_reference(name: str) -> None:
    """Shapes large enough for worker threads (scf.parallel) and the tiled GEMM, which the
    small random graphs never reach: the upstream text proves the paths are taken."""
    text, markers = LARGE[name]
    options = CompileOptions(threads=2)
    upstream = lower_to(parse(text), Stage.UPSTREAM, options)
    missing = [marker for marker in markers if marker not in upstream]
    assert not missing, f"the build of {name} lacks {missing}"
    compile_and_compare(parse(text), options=options)
