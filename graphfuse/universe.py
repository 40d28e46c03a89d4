"""graphfuse's dialects and passes for `xdsl-opt`, found through the `xdsl.universe` entry point.

Each name maps to a lazy getter, so `xdsl-opt` start-up imports nothing of ours until a file
or pipeline asks for it (as xDSL's own `xdsl/transforms/__init__.py` does).
"""

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe


def _get_graph_dialect() -> Dialect:
    from graphfuse.dialects.graph import Graph

    return Graph


def _get_graph_fuse() -> type[ModulePass]:
    from graphfuse.passes.graph_fuse import GraphFusePass

    return GraphFusePass


def _get_graph_fusion_report() -> type[ModulePass]:
    from graphfuse.passes.graph_fusion_report import GraphFusionReportPass

    return GraphFusionReportPass


def _get_graph_decompose() -> type[ModulePass]:
    from graphfuse.passes.graph_decompose import GraphDecomposePass

    return GraphDecomposePass


def _get_graph_fuse_patterns() -> type[ModulePass]:
    from graphfuse.passes.graph_fuse_patterns import GraphFusePatternsPass

    return GraphFusePatternsPass


def _get_graph_split_grouped_conv() -> type[ModulePass]:
    from graphfuse.passes.split_grouped_conv import SplitGroupedConvPass

    return SplitGroupedConvPass


def _get_prefetch_rows() -> type[ModulePass]:
    from graphfuse.lowering.prefetch_rows import PrefetchRowsPass

    return PrefetchRowsPass


def _get_graph_simplify() -> type[ModulePass]:
    from graphfuse.passes.graph_simplify import GraphSimplifyPass

    return GraphSimplifyPass


def _get_loop_dialect() -> Dialect:
    from graphfuse.dialects.loop import Loop

    return Loop


def _get_convert_graph_to_loop() -> type[ModulePass]:
    from graphfuse.lowering.convert_graph_to_loop import ConvertGraphToLoopPass

    return ConvertGraphToLoopPass


def _get_convert_loop_to_upstream() -> type[ModulePass]:
    from graphfuse.lowering.convert_loop_to_upstream import ConvertLoopToUpstreamPass

    return ConvertLoopToUpstreamPass


def _get_convert_loop_to_gpu() -> type[ModulePass]:
    from graphfuse.lowering.convert_loop_to_gpu import ConvertLoopToGpuPass

    return ConvertLoopToGpuPass


def _get_tile_matmul() -> type[ModulePass]:
    from graphfuse.lowering.matmul_tiling import TileMatmulPass

    return TileMatmulPass


def _get_split_epilogues() -> type[ModulePass]:
    from graphfuse.lowering.split_epilogues import SplitEpiloguesPass

    return SplitEpiloguesPass


def _get_invariant_reciprocals() -> type[ModulePass]:
    from graphfuse.lowering.invariant_reciprocals import InvariantReciprocalsPass

    return InvariantReciprocalsPass


def _get_approximate_math() -> type[ModulePass]:
    from graphfuse.lowering.approximate_math import ApproximateMathPass

    return ApproximateMathPass


def _get_interleave_loops() -> type[ModulePass]:
    from graphfuse.lowering.interleave_loops import InterleaveLoopsPass

    return InterleaveLoopsPass


def _get_predicate_short_loops() -> type[ModulePass]:
    from graphfuse.lowering.predicate_short_loops import PredicateShortLoopsPass

    return PredicateShortLoopsPass


ALL_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "graph": _get_graph_dialect,
    "loop": _get_loop_dialect,
}
ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "graph-fuse": _get_graph_fuse,
    "graph-fusion-report": _get_graph_fusion_report,
    "graph-decompose": _get_graph_decompose,
    "graph-simplify": _get_graph_simplify,
    "graph-fuse-patterns": _get_graph_fuse_patterns,
    "graph-split-grouped-conv": _get_graph_split_grouped_conv,
    "convert-graph-to-loop": _get_convert_graph_to_loop,
    "convert-loop-to-upstream": _get_convert_loop_to_upstream,
    "convert-loop-to-gpu": _get_convert_loop_to_gpu,
    "graphfuse-approximate-math": _get_approximate_math,
    "graphfuse-interleave-loops": _get_interleave_loops,
    "graphfuse-predicate-short-loops": _get_predicate_short_loops,
    "graphfuse-invariant-reciprocals": _get_invariant_reciprocals,
    "graphfuse-prefetch-rows": _get_prefetch_rows,
    "loop-split-epilogues": _get_split_epilogues,
    "loop-tile-matmul": _get_tile_matmul,
}

GRAPHFUSE_UNIVERSE = Universe(all_dialects=ALL_DIALECTS, all_passes=ALL_PASSES)
