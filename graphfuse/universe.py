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


def _get_loop_dialect() -> Dialect:
    from graphfuse.dialects.loop import Loop

    return Loop


def _get_graph_decompose() -> type[ModulePass]:
    from graphfuse.passes.rewrites.graph_decompose import GraphDecomposePass

    return GraphDecomposePass


def _get_graph_simplify() -> type[ModulePass]:
    from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass

    return GraphSimplifyPass


def _get_graph_fuse_patterns() -> type[ModulePass]:
    from graphfuse.passes.fusion.graph_fuse_patterns import GraphFusePatternsPass

    return GraphFusePatternsPass


def _get_graph_fuse() -> type[ModulePass]:
    from graphfuse.passes.fusion.graph_fuse import GraphFusePass

    return GraphFusePass


def _get_graph_report_fusion() -> type[ModulePass]:
    from graphfuse.passes.fusion.graph_report_fusion import GraphReportFusionPass

    return GraphReportFusionPass


def _get_convert_tosa_to_graph() -> type[ModulePass]:
    from graphfuse.frontend.tosa.convert_tosa_to_graph import ConvertTosaToGraphPass

    return ConvertTosaToGraphPass


def _get_convert_graph_to_loop() -> type[ModulePass]:
    from graphfuse.lowering.graph_to_loop.convert_graph_to_loop import ConvertGraphToLoopPass

    return ConvertGraphToLoopPass


def _get_loop_dedupe_kernels() -> type[ModulePass]:
    from graphfuse.lowering.graph_to_loop.loop_dedupe_kernels import LoopDedupeKernelsPass

    return LoopDedupeKernelsPass


def _get_convert_loop_to_upstream() -> type[ModulePass]:
    from graphfuse.lowering.loop_to_upstream.convert_loop_to_upstream import (
        ConvertLoopToUpstreamPass,
    )

    return ConvertLoopToUpstreamPass


def _get_convert_loop_to_gpu() -> type[ModulePass]:
    from graphfuse.lowering.gpu.convert_loop_to_gpu import ConvertLoopToGpuPass

    return ConvertLoopToGpuPass


def _get_graph_split_grouped_conv() -> type[ModulePass]:
    from graphfuse.lowering.cpu.graph_split_grouped_conv import GraphSplitGroupedConvPass

    return GraphSplitGroupedConvPass


def _get_loop_tile_matmul() -> type[ModulePass]:
    from graphfuse.lowering.cpu.gemm.loop_tile_matmul import LoopTileMatmulPass

    return LoopTileMatmulPass


def _get_loop_plan_scratch() -> type[ModulePass]:
    from graphfuse.lowering.cpu.plan_scratch import LoopPlanScratchPass

    return LoopPlanScratchPass


def _get_loop_split_epilogues() -> type[ModulePass]:
    from graphfuse.lowering.cpu.gemm.loop_split_epilogues import LoopSplitEpiloguesPass

    return LoopSplitEpiloguesPass


def _get_scf_prefetch_rows() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.scf_prefetch_rows import ScfPrefetchRowsPass

    return ScfPrefetchRowsPass


def _get_scf_hoist_reciprocals() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.scf_hoist_reciprocals import ScfHoistReciprocalsPass

    return ScfHoistReciprocalsPass


def _get_math_approximate() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.math_approximate import MathApproximatePass

    return MathApproximatePass


def _get_scf_interleave_loops() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.scf_interleave_loops import ScfInterleaveLoopsPass

    return ScfInterleaveLoopsPass


def _get_scf_outline_tasks() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.scf_outline_tasks import ScfOutlineTasksPass

    return ScfOutlineTasksPass


def _get_scf_predicate_short_loops() -> type[ModulePass]:
    from graphfuse.lowering.cpu.tuning.scf_predicate_short_loops import ScfPredicateShortLoopsPass

    return ScfPredicateShortLoopsPass


ALL_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "graph": _get_graph_dialect,
    "loop": _get_loop_dialect,
}
ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    # graph -> graph: front-end rewrites and fusion
    "graph-decompose": _get_graph_decompose,
    "graph-simplify": _get_graph_simplify,
    "graph-fuse-patterns": _get_graph_fuse_patterns,
    "graph-fuse": _get_graph_fuse,
    "graph-report-fusion": _get_graph_report_fusion,
    # conversions
    "convert-tosa-to-graph": _get_convert_tosa_to_graph,
    "convert-graph-to-loop": _get_convert_graph_to_loop,
    "loop-dedupe-kernels": _get_loop_dedupe_kernels,
    "convert-loop-to-upstream": _get_convert_loop_to_upstream,
    "convert-loop-to-gpu": _get_convert_loop_to_gpu,
    # CPU target: grouped convolutions split per group, loop-level GEMM tiling, then tuning
    # of the upstream loops
    "graph-split-grouped-conv": _get_graph_split_grouped_conv,
    "loop-tile-matmul": _get_loop_tile_matmul,
    "loop-split-epilogues": _get_loop_split_epilogues,
    "loop-plan-scratch": _get_loop_plan_scratch,
    "scf-prefetch-rows": _get_scf_prefetch_rows,
    "scf-hoist-reciprocals": _get_scf_hoist_reciprocals,
    "math-approximate": _get_math_approximate,
    "scf-interleave-loops": _get_scf_interleave_loops,
    "scf-predicate-short-loops": _get_scf_predicate_short_loops,
    "scf-outline-tasks": _get_scf_outline_tasks,
}
"""Pass names follow one rule: `convert-x-to-y` for conversions, `<dialect>-<verb>` for
transforms (the dialect the pass rewrites)."""

RENAMED_PASSES: dict[str, str] = {
    "graph-fusion-report": "graph-report-fusion",
    "graphfuse-approximate-math": "math-approximate",
    "graphfuse-prefetch-rows": "scf-prefetch-rows",
    "graphfuse-invariant-reciprocals": "scf-hoist-reciprocals",
    "graphfuse-interleave-loops": "scf-interleave-loops",
    "graphfuse-predicate-short-loops": "scf-predicate-short-loops",
}
"""Names used before the one naming rule, still accepted so existing pipelines keep working."""


def _renamed(old: str, get: Callable[[], type[ModulePass]]) -> Callable[[], type[ModulePass]]:
    """A getter for the pass under its old name (xDSL checks a spec's name against the class's)."""

    def get_old() -> type[ModulePass]:
        current = get()
        return type(current.__name__, (current,), {"name": old, "__doc__": current.__doc__})

    return get_old


ALL_PASSES.update({old: _renamed(old, ALL_PASSES[new]) for old, new in RENAMED_PASSES.items()})

GRAPHFUSE_UNIVERSE = Universe(all_dialects=ALL_DIALECTS, all_passes=ALL_PASSES)
