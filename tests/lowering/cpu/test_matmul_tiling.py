"""loop-tile-matmul: matmuls computed by the register-tiled micro-kernel give the
reference's results, at sizes that are not multiples of the 6x16 tile, with epilogues,
batches (B shared or per batch) and one or two threads; the tiled path is really taken."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu.gemm import loop_tile_matmul, tile_plan
from graphfuse.parsing import GraphfuseError, parse_text
from graphfuse.runtime import llvm_lowering
from graphfuse.runtime.build import CpuTarget, run_tool
from graphfuse.runtime.cpu_tools import LANES_VARIABLE, runnable_lanes
from graphfuse.testing.compare import compile_and_compare
from graphfuse.toolchain import ToolchainError


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _matmul_bias_relu(batch: tuple[int, ...], m: int, k: int, n: int, shared_b: bool) -> str:
    a, b = _t(*batch, m, k), _t(k, n) if shared_b else _t(*batch, k, n)
    c, bias = _t(*batch, m, n), _t(n)
    return f"""
func.func @main(%a: {a}, %b: {b}, %bias: {bias}, %r: {c}) -> {c} {{
  %0 = graph.matmul %a, %b : ({a}, {b}) -> {c}
  %1 = graph.add %0, %bias : ({c}, {bias}) -> {c}
  %2 = graph.relu %1 : {c}
  %3 = graph.add %2, %r : ({c}, {c}) -> {c}
  func.return %3 : {c}
}}
"""


SHAPES = [
    ((), 17, 1000, 20, True),  # rows: 2 full tiles + 5; columns: one panel + 4
    ((), 1000, 5, 17, True),  # short K
    ((), 3, 1000, 40, True),  # only a tail of 3 rows
    ((), 96, 64, 64, True),  # exact tiles
    ((1,), 128, 64, 48, True),  # batch 1
    ((3,), 20, 40, 33, True),  # batch 3, B shared
    ((2, 3), 13, 48, 19, False),  # batch 2x3, B per batch (packed per batch)
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[0]}x{s[1]}x{s[2]}x{s[3]}" for s in SHAPES])
def test_tiled_matmul_matches_reference(
    shape: tuple[tuple[int, ...], int, int, int, bool], threads: int, monkeypatch: Any
) -> None:
    """SHAPES are sized for AVX2's 6x16 tiles (lanes=8, which AVX-512 hosts run too), so
    the tiling is the same on every host; test_avx512_geometry_matches_reference covers
    the 32-column panels. They are smaller than tile_plan.MIN_THREADED_MACS, lowered here
    to 0 so that their threaded form is the one tested."""
    monkeypatch.setattr(tile_plan, "MIN_THREADED_MACS", 0)
    text = _matmul_bias_relu(*shape)
    options = CompileOptions(threads=threads, lanes=8)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    assert "vector.fma" in upstream, "the matmul was not tiled"
    # Every shape here has two panels or more, packed in parallel.
    assert ("scf.parallel" in upstream) == (threads > 1)
    compile_and_compare(parse_text(text, "mm"), options=options)


@pytest.mark.parametrize("macs", [tile_plan.MIN_THREADED_MACS // 2, tile_plan.MIN_THREADED_MACS])
def test_small_gemms_run_on_the_calling_thread(macs: int) -> None:
    """A GEMM of fewer multiply-adds than MIN_THREADED_MACS is tiled without threads."""
    text = _matmul_bias_relu((), 64, macs // (64 * 64), 64, True)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=2))
    assert "vector.fma" in upstream
    assert ("scf.parallel" in upstream) == (macs >= tile_plan.MIN_THREADED_MACS)


@pytest.mark.parametrize("lanes", [8, 16])
def test_one_panel_gemm_splits_its_rows_over_threads(lanes: int) -> None:
    """A threaded GEMM of one panel (32 x 288 @ 288 x 16) splits its row tiles into two
    tasks, each packing the panel into a slot of its own (two Bp slots, not one); the
    halves give the reference's result, on 2 threads and on 1."""
    text = _matmul_bias_relu((), 32, 288, 16, True)
    options = CompileOptions(threads=2, lanes=lanes)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    assert "scf.parallel" in upstream
    assert f"memref<2x1x288x{2 * lanes}xf32>" in upstream
    for threads in (1, 2):
        options = CompileOptions(threads=threads, lanes=lanes)
        compile_and_compare(parse_text(text, "mm"), options=options)


@pytest.mark.parametrize("shape", [((), 1000, 100, 1, True), ((), 1, 1000, 100, True)])
def test_vector_matrix_products_keep_the_dot_product_form(
    shape: tuple[tuple[int, ...], int, int, int, bool],
) -> None:
    """1xN and Nx1 results index their unit dimension with a constant: not a tile's shape
    (a GEMV is memory-bound anyway), so they stay dot products, and stay right."""
    text = _matmul_bias_relu(*shape)
    assert "vector.fma" not in lower_to(parse_text(text, "mv"), Stage.UPSTREAM)
    compile_and_compare(parse_text(text, "mv"), options=CompileOptions(threads=2))


def test_tiny_and_non_f32_matmuls_keep_the_dot_product_form() -> None:
    tiny = _matmul_bias_relu((), 4, 8, 8, True)
    assert "vector.fma" not in lower_to(parse_text(tiny, "tiny"), Stage.UPSTREAM)
    compile_and_compare(parse_text(tiny, "tiny"))
    text = """
func.func @main(%a: tensor<64x64xi32>, %b: tensor<64x64xi32>) -> tensor<64x64xi32> {
  %0 = graph.matmul %a, %b : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi32>
  func.return %0 : tensor<64x64xi32>
}
"""
    assert "vector.fma" not in lower_to(parse_text(text, "int"), Stage.UPSTREAM)
    compile_and_compare(parse_text(text, "int"))


def _conv_bn_relu(
    batch: int,
    channels: int,
    out: int,
    size: int,
    strides: int,
    padding: int,
    dilation: int,
    groups: int = 1,
) -> str:
    """conv -> (x - mean) * scale -> relu, output size from the usual formula."""
    k = 3
    span = dilation * (k - 1) + 1
    o = (size + 2 * padding - span) // strides + 1
    x, w = _t(batch, channels, size, size), _t(out, channels // groups, k, k)
    y, v = _t(batch, out, o, o), _t(out, 1, 1)
    return f"""
func.func @main(%x: {x}, %w: {w}, %mean: {v}, %scale: {v}) -> {y} {{
  %0 = graph.conv2d %x, %w strides = [{strides}, {strides}] padding = [{padding}, {padding}, {padding}, {padding}] dilations = [{dilation}, {dilation}] groups = {groups} : ({x}, {w}) -> {y}
  %1 = graph.sub %0, %mean : ({y}, {v}) -> {y}
  %2 = graph.mul %1, %scale : ({y}, {v}) -> {y}
  %3 = graph.relu %2 : {y}
  func.return %3 : {y}
}}
"""


CONVS = [
    (1, 8, 16, 17, 1, 1, 1),  # batch 1, odd size, padding
    (2, 3, 7, 31, 2, 1, 1),  # stride 2, 7 output channels (one tile + 1 row)
    (2, 5, 12, 16, 1, 2, 2),  # dilation 2; rows of 16: the epilogue 8 columns at a time
    (4, 8, 16, 6, 1, 1, 1),  # full panels (4x6x6 = 144), rows of 6: scalar epilogue
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("conv", CONVS, ids=[str(c) for c in CONVS])
def test_tiled_convolution_matches_reference(
    conv: tuple[int, int, int, int, int, int, int], threads: int
) -> None:
    text = _conv_bn_relu(*conv)
    options = CompileOptions(threads=threads)
    assert "vector.fma" in lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    compile_and_compare(parse_text(text, "conv"), options=options)


def _copy_transposes(channels: int, width: int) -> int:
    """1 when the padded NHWC copy of the input (width x width) is made by 8x8 transposes
    (transposed_copies.py: channels a multiple of 8, planes of at least 8 points)."""
    return int(channels % 8 == 0 and width * width >= 8)


def _transposes(n: int, lanes: int = 16) -> int:
    """The 8x8 transposes (24 shuffles each) emitted for N columns: the full panels' and,
    when the last panel's tiles read at least 8 real columns, the last panel's."""
    nr = 2 * lanes
    rest = n % nr
    dots = rest % lanes if rest % lanes <= 4 and n > rest % lanes else 0
    return 1 + (rest - dots >= 8)


TRANSPOSED_PACKS = [
    (2, 16, 24, 12, 1, 1, 1),  # 2 channel blocks of 8, 18 panels
    (2, 8, 16, 15, 2, 1, 1),  # stride 2: output 8x8
    (1, 24, 8, 12, 1, 2, 2),  # dilation 2, padding 2, 3 channel blocks
    (4, 8, 16, 6, 1, 1, 1),  # rows of 6: panels cross output rows and images
    (1, 8, 16, 17, 1, 1, 1),  # N = 289: 18 full panels, the last (1 point) point by point
    (1, 16, 8, 14, 1, 1, 1),  # N = 196 (a 14x14 layer): 12 full panels and 4 points
    (2, 8, 16, 7, 1, 1, 1),  # N = 98 (7x7 layers): 6 full panels and 2 points
    (1, 16, 8, 7, 1, 1, 1),  # N = 49: a full panel, 16 columns by transposes, 1 dot column
    (1, 8, 8, 28, 1, 1, 1),  # N = 784: 24 full panels, the last one's 16 columns by transposes
]


@pytest.mark.parametrize("lanes", runnable_lanes())
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("conv", TRANSPOSED_PACKS, ids=[str(c) for c in TRANSPOSED_PACKS])
def test_channels_last_panels_are_packed_by_8x8_transposes(
    conv: tuple[int, int, int, int, int, int, int], threads: int, lanes: int
) -> None:
    """Channels a multiple of 8 and full panels: the im2col panels are packed from the
    NHWC copy 8 channels x 8 points at a time (24 shuffles per block); same results."""
    text = _conv_bn_relu(*conv)
    options = CompileOptions(threads=threads, lanes=lanes)
    upstream = lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    batch, channels, _, size, stride, padding, dilation = conv
    out = (size + 2 * padding - dilation * 2 - 1) // stride + 1
    expected = _transposes(batch * out * out, lanes) + _copy_transposes(channels, size)
    assert upstream.count("vector.shuffle") == 24 * expected
    compile_and_compare(parse_text(text, "conv"), options=options)


def test_partial_channel_blocks_pack_point_by_point() -> None:
    """12 channels, dilation 2: neither 8 channels nor a (kw, c) run is contiguous."""
    upstream = lower_to(parse_text(_conv_bn_relu(2, 12, 16, 12, 1, 2, 2), "conv"), Stage.UPSTREAM)
    assert "vector.fma" in upstream and "vector.shuffle" not in upstream


def _stem(batch: int, channels: int, out: int, size: int, kernel: int, stride: int) -> str:
    """A stem convolution with bias and relu, padding kernel // 2."""
    pad = kernel // 2
    o = (size + 2 * pad - kernel) // stride + 1
    x, w, y, b = (
        _t(batch, channels, size, size),
        _t(out, channels, kernel, kernel),
        _t(batch, out, o, o),
        _t(out, 1, 1),
    )
    return f"""
func.func @main(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
  %0 = graph.conv2d %x, %w strides = [{stride}, {stride}] padding = [{pad}, {pad}, {pad}, {pad}] : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  %2 = graph.relu %1 : {y}
  func.return %2 : {y}
}}
"""


STEMS = [
    (2, 3, 16, 32, 7, 2),  # an RGB 7x7 stride-2 stem: runs of 21 = blocks at 0, 8, 13
    (1, 3, 8, 20, 3, 1),  # runs of 9: blocks at 0 and 1
    (2, 12, 16, 12, 3, 1),  # runs of 36: blocks at 0, 8, 16, 24, 28
    (1, 4, 8, 18, 5, 2),  # runs of 20, N = 81: 2 full panels, the last point by point
]


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("stem", STEMS, ids=[str(s) for s in STEMS])
def test_few_channels_pack_kw_channel_runs_by_transposes(
    stem: tuple[int, int, int, int, int, int], lanes: int
) -> None:
    """Channels not a multiple of 8 but a (kw, c) run of at least 8 contiguous floats:
    the panels are packed by 8x8 transposes along the run of the collapsed NHWC copy
    (the last block overlapping the one before), with the reference's results."""
    text = _stem(*stem)
    options = CompileOptions(threads=2, lanes=lanes)
    upstream = lower_to(parse_text(text, "stem"), Stage.UPSTREAM, options)
    batch, channels, _, size, kernel, stride = stem
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    assert upstream.count("vector.shuffle") == 24 * _transposes(batch * out * out, lanes)
    assert "memref.collapse_shape" in upstream
    assert f"arith.constant {kernel * channels - 8} : index" in upstream
    compile_and_compare(parse_text(text, "stem"), options=options)


@pytest.mark.parametrize("lanes", [8, 16])
def test_a_last_partial_panel_is_packed_point_by_point_after_the_transposes(lanes: int) -> None:
    """N = 196: the full panels by transposes, up to panel 196 // (2 lanes); the last one
    by points, clamped to column 195 and zero past it."""
    text = _conv_bn_relu(1, 16, 8, 14, 1, 1, 1)
    options = CompileOptions(threads=1, lanes=lanes)
    upstream = lower_to(parse_text(text, "conv"), Stage.UPSTREAM, options)
    assert upstream.count("vector.shuffle") == 24 * (1 + _copy_transposes(16, 14))
    assert f"arith.constant {196 // (2 * lanes)} : index" in upstream
    assert "arith.constant 195 : index" in upstream
    compile_and_compare(parse_text(text, "conv"), options=CompileOptions(threads=2, lanes=lanes))


def test_vector_epilogue_only_where_8_columns_are_neighbours() -> None:
    """Output images of 16x16 take vector stores (through a view of each image as one
    run of 256); images of 6x6 (8 columns from a multiple of 8 would run into the next
    image, whose channels lie between) keep the point-by-point epilogue."""
    avx2 = CompileOptions(lanes=8)
    wide = lower_to(parse_text(_conv_bn_relu(*CONVS[2]), "wide"), Stage.UPSTREAM, avx2)
    assert "vector.store" in wide and ": memref<2x12x256xf32>, vector<8xf32>" in wide
    narrow = lower_to(parse_text(_conv_bn_relu(*CONVS[3]), "narrow"), Stage.UPSTREAM, avx2)
    assert "vector.fma" in narrow
    assert ": memref<4x16x6x6xf32>, vector<8xf32>" not in narrow


AVX512_CASES = {
    "17x1000x20": _matmul_bias_relu((), 17, 1000, 20, True),
    "2x3x13x48x19": _matmul_bias_relu((2, 3), 13, 48, 19, False),
    "96x64x64": _matmul_bias_relu((), 96, 64, 64, True),
    "conv rows of 16": _conv_bn_relu(*CONVS[2]),
    "conv 8x8 transposes": _conv_bn_relu(*TRANSPOSED_PACKS[0]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(AVX512_CASES))
def test_avx512_geometry_matches_reference(case: str, threads: int) -> None:
    """lanes=16 (AVX-512's zmm registers): panels and tiles 32 columns wide, sums and
    epilogues as vector<16xf32>. LLVM splits those into AVX2 halves on this machine, so the
    geometry's indexing is checked here, where its speed cannot be."""
    options = CompileOptions(threads=threads, lanes=16)
    upstream = lower_to(parse_text(AVX512_CASES[case], "t"), Stage.UPSTREAM, options)
    assert "vector.fma" in upstream and "vector<16xf32>" in upstream
    assert "vector<8xf32>" not in upstream or case == "conv 8x8 transposes"
    if case == "conv rows of 16":
        assert ": memref<2x12x256xf32>, vector<16xf32>" in upstream
    if case == "conv 8x8 transposes":  # the panels' transposes and the input copy's
        assert upstream.count("vector.shuffle") == 48
    compile_and_compare(parse_text(AVX512_CASES[case], "t"), options=options)


@pytest.mark.parametrize(
    ("cpu", "lanes"),
    [("skylake-avx512", 16), ("znver4", 16), ("x86-64-v4", 16), ("znver3", 8), ("haswell", 8)],
)
def test_lanes_follow_the_target_cpu(cpu: str, lanes: int, monkeypatch: Any) -> None:
    """A named CPU has its own width, whatever this machine is; this machine's CPU has
    its widest unless GRAPHFUSE_LANES says otherwise."""
    monkeypatch.delenv(LANES_VARIABLE, raising=False)
    assert CpuTarget(cpu=cpu).vector_lanes() == lanes
    monkeypatch.setenv(LANES_VARIABLE, "8")
    assert CpuTarget(cpu=cpu).vector_lanes() == lanes
    assert CpuTarget(cpu=cpu).features() is None


def test_this_cpu_has_its_widest_vectors_by_default(monkeypatch: Any) -> None:
    monkeypatch.delenv(LANES_VARIABLE, raising=False)
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert CpuTarget().vector_lanes() == (16 if " avx512f" in flags else 8)
    assert CpuTarget().vector_lanes() == max(runnable_lanes())
    assert CpuTarget().features() is None


def test_the_lanes_switch_builds_avx2_code(monkeypatch: Any) -> None:
    """GRAPHFUSE_LANES=8 makes this machine's builds 8 lanes wide with AVX-512 off (as an
    AVX2 machine builds them): llc gets -mattr=-avx512f where the CPU has it."""
    monkeypatch.setenv(LANES_VARIABLE, "8")
    target = CpuTarget()
    assert target.vector_lanes() == 8
    args = llvm_lowering.llc_args(target, 3)
    assert ("-mattr=-avx512f" in args) == (16 in runnable_lanes())
    assert CompileOptions().cpu_lowering().count("lanes=16") == 0


@pytest.mark.parametrize("value", ["4", "avx2", "32"])
def test_the_lanes_switch_refuses_other_widths(value: str, monkeypatch: Any) -> None:
    monkeypatch.setenv(LANES_VARIABLE, value)
    with pytest.raises(ToolchainError, match=f"GRAPHFUSE_LANES='{value}': must be 8"):
        CpuTarget().vector_lanes()


@pytest.mark.skipif(16 in runnable_lanes(), reason="refused only on a CPU without AVX-512")
def test_the_lanes_switch_refuses_16_without_avx512(monkeypatch: Any) -> None:
    monkeypatch.setenv(LANES_VARIABLE, "16")
    with pytest.raises(ToolchainError, match="this CPU has no AVX-512"):
        CpuTarget().vector_lanes()


@pytest.mark.parametrize("cpu", ["skylake-avx512", "znver4"])
def test_avx512_targets_get_zmm_multiply_adds(cpu: str) -> None:
    """Built for an AVX-512 CPU (not run: this machine may lack it), the micro-kernel's
    multiply-adds are 512-bit; --lanes 8 keeps them 256-bit."""
    text = _matmul_bias_relu((), 96, 64, 64, True)
    for lanes, register in ((None, "zmm"), (8, "ymm")):
        options = CompileOptions(threads=1, cpu=cpu, lanes=lanes)
        ir = lower_to(parse_text(text, "mm"), Stage.LLVM, options)
        args = ["-O3", f"-mtriple={options.target.triple}", f"-mcpu={cpu}", "-o", "-"]
        asm = run_tool("assembling", "llc", args, ir).decode()
        fmas = re.findall(r"vfmadd\w+\s+[^\n]*", asm)
        assert fmas and all(register in f for f in fmas), (lanes, fmas[:4])


def test_lanes_other_than_8_or_16_are_refused() -> None:
    with pytest.raises(GraphfuseError, match="lanes must be 8 or 16, got 4"):
        lower_to(parse_text(AVX512_CASES["96x64x64"], "t"), Stage.UPSTREAM, CompileOptions(lanes=4))


@pytest.mark.parametrize("groups", [2, 8])
def test_grouped_and_depthwise_convolutions_stay_direct(groups: int) -> None:
    """Each output channel reads its own group's inputs: no shared GEMM operand, so the
    direct form computes them (grouped: from a channels-last copy; depthwise: from a row-
    padded one)."""
    text = _conv_bn_relu(2, 8, 8, 12, 1, 1, 1, groups)
    # Counted at 16 lanes: at 8, the 12-point rows span more than a vector, and
    # depthwise_rows.py computes them from the input rows with vector multiply-adds.
    wide = CompileOptions(lanes=16)
    assert "vector.fma" not in lower_to(parse_text(text, "grouped"), Stage.UPSTREAM, wide)
    for lanes in runnable_lanes():
        options = CompileOptions(threads=2, lanes=lanes)
        compile_and_compare(parse_text(text, "grouped"), options=options)


DEPTHWISE = [
    (2, 8, 8, 12, 1, 1, 1, 8),  # stride 1, padding 1
    (1, 6, 6, 13, 2, 1, 1, 6),  # stride 2, odd size: the last window ends at the padding
    (1, 4, 8, 11, 1, 2, 2, 4),  # dilation 2, padding 2, channel multiplier 2
    (1, 5, 5, 9, 2, 0, 1, 5),  # unpadded: no copy, plain loads
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("conv", DEPTHWISE, ids=[str(c) for c in DEPTHWISE])
def test_depthwise_convolutions_read_a_row_padded_copy(
    conv: tuple[int, int, int, int, int, int, int, int], threads: int
) -> None:
    """A padded depthwise convolution reads an NCHW copy with the padding written out
    (no bounds tests in its sum); an unpadded one reads its input. Same results."""
    text = _conv_bn_relu(*conv)
    options = CompileOptions(threads=threads)
    loops = lower_to(parse_text(text, "dw"), Stage.LOOP, options)
    batch, channels, _, size, _, padding = conv[:6]
    padded = size + 2 * padding
    copies = 1 if padding else 0
    assert f"graphfuse.scratch = {copies} : i64" in loops
    assert padding == 0 or f"memref<{batch}x{channels}x{padded}x{padded}xf32>" in loops
    assert "x{channels}xf32>" not in loops  # no channels-last copy
    assert loops.count("arith.select") == copies  # in the copy only
    compile_and_compare(parse_text(text, "dw"), options=options)


def _pointwise_conv(batch: int, channels: int, out: int, size: int) -> str:
    x, w = _t(batch, channels, size, size), _t(out, channels, 1, 1)
    y, v = _t(batch, out, size, size), _t(out, 1, 1)
    return f"""
func.func @main(%x: {x}, %w: {w}, %shift: {v}) -> {y} {{
  %0 = graph.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : ({x}, {w}) -> {y}
  %1 = graph.add %0, %shift : ({y}, {v}) -> {y}
  func.return %1 : {y}
}}
"""


POINTWISE = [
    ((2, 16, 24, 16), True),  # 2 images of 256 columns: each half panel inside one image
    ((1, 64, 32, 7), True),  # one image of 49: one run, the last panel point by point
    ((2, 32, 32, 7), False),  # 2 images of 49: 8 columns could span both, point by point
    ((3, 24, 40, 10), False),  # runs of 100 (not a multiple of 8)
]


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize(("conv", "rows"), POINTWISE, ids=[str(c) for c, _ in POINTWISE])
def test_row_contiguous_panels_are_packed_by_vector_loads(
    conv: tuple[int, int, int, int], rows: bool, lanes: int
) -> None:
    """A 1x1 convolution's NCHW input is B with each image's H*W columns contiguous: its
    panels are packed from a collapsed view by vector loads where `lanes` columns stay in
    one image (else point by point); same results."""
    text = _pointwise_conv(*conv)
    options = CompileOptions(threads=2, lanes=lanes)
    upstream = lower_to(parse_text(text, "pw"), Stage.UPSTREAM, options)
    batch, channels, _, size = conv
    collapsed = f"into memref<{batch}x{channels}x{size * size}xf32>"
    assert "vector.fma" in upstream and (collapsed in upstream) == rows
    compile_and_compare(parse_text(text, "pw"), options=options)


def test_matmul_panels_are_packed_by_vector_loads() -> None:
    text = _matmul_bias_relu((), 17, 1000, 20, True)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(lanes=8))
    assert "into memref<1000x20xf32>" in upstream
    assert ": memref<1000x20xf32>, vector<8xf32>" in upstream


def test_constant_weights_are_packed_once_and_reused() -> None:
    """x @ W + b with W a constant: W is packed on the first call only (a scratch flag
    records it); later calls with other inputs still get the right results."""
    import numpy as np

    import graphfuse

    rng = np.random.default_rng(3)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    hex_bytes = w.tobytes().hex().upper()
    text = f"""
func.func @main(%x: tensor<30x96xf32>) -> tensor<30x40xf32> {{
  %w = graph.constant dense<"0x{hex_bytes}"> : tensor<96x40xf32>
  %y = graph.matmul %x, %w : (tensor<30x96xf32>, tensor<96x40xf32>) -> tensor<30x40xf32>
  %r = graph.relu %y : tensor<30x40xf32>
  func.return %r : tensor<30x40xf32>
}}
"""
    upstream = lower_to(parse_text(text, "w"), Stage.UPSTREAM)
    assert "vector.fma" in upstream and "memref<1xi8>" in upstream
    compiled = graphfuse.compile(parse_text(text, "w"), options=CompileOptions(threads=2))
    for _ in range(3):
        x = rng.standard_normal((30, 96)).astype(np.float32)
        np.testing.assert_allclose(compiled(x), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-4)


def _transposed_operands(
    a: tuple[int, ...], b: tuple[int, ...], perm_a: list[int] | None, perm_b: list[int] | None
) -> str:
    lines, names, shapes = [], [], []
    for name, shape, perm in (("a", a, perm_a), ("b", b, perm_b)):
        if perm is None:
            names.append(f"%{name}")
            shapes.append(shape)
            continue
        moved = tuple(shape[i] for i in perm)
        lines.append(
            f"  %{name}t = graph.transpose %{name} perm = {perm} : {_t(*shape)} -> {_t(*moved)}"
        )
        names.append(f"%{name}t")
        shapes.append(moved)
    out = _t(*shapes[0][:-1], shapes[1][-1])
    return f"""func.func @main(%a: {_t(*a)}, %b: {_t(*b)}) -> {out} {{
{chr(10).join(lines)}
  %y = graph.matmul {names[0]}, {names[1]} : ({_t(*shapes[0])}, {_t(*shapes[1])}) -> {out}
  func.return %y : {out}
}}
"""


TRANSPOSED = {
    "K^T": ((2, 3, 40, 24), (2, 3, 56, 24), None, [0, 1, 3, 2]),
    "A^T": ((2, 3, 24, 40), (2, 3, 24, 56), [0, 1, 3, 2], None),
    "heads of A": ((2, 40, 3, 24), (2, 3, 24, 56), [0, 2, 1, 3], None),
    "heads of B": ((2, 3, 40, 24), (2, 24, 3, 56), None, [0, 2, 1, 3]),
    "both 2-D": ((96, 200), (144, 96), [1, 0], [1, 0]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(TRANSPOSED))
def test_transposed_operands_fuse_and_stay_tiled(case: str, threads: int) -> None:
    """A transpose feeding a matmul is fused into its kernel (fusion_legality) and read
    through permuted indices by the tiled micro-kernel."""
    text = _transposed_operands(*TRANSPOSED[case])
    options = CompileOptions(threads=threads)
    fused = lower_to(parse_text(text, "mm"), Stage.GRAPH, options)
    assert fused.count("graph.fused") == 1, fused
    assert "vector.fma" in lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    compile_and_compare(parse_text(text, "mm"), options=options)


def _kernel_buffers(text: str, lanes: int | None = None) -> list[str]:
    options = CompileOptions(threads=1, lanes=lanes)
    upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    signature = next(line for line in upstream.splitlines() if "func.func @fused" in line)
    return re.findall(r"memref<([^>]*)>", signature)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_read_in_place_when_its_rows_are_packed_rows(threads: int) -> None:
    """A plain A[batch, m, k] is read where it is (no packed copy, no scratch for it);
    an A read through a transpose is still packed. Both give the reference's results."""
    plain = _transposed_operands((2, 3, 40, 24), (2, 3, 24, 56), None, None)
    # A, B, the result and B's panels (6 batch points, 56 columns in panels of 2 * lanes
    # columns: 4 of 16, or 2 of 32; on one thread 6 tasks, one per point, each packing
    # its panels one at a time into a slot of its own): no Ap.
    operands = ["2x3x40x24xf32", "2x3x24x56xf32", "2x3x40x56xf32"]
    for lanes, panels in ((8, "6x1x24x16xf32"), (16, "6x1x24x32xf32")):
        assert _kernel_buffers(plain, lanes) == [*operands, panels]
    transposed = _transposed_operands(*TRANSPOSED["A^T"])
    assert "6x40x24xf32" in _kernel_buffers(transposed)
    for text in (plain, transposed, _matmul_bias_relu((3,), 20, 40, 33, True)):
        compile_and_compare(parse_text(text, "mm"), options=CompileOptions(threads=threads))


def test_a_read_in_place_through_a_size_one_batch_dimension() -> None:
    """Attention's scores [1, heads, S, S] are read at [0, h, m, k]: the constant index of
    the size-1 dimension does not stop the tiles from reading A where it is (a packed copy
    of 54 MB per call cost Whisper's P @ V a fifth of its time)."""
    text = _transposed_operands((1, 3, 40, 24), (1, 3, 24, 56), None, None)
    operands = ["1x3x40x24xf32", "1x3x24x56xf32", "1x3x40x56xf32"]
    assert _kernel_buffers(text, 16) == [*operands, "3x1x24x32xf32"]
    compile_and_compare(parse_text(text, "mm"), options=CompileOptions(threads=2))


def _batched_matmul(m: int) -> str:
    a, b, out = _t(4, m, 64), _t(4, 64, 200), _t(4, m, 200)
    return f"""func.func @main(%a: {a}, %b: {b}) -> {out} {{
  %y = graph.matmul %a, %b : ({a}, {b}) -> {out}
  func.return %y : {out}
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_single_row_block_packs_its_panels_in_its_tasks(threads: int, monkeypatch: Any) -> None:
    """With one row block (M = 60: 10 tiles) each task packs its own panels before its
    tiles: one parallel loop, not a packing one first; with M = 200 (two row blocks
    share each panel) B is packed by a parallel loop of its own. Both match."""
    monkeypatch.setattr(tile_plan, "ROW_BLOCK_A_BYTES", 0)  # row blocks of 16 tiles
    for m, loops in ((60, 1), (200, 2)):
        text = _batched_matmul(m)
        upstream = lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=2))
        assert upstream.count("scf.parallel") == loops
        compile_and_compare(parse_text(text, "mm"), options=CompileOptions(threads=threads))


def test_transposed_input_fuses_into_convolution_and_pooling() -> None:
    """An NHWC input transposed to NCHW for a convolution and a max-pool: one kernel
    reading it through permuted indices, the convolution still tiled, both results the
    reference's."""
    x, xt = _t(1, 28, 28, 32), _t(1, 32, 28, 28)
    w, y, p = _t(64, 32, 3, 3), _t(1, 64, 28, 28), _t(1, 32, 14, 14)
    text = f"""func.func @main(%x: {x}, %w: {w}) -> ({y}, {p}) {{
  %t = graph.transpose %x perm = [0, 3, 1, 2] : {x} -> {xt}
  %y = graph.conv2d %t, %w strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : ({xt}, {w}) -> {y}
  %p = graph.max_pool2d %t kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : {xt} -> {p}
  func.return %y, %p : {y}, {p}
}}
"""
    options = CompileOptions(threads=2)
    assert lower_to(parse_text(text, "c"), Stage.GRAPH, options).count("graph.fused") == 1
    assert "vector.fma" in lower_to(parse_text(text, "c"), Stage.UPSTREAM, options)
    compile_and_compare(parse_text(text, "c"), options=options)


ROW_ORDER_CASES = {
    # 1000 rows (11 row blocks, a tail of 4), 17 columns: one panel and a narrow one.
    "1000x5x17": ((), 1000, 5, 17, True),
    # batch 2x3, B per batch point: 3 row blocks, 70 columns (a last panel of 6 at AVX2).
    "2x3x200x40x70": ((2, 3), 200, 40, 70, False),
    # 49 columns at AVX-512: 32 + 16 + 1 dot column.
    "130x24x49": ((), 130, 24, 49, True),
}


def _plans(monkeypatch: Any) -> list[tile_plan.TilePlan]:
    """The plans loop-tile-matmul makes from here on, recorded."""
    plans: list[tile_plan.TilePlan] = []

    def record(*args: Any) -> tile_plan.TilePlan:
        plans.append(planned(*args))
        return plans[-1]

    planned = tile_plan.plan_tiling
    monkeypatch.setattr(loop_tile_matmul, "plan_tiling", record)
    return plans


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("budget", [0, tile_plan.ROWS_OUTER_B_BYTES])
@pytest.mark.parametrize("case", list(ROW_ORDER_CASES))
def test_row_tiles_run_across_the_panels_when_they_fit(
    case: str, budget: int, threads: int, lanes: int, monkeypatch: Any
) -> None:
    """A task whose packed panels fit ROWS_OUTER_B_BYTES runs each row tile across them
    (its MR output rows written as streams along N); with a budget of 0 it runs the
    panels outside, as before. Both orders, with their row tails, narrow last panels and
    dot columns, give the reference's results."""
    monkeypatch.setattr(tile_plan, "ROW_BLOCK_A_BYTES", 0)  # row blocks of 16 tiles
    monkeypatch.setattr(tile_plan, "ROWS_OUTER_B_BYTES", budget)
    monkeypatch.setattr(tile_plan, "MIN_THREADED_MACS", 0)
    plans = _plans(monkeypatch)
    text = _matmul_bias_relu(*ROW_ORDER_CASES[case])
    options = CompileOptions(threads=threads, lanes=lanes)
    compile_and_compare(parse_text(text, "mm"), options=options)
    assert len(plans) == 1 and not plans[0].b_in_task
    assert plans[0].rows_outer == (budget > 0)


def test_rows_stay_inside_the_panels_when_the_panels_outgrow_the_budget(
    monkeypatch: Any,
) -> None:
    """Panels past the budget (a long K) keep the panel loop outside, where each panel is
    read from L2 by the row block's tiles; one row block (the task packs its own panels)
    keeps it too. A 1500 x 64 @ 64 x 1500 product (attention's scores) fits and runs
    its rows outside."""
    plans = _plans(monkeypatch)
    for m, k, n in ((1500, 64, 1500), (200, 4608, 512), (60, 64, 200)):
        text = _matmul_bias_relu((), m, k, n, True)
        lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=2, lanes=16))
    by_shape = {(p.found.m, p.found.k, p.found.n): p for p in plans}
    assert by_shape[(1500, 64, 1500)].rows_outer
    # 4608 x 32 x 4 bytes a panel: past the budget from the first one on.
    assert not by_shape[(200, 4608, 512)].rows_outer
    # 60 rows: one row block, whose task packs each panel right before its tiles.
    assert by_shape[(60, 64, 200)].b_in_task and not by_shape[(60, 64, 200)].rows_outer


@pytest.mark.parametrize("lanes", [8, 16])
def test_few_panels_are_packed_by_several_tasks(lanes: int, monkeypatch: Any) -> None:
    """A threaded GEMM whose B is packed before its tasks (two row blocks: 128 output
    channels) and has few panels (a 14x14 image: 196 columns) packs them in at least
    MIN_PACK_TASKS tasks, not one; on the calling thread in one. Both match."""
    monkeypatch.setattr(tile_plan, "ROW_BLOCK_A_BYTES", 0)  # row blocks of 16 tiles
    plans = _plans(monkeypatch)
    text = _conv_bn_relu(1, 64, 128, 14, 1, 1, 1)
    for threads in (2, 1):
        compile_and_compare(
            parse_text(text, "c"), options=CompileOptions(threads=threads, lanes=lanes)
        )
    threaded, serial = plans
    assert threaded.threads and not threaded.b_in_task and threaded.row_blocks == 2
    tasks = -(-threaded.panels // threaded.pack_panels)
    assert tasks >= tile_plan.MIN_PACK_TASKS and threaded.pack_panels < threaded.panels
    assert serial.pack_panels == tile_plan.PACK_PANELS


def test_own_packing_tasks_are_cut_finer(monkeypatch: Any) -> None:
    """With one row block every task packs its own panels, so more tasks cost no packing:
    72 panels (a 48x48 image, 32 channels, 21 M multiply-adds) become 15 tasks of 5,
    not 8 of 9; the results match."""
    plans = _plans(monkeypatch)
    text = _conv_bn_relu(1, 32, 32, 48, 1, 1, 1)
    compile_and_compare(parse_text(text, "c"), options=CompileOptions(threads=2, lanes=16))
    (plan,) = plans
    assert plan.b_in_task and plan.panels == 72
    assert plan.tasks == 15 and plan.panels_per_task == 5


def test_mid_size_gemms_take_a_task_per_macs_per_task(monkeypatch: Any) -> None:
    """A 3x3 convolution of 3.6 M multiply-adds (32 -> 64 channels on 14x14, 7 panels at
    AVX-512) is cut into a task per panel, 7, where 512 Ki multiply-adds a task made 4
    tasks of 2 panels: finer tasks leave the other thread less to wait for at the GEMM's
    end. The results match."""
    plans = _plans(monkeypatch)
    text = _conv_bn_relu(1, 32, 64, 14, 1, 1, 1)
    compile_and_compare(parse_text(text, "c"), options=CompileOptions(threads=2, lanes=16))
    (plan,) = plans
    assert plan.b_in_task and plan.panels == 7 and plan.row_blocks == 1
    assert plan.tasks == 7


@pytest.mark.parametrize("lanes", [8, 16])
def test_uneven_panels_split_their_rows_in_two(lanes: int, monkeypatch: Any) -> None:
    """A threaded GEMM in one row block with fewer panels than tasks wanted, whose panels'
    work does not split evenly in two, also splits its rows in two row blocks, each task
    packing its panel (B is computed): at AVX-512 a 7x7 layer's N = 49 (a panel of
    32, one of 16 and a dot column: 3 vectors of columns) becomes 4 tasks, where 8x8
    (N = 64, two full panels) stays 2, a task per panel. At AVX2, 49 columns are 3 full
    panels of 16 and a dot column (6 vectors, even): this rule leaves them, a task a panel,
    two full panels on one thread; the team's balance (task_balance.py) cuts them into 2
    row blocks of 2 panel blocks (960 -> 320 on 7x7 at AVX2's width: 161 -> 132 us). All
    match the reference."""
    plans = _plans(monkeypatch)
    for size in (7, 8):
        text = _conv_bn_relu(1, 64, 96, size, 1, 1, 1)
        compile_and_compare(parse_text(text, "c"), options=CompileOptions(threads=2, lanes=lanes))
    seven, eight = plans
    assert seven.b_in_task and seven.threads and eight.b_in_task
    assert eight.row_blocks == 1 and eight.tasks == eight.panels
    if lanes == 16:
        assert (seven.panels, seven.row_blocks, seven.tasks) == (2, 2, 4)
        assert seven.per_task == 8 and seven.paired_rows
    else:
        assert (seven.panels, seven.row_blocks, seven.panel_blocks) == (4, 2, 2)


def _constant_weights(m: int, k: int, n: int) -> str:
    """x @ W + bias, ReLU, with W a constant (a model's weights)."""
    import numpy as np

    w = np.random.default_rng(5).standard_normal((k, n)).astype(np.float32)
    x, y = _t(m, k), _t(m, n)
    return f"""
func.func @main(%x: {x}, %bias: {_t(n)}) -> {y} {{
  %w = graph.constant dense<"0x{w.tobytes().hex().upper()}"> : {_t(k, n)}
  %0 = graph.matmul %x, %w : ({x}, {_t(k, n)}) -> {y}
  %1 = graph.add %0, %bias : ({y}, {_t(n)}) -> {y}
  %2 = graph.relu %1 : {y}
  func.return %2 : {y}
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_row_blocks_hold_their_a_budget_in_even_blocks(threads: int, monkeypatch: Any) -> None:
    """A row block takes as many tiles as ROW_BLOCK_A_BYTES of A rows allow (past
    MAX_TILES_PER_TASK), in blocks of even size: 17 full tiles with room for 7 make blocks
    of 6, 6 and 5 (and the 5-row tail), not 7, 7 and 3, whether B is a constant or an
    argument. A short K (STORE_BOUND_K) with a computed B keeps MAX_TILES_PER_TASK, its
    row tiles running across the panels. All match the reference. (The team's balance is
    off here: on 2 threads it cuts these blocks further, test_task_balance.py.)"""
    monkeypatch.setattr(tile_plan, "MIN_THREADED_MACS", 0)
    monkeypatch.setattr(tile_plan, "BALANCE_GAIN", 2.0)
    monkeypatch.setattr(tile_plan, "MAX_TILES_PER_TASK", 4)
    monkeypatch.setattr(tile_plan, "ROW_BLOCK_A_BYTES", 4 * 96 * tile_plan.MR * 7)
    plans = _plans(monkeypatch)
    m, short_k = 17 * tile_plan.MR + 5, tile_plan.STORE_BOUND_K
    options = CompileOptions(threads=threads, lanes=8)
    for text in (
        _constant_weights(m, 96, 40),
        _matmul_bias_relu((), m, 96, 40, True),
        _matmul_bias_relu((), m, short_k, 40, True),
    ):
        compile_and_compare(parse_text(text, "mm"), options=options)
    constant, argument, short = plans
    assert constant.b_constant and (constant.per_task, constant.row_blocks) == (6, 3)
    assert not argument.b_constant and (argument.per_task, argument.row_blocks) == (6, 3)
    assert (short.per_task, short.row_blocks) == (4, 5) and short.rows_outer
