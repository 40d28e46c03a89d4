"""Entry functions called through one array of descriptor pointers (packed_entry.py): a
function taking more buffers than ctypes passes runs and matches the reference, a C
program calls a written library as docs/cli.md says, and a library without the packed
form refuses such a function in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType, f32

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.parsing import parse_text
from graphfuse.runtime import ArgumentError
from graphfuse.runtime.build import build_shared_library, run_tool
from graphfuse.runtime.compiled import CTYPES_MAX_ARGUMENTS, CompiledFunction
from graphfuse.testing.compare import compile_and_compare

SINGLE = CompileOptions(threads=1)


def _rotated_sums(n: int) -> str:
    """@main(a0..a{n-1}) -> (a0 + a1, a1 + a2, ..., a{n-1} + a0): 2n buffers."""
    t = "tensor<3xf32>"
    args = ", ".join(f"%a{i}: {t}" for i in range(n))
    body = "".join(
        f"  %r{i} = graph.add %a{i}, %a{(i + 1) % n} : ({t}, {t}) -> {t}\n" for i in range(n)
    )
    results = ", ".join(f"%r{i}" for i in range(n))
    types = ", ".join([t] * n)
    return f"func.func @main({args}) -> ({types}) {{\n{body}  func.return {results} : {types}\n}}"


def test_more_buffers_than_ctypes_passes_match_the_reference() -> None:
    text = _rotated_sums(600)
    compiled = graphfuse.compile(parse_text(text, "many"), options=SINGLE)
    assert len(compiled.inputs) + len(compiled.outputs) > CTYPES_MAX_ARGUMENTS + 100
    compile_and_compare(parse_text(text, "many"), options=SINGLE)


ADD = """func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.exp %0 : tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}
"""

CALLER = r"""
#include <stdio.h>
#include "libadd.h"

int main(void) {
  float x[6] = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, y[3] = {0.5f, -1.0f, 2.0f}, out[12];
  void *buffers[] = {x, y, out};
  if (add_main_run_packed(NULL, buffers) != GRAPHFUSE_OK || add_main(x, y, out + 6) != GRAPHFUSE_OK)
    return 1;
  for (int i = 0; i < 12; ++i) printf("%.9g\n", out[i]);
  return 0;
}
"""


def test_a_c_program_calls_a_written_library(tmp_path: Path) -> None:
    """Through the header written beside it (docs/c-api.md): the packed and plain forms."""
    library = tmp_path / "libadd.so"
    graphfuse.compile(parse_text(ADD, "add"), options=SINGLE, output=library)
    source = tmp_path / "caller.c"
    source.write_text(CALLER)
    program = tmp_path / "caller"
    flags = ["-o", str(program), f"-I{tmp_path}", str(source), str(library)]
    run_tool("building the caller", "cc", [*flags, f"-Wl,-rpath,{tmp_path}"])
    printed = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    got = np.array(printed.split(), dtype=np.float32).reshape(2, 2, 3)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    want = np.exp(x + np.array([0.5, -1.0, 2.0], dtype=np.float32))
    np.testing.assert_allclose(got, [want, want], rtol=1e-6)


def test_too_many_buffers_without_the_packed_form_are_refused() -> None:
    n = CTYPES_MAX_ARGUMENTS + 1
    args = ", ".join(f"%a{i}: memref<1xf32>" for i in range(n))
    text = f"func.func @main({args}) attributes {{llvm.emit_c_interface}} {{\n  func.return\n}}"
    library = build_shared_library(text, SINGLE.target)
    buffers = [MemRefType(f32, [1])] * n
    with pytest.raises(ArgumentError, match=rf"@main takes {n} buffers, more than ctypes"):
        CompiledFunction(library, "main", buffers, [], [])
