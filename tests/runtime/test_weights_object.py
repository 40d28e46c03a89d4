"""Weights reach a library as binary data: an object of raw bytes linked into a library
written out (which then stands alone), never hex text through the tools."""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.lowering.graph_to_loop.detached_constants import EMBEDDED_CONSTANT_LIMIT
from graphfuse.runtime import CompiledFunction, cpu_tools, llvm_lowering
from graphfuse.runtime.weights_object import ALIGNMENT, weights_object
from tests.conftest import parse, run_text

RNG = np.random.default_rng(7)
W = RNG.standard_normal((128, 256)).astype(np.float32)  # 128 KiB: over the limit
X = RNG.standard_normal((8, 128)).astype(np.float32)

MATMUL_BY_WEIGHT = f"""
func.func @main(%x: tensor<8x128xf32>) -> tensor<8x256xf32> {{
  %w = graph.constant dense<"0x{W.tobytes().hex().upper()}"> : tensor<128x256xf32>
  %y = graph.matmul %x, %w : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
  %z = graph.reduce_max %y axes = [0] : tensor<8x256xf32> -> tensor<256xf32>
  %s = graph.sub %y, %z : (tensor<8x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
  %e = graph.exp %s : tensor<8x256xf32>
  func.return %e : tensor<8x256xf32>
}}
"""

LOAD_AND_RUN = """
import json, sys
import numpy as np
from xdsl.context import Context
from xdsl.parser import Parser
from graphfuse.runtime.compiled import CompiledFunction

library, types, inputs, result = sys.argv[1:5]
types = {k: [Parser(Context(), t).parse_type() for t in v] for k, v in json.loads(types).items()}
f = CompiledFunction(library, "main", types["inputs"], types["outputs"], types["scratch"])
np.save(result, f(np.load(inputs)))
"""
"""Loads a library in a fresh process with nothing but its path and signature (no weights
copied in), and saves what it computes."""


def _run_in_fresh_process(library: Path, compiled: object, folder: Path) -> np.ndarray:
    assert isinstance(compiled, CompiledFunction)
    types = {
        "inputs": [str(t) for t in compiled.inputs],
        "outputs": [str(t) for t in compiled.outputs],
        "scratch": [str(t) for t in compiled.scratch],
    }
    np.save(folder / "x.npy", X)
    run = subprocess.run(
        [sys.executable, "-c", LOAD_AND_RUN, str(library), json.dumps(types)]
        + [str(folder / "x.npy"), str(folder / "y.npy")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return np.load(folder / "y.npy")


@pytest.mark.parametrize("threads", [1, 2])
def test_a_library_written_out_stands_alone(tmp_path: Path, monkeypatch, threads: int) -> None:
    """Its weight is linked in: a fresh process loads it, with the build cache gone, and
    computes what the reference does."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(cache))
    out = tmp_path / "out"
    out.mkdir()
    compiled = graphfuse.compile(
        parse(MATMUL_BY_WEIGHT), options=CompileOptions(threads=threads), output=out / "m.so"
    )
    assert (out / "m.so").stat().st_size > W.nbytes
    for path in cache.iterdir():
        path.unlink()
    (want,) = run_text(MATMUL_BY_WEIGHT, X)
    got = _run_in_fresh_process(out / "m.so", compiled, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


LONGEST_HEX = re.compile(r'"0x([0-9A-Fa-f]+)"')


@pytest.mark.parametrize("written_out", [True, False])
def test_no_large_hex_reaches_the_tools(tmp_path: Path, monkeypatch, written_out: bool) -> None:
    """Every text handed to mlir-opt holds the weight as a declaration, no bytes."""
    monkeypatch.setenv("GRAPHFUSE_CACHE_DIR", str(tmp_path / "cache"))
    given: list[str] = []
    real = cpu_tools.run_tool

    def recording(stage: str, tool: str, args: list[str], stdin: str | bytes | None = None):
        if tool == "mlir-opt" and isinstance(stdin, str):
            given.append(stdin)
        return real(stage, tool, args, stdin)

    monkeypatch.setattr(llvm_lowering, "run_tool", recording)
    output = tmp_path / "m.so" if written_out else None
    compiled = graphfuse.compile(parse(MATMUL_BY_WEIGHT), output=output)
    assert given
    longest = max((len(m) for text in given for m in LONGEST_HEX.findall(text)), default=0)
    assert longest <= 2 * EMBEDDED_CONSTANT_LIMIT
    weight = [
        line
        for text in given
        for line in text.splitlines()
        if "memref.global" in line and "memref<128x256xf32>" in line
    ]
    assert weight and all("initial_value =" not in line for line in weight)
    (want,) = run_text(MATMUL_BY_WEIGHT, X)
    np.testing.assert_allclose(compiled(X), want, rtol=1e-4, atol=1e-5)


def test_weights_object_defines_aligned_read_only_symbols(tmp_path: Path) -> None:
    weights = {"first": bytes(range(200)), "second.w": b"\x01\x02\x03"}
    obj = weights_object(weights, tmp_path)
    library = tmp_path / "w.so"
    cpu_tools.run_tool("linking", "cc", ["-shared", "-o", str(library), str(obj)])
    loaded = ctypes.CDLL(str(library))
    for name, data in weights.items():
        symbol = ctypes.c_char.in_dll(loaded, name)
        assert ctypes.addressof(symbol) % ALIGNMENT == 0
        assert ctypes.string_at(ctypes.addressof(symbol), len(data)) == data
    sections = subprocess.run(["objdump", "-h", str(obj)], capture_output=True, text=True).stdout
    line = next(x for x in sections.splitlines() if "graphfuse_weights" in x)
    flags = sections.splitlines()[sections.splitlines().index(line) + 1]
    assert "READONLY" in flags
