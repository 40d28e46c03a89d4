"""Deep and wide graphs: no stage may recurse on graph depth or take quadratic time.

A chain of elementwise ops is imported (graph text and ONNX), fused, compiled, run and
compared with the reference interpreter while Python's recursion limit is held a little
above the caller's stack depth, so a recursion on the chain's length anywhere (parser,
passes, lowering, printer, reference interpreter) fails here even at a small length.

The chains in CI have 2,000 ops. Set GRAPHFUSE_DEEP_OPS to run the slow tests on a chain
of that many ops as well (for example `GRAPHFUSE_DEEP_OPS=100000 .venv/bin/python -m
pytest tests/test_deep_graphs.py -k slow`); without it they are skipped.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import onnx
import pytest
from onnx import TensorProto, helper
from xdsl.dialects.builtin import ModuleOp

import graphfuse
from graphfuse.cli import main as cli_main
from graphfuse.compiler import CompileOptions, fuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.parsing import parse_file, parse_text
from graphfuse.testing.compare import assert_matches

CI_OPS = 2000
CI_BRANCHES = 500
"""Branches of the wide graph in CI (each reads a constant, and xDSL parses a dense
constant slowly)."""
HEADROOM = 150
"""Frames allowed above the test's own: enough for xDSL's nesting (module, function,
kernel, loops), far below any chain's length."""

SHAPE = (2, 8)
TYPE = "tensor<2x8xf32>"
_STEPS = ("add", "relu", "mul", "tanh", "sub", "neg")
"""The chain repeats these; binary steps read the second argument."""
_ONNX_NAMES = {"add": "Add", "relu": "Relu", "mul": "Mul", "tanh": "Tanh", "sub": "Sub"}
_ONNX_NAMES["neg"] = "Neg"

_T = TypeVar("_T")


@contextmanager
def _shallow_stack() -> Generator[None, None, None]:
    """Hold the recursion limit at HEADROOM frames above the current depth."""
    depth = 0
    frame = inspect.currentframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + HEADROOM)
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


def _shallow(call: Callable[[], _T]) -> _T:
    with _shallow_stack():
        return call()


def _chain_text(ops: int) -> str:
    lines = [f"func.func @main(%x: {TYPE}, %y: {TYPE}) -> {TYPE} {{"]
    previous = "%x"
    for i in range(ops):
        step = _STEPS[i % len(_STEPS)]
        if step in ("add", "mul", "sub"):
            lines.append(f"  %v{i} = graph.{step} {previous}, %y : ({TYPE}, {TYPE}) -> {TYPE}")
        else:
            lines.append(f"  %v{i} = graph.{step} {previous} : {TYPE}")
        previous = f"%v{i}"
    lines += [f"  func.return {previous} : {TYPE}", "}"]
    return "\n".join(lines) + "\n"


def _chain_onnx(ops: int) -> onnx.ModelProto:
    nodes: list[onnx.NodeProto] = []
    previous = "x"
    for i in range(ops):
        step = _STEPS[i % len(_STEPS)]
        inputs = [previous, "y"] if step in ("add", "mul", "sub") else [previous]
        nodes.append(helper.make_node(_ONNX_NAMES[step], inputs, [f"v{i}"]))
        previous = f"v{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(SHAPE)) for n in ("x", "y")],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, list(SHAPE))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _wide_text(branches: int) -> str:
    """`branches` independent x * c_i joined by a balanced tree of adds."""
    lines = [f"func.func @main(%x: {TYPE}) -> {TYPE} {{"]
    level: list[str] = []
    for i in range(branches):
        lines.append(f"  %c{i} = graph.constant dense<{i + 1}.0> : {TYPE}")
        lines.append(f"  %b{i} = graph.mul %x, %c{i} : ({TYPE}, {TYPE}) -> {TYPE}")
        level.append(f"%b{i}")
    count = 0
    while len(level) > 1:
        joined: list[str] = []
        for a, b in zip(level[::2], level[1::2], strict=False):
            lines.append(f"  %j{count} = graph.add {a}, {b} : ({TYPE}, {TYPE}) -> {TYPE}")
            joined.append(f"%j{count}")
            count += 1
        level = joined + level[len(level) - len(level) % 2 :]
    lines += [f"  func.return {level[0]} : {TYPE}", "}"]
    return "\n".join(lines) + "\n"


def _compile_and_compare(module: ModuleOp, options: CompileOptions) -> None:
    """Fuse a copy (checking it verifies), compile and run, all on a shallow stack."""
    function = reference.find_function(module, "main")
    arrays = reference.random_inputs(function, seed=0)
    fused = module.clone()
    _shallow(lambda: fuse(fused, options))
    expected = _shallow(lambda: reference.run(module, "main", *arrays))
    compiled = _shallow(lambda: graphfuse.compile(module, options=options))
    got = compiled(*arrays)
    assert_matches(got if isinstance(got, tuple) else (got,), expected)


def test_deep_chain_text_one_kernel_matches_reference():
    """Parsed from text and fused into one kernel of every op: the kernel's scalar body is
    as deep as the chain."""
    module = _shallow(lambda: parse_text(_chain_text(CI_OPS), "chain.mlir"))
    _compile_and_compare(module, CompileOptions(max_depth=CI_OPS, threads=1))


def test_deep_chain_onnx_matches_reference():
    """Imported from ONNX, fused at the default max-depth (several kernels in a chain)."""
    model = _chain_onnx(CI_OPS)
    module = _shallow(lambda: from_onnx(model))
    _compile_and_compare(module, CompileOptions(threads=1))


def test_deep_chain_cli_import_and_fuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`graphfuse import` and `graphfuse fuse` on the chain, and the output parses back."""
    model = tmp_path / "chain.onnx"
    onnx.save(_chain_onnx(CI_OPS), str(model))
    imported, fused = tmp_path / "chain.mlir", tmp_path / "fused.mlir"
    assert _shallow(lambda: cli_main(["import", str(model), "-o", str(imported)])) == 0
    assert _shallow(lambda: cli_main(["fuse", str(imported), "-o", str(fused)])) == 0
    assert capsys.readouterr().err == ""
    module = _shallow(lambda: parse_file(fused))
    kernels = [op for op in module.walk() if op.name == "graph.fused"]
    assert len(kernels) >= CI_OPS // 256


def test_wide_graph_matches_reference():
    """Independent branches joined by a tree of adds (fan-in, not depth)."""
    module = _shallow(lambda: parse_text(_wide_text(CI_BRANCHES), "wide.mlir"))
    _compile_and_compare(module, CompileOptions(threads=1))


def _deep_ops() -> int:
    value = os.environ.get("GRAPHFUSE_DEEP_OPS", "")
    if not value.isdigit():
        pytest.skip("set GRAPHFUSE_DEEP_OPS (e.g. 100000) to run the slow deep-graph tests")
    return int(value)


def test_slow_deep_chain_text_matches_reference():
    module = _shallow(lambda: parse_text(_chain_text(_deep_ops()), "chain.mlir"))
    _compile_and_compare(module, CompileOptions())


def test_slow_deep_chain_onnx_matches_reference():
    module = _shallow(lambda: from_onnx(_chain_onnx(_deep_ops())))
    _compile_and_compare(module, CompileOptions())


def test_shallow_stack_catches_recursion_on_depth():
    """The guard itself: a recursion as deep as the chain fails under it."""

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    with pytest.raises(RecursionError), _shallow_stack():
        depth(CI_OPS)
    assert depth(100) == 100
