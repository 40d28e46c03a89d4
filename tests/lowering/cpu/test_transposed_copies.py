"""A convolution's NCHW -> NHWC operand copy is made by 8x8 register transposes
(lowering/cpu/transposed_copies.py), along rows of 8 points or more or along whole planes
of 8 or more (7x7, 3x3): no copy nest is left storing into the channels-last buffer, and
results match the reference interpreter."""

from __future__ import annotations

import pytest

from graphfuse import pipelines
from graphfuse.compiler import CompileOptions, Stage, lower
from graphfuse.dialects import loop
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.test_depthwise import _conv as _depthwise
from tests.lowering.cpu.test_matmul_tiling import _conv_bn_relu


def _kernel(text: str) -> loop.KernelOp:
    module = parse_text(text, "conv")
    lower(module, Stage.LOOP, CompileOptions())
    pipelines.run(pipelines.spec("loop-tile-matmul", lanes=16), module)
    kernels = [k for k in module.walk() if isinstance(k, loop.KernelOp)]
    assert len(kernels) == 1
    return kernels[0]


def _copy_nests(kernel: loop.KernelOp) -> list[loop.ParallelOp]:
    """Top-level nests storing a value loaded from the image (argument 0) unchanged: its
    copy (the weights' copy is another matter)."""
    found: list[loop.ParallelOp] = []
    for nest in kernel.body.block.ops:
        if not isinstance(nest, loop.ParallelOp):
            continue
        loads = [op for op in nest.body.block.ops if isinstance(op, loop.LoadOp)]
        stores = [op for op in nest.body.block.ops if isinstance(op, loop.StoreOp)]
        copies = len(loads) == 1 and len(stores) == 1 and stores[0].value is loads[0].result
        if copies and loads[0].buffer is kernel.body.block.args[0]:
            found.append(nest)
    return found


CASES = {
    "3x3 conv, 16 channels, rows of 12": _conv_bn_relu(2, 16, 8, 12, 1, 1, 1),
    "3x3 conv, stride 2, rows of 17": _conv_bn_relu(1, 8, 8, 17, 2, 1, 1),
    "7x7 depthwise, rows of 8": _depthwise(1, 16, 8, 7, 1, 3, "silu"),
    "3x3 depthwise, rows of 4 from 8": _depthwise(2, 24, 8, 3, 2, 1, "relu6"),
    "3x3 depthwise, 4x4 planes": _depthwise(2, 24, 4, 3, 1, 1, "relu6"),
    "3x3 depthwise, 3x3 planes (9 points)": _depthwise(1, 32, 3, 3, 1, 1, "silu"),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_channels_last_copies_are_made_by_transposes(case: str, threads: int) -> None:
    kernel = _kernel(CASES[case])
    assert not _copy_nests(kernel)
    assert sum(op.name == "vector.shuffle" for op in kernel.walk()) >= 24
    compile_and_compare(parse_text(CASES[case], "conv"), options=CompileOptions(threads=threads))


def test_planes_of_fewer_than_8_points_keep_the_copy_nest() -> None:
    kernel = _kernel(_depthwise(1, 16, 2, 3, 1, 1, "relu6"))
    assert _copy_nests(kernel)


def test_channels_not_a_multiple_of_8_keep_the_copy_nest() -> None:
    kernel = _kernel(_conv_bn_relu(1, 12, 8, 12, 1, 1, 1))
    assert _copy_nests(kernel)
