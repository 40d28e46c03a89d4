# ruff: noqa: E501 - the docstring's command lines are copied into the README whole
"""graphfuse's pass pipelines, each defined once as the `xdsl-opt -p` spec every driver runs.

graphfuse.compile and `graphfuse compile` (compiler.py), `graphfuse fuse` and the benchmarks
parse these specs, so plain xdsl-opt runs the same passes with the same options and prints
the same IR (tests/test_pipelines.py checks both). An option at its pass's default is left
out of a spec, so each default lives in its pass. With `--lanes 8` and two threads:

  graphfuse fuse:                        xdsl-opt in.mlir -p 'graph-fuse'
  graphfuse compile --emit upstream:     xdsl-opt in.mlir -p 'graph-split-grouped-conv,graph-fuse,convert-graph-to-loop,loop-dedupe-kernels,loop-tile-matmul{threads=true},loop-split-epilogues,loop-plan-scratch,convert-loop-to-upstream{parallel=true},scf-prefetch-rows,scf-hoist-reciprocals,math-approximate,scf-interleave-loops,scf-predicate-short-loops,scf-outline-tasks'
  graphfuse compile --target nvptx --emit gpu:  xdsl-opt in.mlir -p 'graph-fuse,convert-graph-to-loop{operand-copies=false},loop-dedupe-kernels,convert-loop-to-gpu,convert-loop-to-upstream'

The compiler runs a pipeline stage by stage (fusion, to_loop, cpu_lowering or gpu_lowering)
to stop at any stage; their specs joined by commas are the lines above.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import MISSING, fields

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from graphfuse.parsing import GraphfuseError, make_context
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.timing import timed
from graphfuse.universe import ALL_PASSES

Option = bool | int | str
"""A pass option's value, as xDSL's pipeline syntax writes it."""


def graph_fuse(**options: Option | None) -> str:
    """The front end and fusion in one pass, with `options` (None: the pass's default)."""
    return spec("graph-fuse", **options)


def fusion(cpu: bool = True, **options: Option | None) -> str:
    """Graph to fused graph: graph-fuse with `options`. The CPU build first splits grouped
    convolutions that tile into one per group (a CPU-only decision)."""
    return join("graph-split-grouped-conv", graph_fuse(**options)) if cpu else graph_fuse(**options)


def to_loop(cpu: bool = True) -> str:
    """Fused graph to loop kernels, identical ones built once. The CPU copies matmul and
    convolution operands into reduction-contiguous layouts; a GPU's threads read the
    original layout."""
    return join(spec("convert-graph-to-loop", operand_copies=cpu), "loop-dedupe-kernels")


def cpu_lowering(parallel: bool, lanes: int, workers: int | None = None) -> str:
    """Loop kernels to upstream MLIR for the CPU: GEMM tiling on the loop dialect (its
    tasks balanced for `workers` threads; None: the pass's default), the scratch buffers'
    shared layout, the conversion (scf.parallel for threads when `parallel`), then tuning
    of the upstream loops for vectors of `lanes` f32."""
    tile_workers = workers if parallel else None
    return join(
        spec("loop-tile-matmul", threads=parallel, lanes=lanes, workers=tile_workers),
        "loop-split-epilogues",
        "loop-plan-scratch",
        spec("convert-loop-to-upstream", parallel=parallel),
        "scf-prefetch-rows",
        "scf-hoist-reciprocals",
        "math-approximate",
        spec("scf-interleave-loops", lanes=lanes),
        spec("scf-predicate-short-loops", lanes=lanes),
        "scf-outline-tasks",
    )


def gpu_lowering(block_size: int) -> str:
    """Loop kernels to a gpu.module per kernel and host functions of launches, in upstream
    MLIR for mlir-opt."""
    return join(spec("convert-loop-to-gpu", block_size=block_size), "convert-loop-to-upstream")


def cpu(parallel: bool, lanes: int, **fusion_options: Option | None) -> str:
    """Graph to upstream MLIR for the CPU: `graphfuse compile --emit upstream`."""
    return join(fusion(True, **fusion_options), to_loop(True), cpu_lowering(parallel, lanes))


def gpu(block_size: int, **fusion_options: Option | None) -> str:
    """Graph to the GPU build's upstream MLIR: `graphfuse compile --target nvptx --emit gpu`."""
    return join(fusion(False, **fusion_options), to_loop(False), gpu_lowering(block_size))


def join(*specs: str) -> str:
    """Pipelines one after the other."""
    return ",".join(specs)


def spec(name: str, **options: Option | None) -> str:
    """One pass as xDSL's pipeline syntax writes it, `name{key=value ...}`, with the options
    given (snake_case keys) that are not None and differ from the pass's defaults."""
    defaults = {f.name: f.default for f in fields(ALL_PASSES[name]()) if f.default is not MISSING}
    written = [
        f"{key.replace('_', '-')}={_value(value)}"
        for key, value in options.items()
        if value is not None and (key not in defaults or value != defaults[key])
    ]
    return f"{name}{{{' '.join(written)}}}" if written else name


def _value(value: Option) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if any(c in value for c in "\r\f\v"):
        raise GraphfuseError(f"{value!r}: a pass option cannot hold a \\r, \\f or \\v character")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def parse(pipeline: str) -> PassPipeline:
    """The passes of a spec, from graphfuse's universe (as xdsl-opt reads it)."""
    return PassPipeline.parse_spec(ALL_PASSES, pipeline)


def run(pipeline: str, module: ModuleOp) -> None:
    """Apply a spec's passes to `module` in place, as `xdsl-opt -p` does (each timed, for
    `--timing`), with fewer full garbage collections."""
    ctx = make_context()
    with fewer_full_collections():
        for one in parse(pipeline).passes:
            with timed(one.name):
                one.apply(ctx, module)


def run_explained(pipeline: str, module: ModuleOp) -> list[str]:
    """`run`, returning graph-fuse's decisions (every function's, in order) where `explain`
    would print them: for a driver that prints them after its own output is written."""
    ctx = make_context()
    decisions: list[str] = []
    with fewer_full_collections():
        for step in parse(pipeline).passes:
            with timed(step.name):
                if isinstance(step, GraphFusePass):
                    decisions += [line for lines in step.fuse(ctx, module) for line in lines]
                else:
                    step.apply(ctx, module)
    return decisions


FULL_COLLECTION_SPACING = 100
"""Middle-generation garbage collections between two chances of a full one while passes
run (CPython's default: 10)."""


@contextmanager
def fewer_full_collections() -> Generator[None]:
    """Within the block, CPython considers a full garbage collection after
    FULL_COLLECTION_SPACING middle-generation collections instead of 10 (a larger spacing
    already set is kept); the thresholds are put back on exit.

    xDSL's IR is made of reference cycles (an op and its block, a value and its uses), so
    the collector tracks every op, value and block a pass makes, and a full collection
    walks all of them. CPython runs one whenever the objects that outlived younger
    collections have grown by a quarter since the last: a pass that builds or clones a
    large module walks the whole of it again and again, to free almost nothing (the IR
    being built is alive). Young and middle collections run as before, so short-lived
    cycles (a rewriter's worklist, an erased op) are freed as soon as ever. A driver may
    hold the block across its other stages too (importing a model, splitting kernels)."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_COLLECTION_SPACING))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
