"""loop-dedupe-kernels on kernels that differ only in the constants fused into them: one
kernel is built, each call passes its own global, and the results stay right.

Every matmul here is large enough for loop-tile-matmul to tile it, so the packed-once path
for constant operands (dialects/loop/calls.py) is the one compiled.
"""

from __future__ import annotations

import re

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import graphfuse
from graphfuse import pipelines
from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects import loop
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import assert_matches, compile_and_compare

_TYPE = "tensor<2x64x64xf32>"
_FLAG = "memref<1xi8>"
"""The scratch flag loop-tile-matmul adds to a kernel that packs constants on its first call."""


def _dense(shape: tuple[int, ...], seed: int) -> str:
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return "dense<" + np.array2string(values, separator=", ", threshold=1 << 30) + ">"


def _projections(count: int) -> str:
    """x_i @ W_i + b_i for `count` pairs of constant weights and biases, each projection
    reading an input of its own (projections of one input merge into one GEMM before
    lowering: graph-simplify's sibling matmuls)."""
    lines: list[str] = []
    for i in range(count):
        lines += [
            f"  %w{i} = graph.constant {_dense((64, 64), 2 * i)} : tensor<64x64xf32>",
            f"  %b{i} = graph.constant {_dense((64,), 2 * i + 1)} : tensor<64xf32>",
            f"  %m{i} = graph.matmul %x{i}, %w{i} : ({_TYPE}, tensor<64x64xf32>) -> {_TYPE}",
            f"  %p{i} = graph.add %m{i}, %b{i} : ({_TYPE}, tensor<64xf32>) -> {_TYPE}",
        ]
    results = ", ".join(f"%p{i}" for i in range(count))
    types = ", ".join([_TYPE] * count)
    return (
        f"func.func @main({', '.join(f'%x{i}: {_TYPE}' for i in range(count))}) -> ({types}) {{\n"
        + "\n".join(lines)
        + f"\n  func.return {results} : {types}\n}}"
    )


_WEIGHT_INSIDE = f"""
func.func @main(%x: {_TYPE}) -> ({_TYPE}, {_TYPE}) {{
  %q = graph.fused "fused_matmul"(%x) kind = out_elemwise_fusable : ({_TYPE}) -> {_TYPE} {{
  ^bb0(%xa: {_TYPE}):
    %w = graph.constant {_dense((64, 64), 7)} : tensor<64x64xf32>
    %m = graph.matmul %xa, %w : ({_TYPE}, tensor<64x64xf32>) -> {_TYPE}
    graph.yield %m : {_TYPE}
  }}
  %k = graph.fused "fused_matmul"(%x) kind = out_elemwise_fusable : ({_TYPE}) -> {_TYPE} {{
  ^bb0(%xa: {_TYPE}):
    %w = graph.constant {_dense((64, 64), 8)} : tensor<64x64xf32>
    %m = graph.matmul %xa, %w : ({_TYPE}, tensor<64x64xf32>) -> {_TYPE}
    graph.yield %m : {_TYPE}
  }}
  func.return %q, %k : {_TYPE}, {_TYPE}
}}"""
"""Two kernels whose matmul reads a weight fused into the kernel itself."""


def _kernels(module: ModuleOp) -> list[loop.KernelOp]:
    return [op for op in module.ops if isinstance(op, loop.KernelOp)]


def test_dedupe_kernels_projections_share_one_kernel() -> None:
    text = lower_to(parse_text(_projections(3), "qkv"), Stage.LOOP)
    assert re.findall(r"loop\.kernel @(\w+)", text) == ["fused_matmul_add"]
    assert len(re.findall(r"loop\.call @fused_matmul_add\(", text)) == 3


def test_dedupe_kernels_projections_match_reference() -> None:
    compile_and_compare(parse_text(_projections(3), "qkv"))


def test_dedupe_kernels_projections_match_reference_one_thread() -> None:
    compile_and_compare(parse_text(_projections(2), "qk"), options=CompileOptions(threads=1))


def test_dedupe_kernels_weight_inside_kernel_packed_once() -> None:
    """A matmul weight read inside its kernel is still a constant to loop-tile-matmul once
    the two kernels are one, whose calls pass the weights: packed on the first call only."""
    module = parse_text(_WEIGHT_INSIDE, "weight-inside")
    pipelines.run(pipelines.join(pipelines.to_loop(), "loop-tile-matmul"), module)
    (kernel,) = _kernels(module)
    assert _FLAG in [str(t) for t in kernel.arg_types]


def test_dedupe_kernels_weight_inside_kernel_matches_reference_every_call() -> None:
    """Each call site packs its own weight once, into its own buffers: the second run reads
    them packed, and must still find each site's weight."""
    module = parse_text(_WEIGHT_INSIDE, "weight-inside")
    compiled = graphfuse.compile(module)
    function = reference.find_function(module, "main")
    for seed in (0, 1):
        (x,) = reference.random_inputs(function, seed)
        assert_matches(compiled(x), reference.run(module, "main", x))
