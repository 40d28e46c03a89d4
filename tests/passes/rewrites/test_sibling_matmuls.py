"""MergeSiblingMatmuls (graph-simplify): matmuls sharing their input become one GEMM whose
result is sliced back, with the same numbers as before (reference interpreter)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import verify
from graphfuse.passes.rewrites.graph_simplify import GraphSimplifyPass
from tests.conftest import parse


def _dense(array: np.ndarray) -> str:
    shape = "x".join(str(d) for d in array.shape)
    values = ", ".join(repr(float(v)) for v in array.reshape(-1))
    return (
        f"dense<[{values}]> : tensor<{shape}xf32>"
        if array.ndim == 1
        else (
            f"dense<{np.array2string(array, separator=', ', threshold=10**9)}> : tensor<{shape}xf32>"
        )
    )


def _projections(
    rows: int, constants: bool, bias: bool | tuple[bool, ...], rng, widths=(6, 6, 4)
) -> str:
    """x @ w_i (+ b_i) for three widths (`bias` for all, or per projection), each result
    also reshaped so it is used on."""
    biased = bias if isinstance(bias, tuple) else (bias,) * len(widths)
    k = 8
    args = [f"%x: tensor<{rows}x{k}xf32>"]
    lines: list[str] = []
    results: list[str] = []
    for i, n in enumerate(widths):
        w = rng.standard_normal((k, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        if constants:
            lines.append(f"  %w{i} = graph.constant {_dense(w)}")
            lines.append(f"  %b{i} = graph.constant {_dense(b)}")
        else:
            args += [f"%w{i}: tensor<{k}x{n}xf32>", f"%b{i}: tensor<{n}xf32>"]
        out = f"tensor<{rows}x{n}xf32>"
        lines.append(
            f"  %m{i} = graph.matmul %x, %w{i} : (tensor<{rows}x{k}xf32>, tensor<{k}x{n}xf32>) -> {out}"
        )
        value = f"%m{i}"
        if biased[i]:
            lines.append(f"  %a{i} = graph.add %m{i}, %b{i} : ({out}, tensor<{n}xf32>) -> {out}")
            value = f"%a{i}"
        lines.append(f"  %r{i} = graph.relu {value} : {out}")
        results.append((f"%r{i}", out))
    names = ", ".join(r for r, _ in results)
    types = ", ".join(t for _, t in results)
    body = "\n".join(lines)
    return (
        f"func.func @main({', '.join(args)}) -> ({types}) {{\n{body}\n"
        f"  func.return {names} : {types}\n}}"
    )


def _inputs(module, rng) -> list[np.ndarray]:
    function = next(iter(module.ops))
    return [
        rng.standard_normal(graph.shape_of(a)).astype(np.float32) for a in function.body.block.args
    ]


def _simplified(text: str, rng):
    module = parse(text)
    arrays = _inputs(module, rng)
    before = reference.run(module, "main", *arrays)
    GraphSimplifyPass().apply(Context(), module)
    verify(module)
    after = reference.run(module, "main", *arrays)
    return module, before, after


def _count(module, name: str) -> int:
    return sum(1 for op in module.walk() if op.name == name)


@pytest.mark.parametrize("bias", [False, True])
def test_projections_become_one_matmul_with_the_same_numbers(bias, rng):
    module, before, after = _simplified(_projections(64, True, bias, rng), rng)
    assert _count(module, "graph.matmul") == 1
    assert _count(module, "graph.slice") == 3
    # The biases join the merged GEMM's epilogue: one addition is left.
    assert _count(module, "graph.add") == (1 if bias else 0)
    assert _count(module, "graph.concat") == 0
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_projection_without_bias_adds_zeros_in_the_merged_epilogue(rng):
    """Whisper's key projection has no bias where the query's and value's have one: the
    merged GEMM adds [b_q, 0, b_v], so no addition is left after the slices."""
    module, before, after = _simplified(_projections(64, True, (True, False, True), rng), rng)
    assert _count(module, "graph.matmul") == 1
    adds = [op for op in module.walk() if op.name == "graph.add"]
    assert len(adds) == 1 and isinstance(adds[0].lhs.owner, graph.MatmulOp)
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_weights_that_are_arguments_stay_apart(rng):
    """Concatenating them would copy every weight on every call."""
    module, _, _ = _simplified(_projections(64, False, True, rng), rng)
    assert _count(module, "graph.matmul") == 3
    assert _count(module, "graph.concat") == 0


def test_a_weight_computed_from_a_sibling_is_no_sibling(rng):
    """A @ tanh(A @ v) (power iteration, a 2-layer GCN): merging would make the weights
    depend on the merged product, a cycle."""
    text = """func.func @main(%a: tensor<64x64xf32>, %v: tensor<64x1xf32>) -> tensor<64x1xf32> {
  %v1 = graph.matmul %a, %v : (tensor<64x64xf32>, tensor<64x1xf32>) -> tensor<64x1xf32>
  %t = graph.tanh %v1 : tensor<64x1xf32>
  %v2 = graph.matmul %a, %t : (tensor<64x64xf32>, tensor<64x1xf32>) -> tensor<64x1xf32>
  func.return %v2 : tensor<64x1xf32>
}"""
    module, before, after = _simplified(text, rng)
    assert _count(module, "graph.matmul") == 2
    np.testing.assert_array_equal(before[0], after[0])


def test_one_weight_read_twice_is_not_concatenated_with_itself(rng):
    w = rng.standard_normal((8, 4)).astype(np.float32)
    text = f"""func.func @main(%x: tensor<64x8xf32>) -> (tensor<64x4xf32>, tensor<64x4xf32>) {{
  %w = graph.constant {_dense(w)}
  %a = graph.matmul %x, %w : (tensor<64x8xf32>, tensor<8x4xf32>) -> tensor<64x4xf32>
  %b = graph.matmul %x, %w : (tensor<64x8xf32>, tensor<8x4xf32>) -> tensor<64x4xf32>
  func.return %a, %b : tensor<64x4xf32>, tensor<64x4xf32>
}}"""
    module, _, _ = _simplified(text, rng)
    widths = [
        graph.shape_of(op.results[0])[-1] for op in module.walk() if op.name == "graph.matmul"
    ]
    assert widths == [4]


def test_swiglu_siblings_stay_apart(rng):
    text = """func.func @main(%x: tensor<64x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>) -> tensor<64x16xf32> {
  %g = graph.matmul %x, %wg : (tensor<64x8xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
  %u = graph.matmul %x, %wu : (tensor<64x8xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
  %h = graph.mul %g, %u : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  func.return %h : tensor<64x16xf32>
}"""
    module, before, after = _simplified(text, rng)
    assert _count(module, "graph.matmul") == 2
    np.testing.assert_array_equal(before[0], after[0])


def test_different_inner_sizes_or_operand_positions_stay_apart(rng):
    text = """func.func @main(%x: tensor<64x8xf32>, %w: tensor<8x16xf32>, %v: tensor<64x64xf32>) -> (tensor<64x16xf32>, tensor<64x8xf32>) {
  %a = graph.matmul %x, %w : (tensor<64x8xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
  %b = graph.matmul %v, %x : (tensor<64x64xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  func.return %a, %b : tensor<64x16xf32>, tensor<64x8xf32>
}"""
    module, _, _ = _simplified(text, rng)
    assert _count(module, "graph.matmul") == 2
    assert _count(module, "graph.slice") == 0
