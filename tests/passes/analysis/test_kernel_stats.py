"""kernel_stats: the bytes a kernel moves, as the profiler and bench_models report them."""

from __future__ import annotations

from xdsl.dialects import func

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects.graph import functions
from graphfuse.parsing import parse_text
from graphfuse.passes.analysis.kernel_stats import kernel_stats

EMBEDDING = """func.func @main(%ids: tensor<2x8xi64>, %table: tensor<1000x64xf32>) -> tensor<2x8x64xf32> {
  %e = graph.gather %table, %ids axis = 0 : (tensor<1000x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  %r = graph.relu %e : tensor<2x8x64xf32>
  func.return %r : tensor<2x8x64xf32>
}"""


def _function(text: str, fuse: bool) -> func.FuncOp:
    module = parse_text(text, "stats")
    lower_to(module, Stage.GRAPH, CompileOptions(fuse=fuse))
    return next(functions(module))


def test_a_gathered_table_counts_only_the_rows_read():
    """16 rows of 64 floats are read of a 1000-row embedding table (plus 16 indices), fused
    with its epilogue or not: the whole table (256 kB) would put the kernel far above the
    machine's bandwidth in a profile."""
    rows, indices = 16 * 64 * 4, 16 * 8
    fused = kernel_stats(_function(EMBEDDING, True))
    assert [s.bytes_read for s in fused] == [rows + indices]
    unfused = kernel_stats(_function(EMBEDDING, False))
    assert unfused[0].bytes_read == rows + indices
    assert unfused[1].bytes_read == rows


def test_a_table_also_read_whole_counts_whole():
    text = EMBEDDING.replace("-> tensor<2x8x64xf32> {", "-> (tensor<2x8x64xf32>, tensor<64xf32>) {")
    text = text.replace(
        "func.return %r : tensor<2x8x64xf32>",
        "%s = graph.reduce_sum %table axes = [0] : tensor<1000x64xf32> -> tensor<64xf32>\n"
        "  func.return %r, %s : tensor<2x8x64xf32>, tensor<64xf32>",
    )
    unfused = kernel_stats(_function(text, False))
    assert max(s.bytes_read for s in unfused) >= 1000 * 64 * 4
