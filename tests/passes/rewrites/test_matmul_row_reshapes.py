"""ReshapeRowsIntoMatmul (graph-simplify): a reshape of a GEMM's rows moves into its left
operand, through row-wise elementwise ops, with the same numbers as before (reference
interpreter), and the ops after it join the GEMM's kernel as its epilogue."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from graphfuse.compiler import CompileOptions
from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import verify
from graphfuse.passes.fusion.graph_fuse import GraphFusePass
from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass
from graphfuse.testing.compare import compile_and_compare
from tests.conftest import parse


def _addmm_block(lhs: tuple[int, ...], rows: tuple[int, ...], k: int, n: int) -> str:
    """GPT-2's MLP as torch exports it: view, Gemm, bias, view, tanh-GELU-like activation
    and a boolean of it, view, Gemm, view, residual add; `lhs` is the input's shape and
    `rows` the shape the views give back (the same rows, grouped otherwise)."""
    flat = int(np.prod(lhs[:-1]))
    x, x2 = f"tensor<{'x'.join(map(str, lhs))}xf32>", f"tensor<{flat}x{k}xf32>"
    h, h2 = f"tensor<{'x'.join(map(str, rows))}x{n}xf32>", f"tensor<{flat}x{n}xf32>"
    o, o2 = f"tensor<{'x'.join(map(str, rows))}x{k}xf32>", f"tensor<{flat}x{k}xf32>"
    b = f"tensor<{'x'.join(['1'] * (len(rows) - 1) + [str(n)])}xf32>"
    return f"""
func.func @main(%x: {x}, %w: tensor<{k}x{n}xf32>, %b: {b}, %w2: tensor<{n}x{k}xf32>,
                %res: {o}) -> ({o}, tensor<{"x".join(map(str, rows))}x{n}xi1>) {{
  %half = graph.constant dense<0.5> : tensor<f32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %v = graph.reshape %x : {x} -> {x2}
  %y = graph.matmul %v, %w : ({x2}, tensor<{k}x{n}xf32>) -> {h2}
  %r = graph.reshape %y : {h2} -> {h}
  %yb = graph.add %r, %b : ({h}, {b}) -> {h}
  %t = graph.tanh %yb : {h}
  %g = graph.mul %t, %half : ({h}, tensor<f32>) -> {h}
  %on = graph.compare gt, %g, %zero : ({h}, tensor<f32>) -> tensor<{"x".join(map(str, rows))}x{n}xi1>
  %v2 = graph.reshape %g : {h} -> {h2}
  %z = graph.matmul %v2, %w2 : ({h2}, tensor<{n}x{k}xf32>) -> {o2}
  %zs = graph.mul %z, %half : ({o2}, tensor<f32>) -> {o2}
  %r2 = graph.reshape %zs : {o2} -> {o}
  %out = graph.add %res, %r2 : ({o}, {o}) -> {o}
  func.return %out, %on : {o}, tensor<{"x".join(map(str, rows))}x{n}xi1>
}}
"""


_CASES = [((64, 32), (4, 16), 32, 48), ((2, 32, 24), (4, 16), 24, 40), ((4, 16, 8), (8, 8), 8, 16)]


@pytest.mark.parametrize(("lhs", "rows", "k", "n"), _CASES)
def test_simplified_graph_keeps_its_results(lhs, rows, k, n) -> None:
    module = parse(_addmm_block(lhs, rows, k, n))
    function = reference.find_function(module, "main")
    inputs = reference.random_inputs(function, seed=1)
    before = reference.run(module, "main", *inputs)
    GraphSimplifyPass().apply(Context(), module)
    verify(module)
    ops = list(function.body.block.ops)
    reshapes = [op for op in ops if isinstance(op, graph.ReshapeOp)]
    matmuls = [op for op in ops if isinstance(op, graph.MatmulOp)]
    assert len(matmuls) == 2
    # Each product comes out at the rows' shape; the reshapes left read the arguments.
    for matmul in matmuls:
        assert graph.shape_of(matmul.result)[:-1] == rows
    assert all(r.input in function.body.block.args for r in reshapes)
    after = reference.run(module, "main", *inputs)
    # The same sums, batched otherwise (and the scale moved behind the product): equal up
    # to f32 rounding; the boolean output exactly.
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(after[1], before[1])


def test_addmm_block_fuses_the_ops_after_each_gemm_into_it() -> None:
    """Before the rewrite the activation and the residual add ran as kernels of their own
    beside the two GEMMs (a reshape is not an epilogue); now each joins its GEMM."""
    text = _addmm_block((4, 16, 32), (4, 16), 32, 48)
    module = parse(text)
    GraphFusePass().apply(Context(), module)
    kernels = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    contents = [{type(op) for op in k.body.block.ops} for k in kernels]
    gemms = [ops for ops in contents if graph.MatmulOp in ops]
    assert len(gemms) == 2
    assert {graph.AddOp, graph.TanhOp, graph.MulOp} <= gemms[0]
    assert {graph.MulOp, graph.AddOp} <= gemms[1]
    assert not any(graph.ReshapeOp in ops for ops in contents)
    compile_and_compare(parse(text), options=CompileOptions(threads=2))
