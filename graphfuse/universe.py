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


def _get_graph_simplify() -> type[ModulePass]:
    from graphfuse.passes.graph_simplify import GraphSimplifyPass

    return GraphSimplifyPass


ALL_DIALECTS: dict[str, Callable[[], Dialect]] = {"graph": _get_graph_dialect}
ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "graph-fuse": _get_graph_fuse,
    "graph-fusion-report": _get_graph_fusion_report,
    "graph-decompose": _get_graph_decompose,
    "graph-simplify": _get_graph_simplify,
    "graph-fuse-patterns": _get_graph_fuse_patterns,
}

GRAPHFUSE_UNIVERSE = Universe(all_dialects=ALL_DIALECTS, all_passes=ALL_PASSES)
