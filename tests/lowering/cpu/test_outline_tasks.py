"""scf-outline-tasks and the `noalias` marks it leads to: which kernels get tasks, that
their pointer arguments are marked in the LLVM IR, and that results stay the reference's,
also where a caller's out= array is an input.

The pass's output itself is checked in lit_tests/lowering/cpu/scf-outline-tasks.mlir."""

from __future__ import annotations

import re

import numpy as np
import pytest

from graphfuse import compile as compile_module
from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu.tuning.scf_outline_tasks import TASK_MARK
from graphfuse.parsing import parse_text
from graphfuse.runtime.llvm_lowering import mark_own_arguments
from graphfuse.testing.compare import compile_and_compare

DEPTHWISE = """func.func @main(%x: tensor<1x32x28x28xf32>, %w: tensor<32x1x3x3xf32>) -> tensor<1x32x28x28xf32> {
  %y = graph.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] groups = 32 : (tensor<1x32x28x28xf32>, tensor<32x1x3x3xf32>) -> tensor<1x32x28x28xf32>
  %r = graph.relu %y : tensor<1x32x28x28xf32>
  func.return %r : tensor<1x32x28x28xf32>
}
"""

TRANSPOSE = """func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %t = graph.transpose %x perm = [1, 0] : tensor<64x64xf32> -> tensor<64x64xf32>
  %y = graph.exp %t : tensor<64x64xf32>
  func.return %y : tensor<64x64xf32>
}
"""


def test_marks_only_the_internal_functions_pointers() -> None:
    llvm_ir = (
        f"define void @k(ptr %0, ptr %1, i64 %2) {{\n"
        f"define internal void @k{TASK_MARK}0(i64 %0, ptr %1, ptr %2, i64 %3, float %4) {{\n"
        f"  call void @k{TASK_MARK}0(i64 0, ptr %0, ptr %1, i64 1, float 0.0)\n"
    )
    marked = mark_own_arguments(llvm_ir).splitlines()
    assert marked[0] == "define void @k(ptr %0, ptr %1, i64 %2) {"
    assert marked[1] == (
        f"define internal void @k{TASK_MARK}0(i64 %0, ptr noalias %1, ptr noalias %2, "
        "i64 %3, float %4) {"
    )
    assert "noalias" not in marked[2]  # a call is not a definition


@pytest.mark.usefixtures("padded_copy_path")
@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_kernel_runs_in_tasks_whose_accesses_do_not_alias(threads: int) -> None:
    """On the padded-copy path (depthwise_rows.py, which computes this layer from the rows
    in explicit vectors, left out), whose scalar loops LLVM vectorises only where the
    accesses do not alias."""
    options = CompileOptions(threads=threads)
    upstream = lower_to(parse_text(DEPTHWISE, "dw"), Stage.UPSTREAM, options)
    assert f"{TASK_MARK}0" in upstream
    llvm_ir = lower_to(parse_text(DEPTHWISE, "dw"), Stage.LLVM, options)
    # The task is inlined and its marks become alias scopes on the loads and stores.
    assert not re.search(rf"^define .*{TASK_MARK}\d+\(", llvm_ir, re.M)
    assert "!noalias" in llvm_ir and "!alias.scope" in llvm_ir
    compile_and_compare(parse_text(DEPTHWISE, "dw"), options=options)


@pytest.mark.parametrize("threads", [1, 2])
def test_out_overlapping_an_input_gets_the_reference_result(threads: int) -> None:
    compiled = compile_module(parse_text(TRANSPOSE, "t"), options=CompileOptions(threads=threads))
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    want = np.exp(x.T)
    buffer = x.copy()
    result = compiled(buffer, out=buffer)
    assert result is buffer
    np.testing.assert_allclose(buffer, want, rtol=1e-5)
    # An out= that shares only part of the input's memory counts too: both are
    # contiguous windows of one block, half a matrix apart.
    block = np.zeros(3 * 64 * 32, np.float32)
    block[: 64 * 64] = x.ravel()
    shifted = block[64 * 32 : 64 * 96].reshape(64, 64)
    assert np.shares_memory(block[: 64 * 64], shifted)
    compiled(block[: 64 * 64].reshape(64, 64), out=shifted)
    np.testing.assert_allclose(shifted, want, rtol=1e-5)
