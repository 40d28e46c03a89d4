"""The NVPTX build: PTX for every lit fusion case and every benchmark workload, accepted by
ptxas; chip and PTX ISA checks; the CUDA runtime's errors without a GPU; and, on a machine
with an NVIDIA GPU, every compiled case and random graph run on it against the reference.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphfuse
from graphfuse.compiler import CompileOptions, Stage, fuse, lower_to
from graphfuse.parsing import parse_text
from graphfuse.runtime.cuda_driver import CudaError, unavailable_reason
from graphfuse.runtime.nvptx import CHIP_MIN_PTX, PTX_ISAS, NvptxTarget, NvptxTargetError
from graphfuse.testing import workloads
from graphfuse.testing.compare import compile_and_compare
from graphfuse.testing.random_graphs import random_graph
from graphfuse.toolchain import find_tool
from tests.conftest import parse
from tests.lowering.test_compile_cases import CASES

ROOT = Path(__file__).resolve().parents[3]

PTXAS = find_tool("ptxas")


NO_GPU = unavailable_reason()
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"no GPU to run on: {NO_GPU}")


def _kernels(ptx_listing: str) -> dict[str, str]:
    parts = re.split(r"^// kernel @(\S+)\n", ptx_listing, flags=re.M)[1:]
    return dict(zip(parts[::2], parts[1::2], strict=True))


def _check_ptx(text: str, where: str, name: str, tmp_path: Path) -> None:
    module = parse_text(text, where)
    # Fused as for the GPU (grouped convolutions are split for the CPU build only).
    fused_for_gpu = module.clone()
    fuse(fused_for_gpu, CompileOptions(), cpu=False)
    loop_kernels = lower_to(fused_for_gpu, Stage.LOOP).count("loop.kernel @")
    kernels = _kernels(lower_to(module, Stage.PTX, CompileOptions()))
    assert len(kernels) == loop_kernels
    for kernel, ptx in kernels.items():
        assert ".version 8.0" in ptx and ".target sm_90" in ptx
        assert f".entry {kernel}(" in ptx
        if PTXAS is None:
            continue
        path = tmp_path / f"{kernel}.ptx"
        path.write_text(ptx)
        run = subprocess.run(
            [PTXAS.path, "-arch=sm_90", str(path), "-o", str(tmp_path / "k.cubin")],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, f"ptxas refused @{kernel} of {name}: {run.stderr}"
    if PTXAS is None:
        pytest.skip("ptxas not found (install the CUDA toolkit): PTX built, not assembled")


@pytest.mark.parametrize(("where", "text", "name"), CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_lit_case_builds_ptx_that_ptxas_accepts(
    where: str, text: str, name: str, tmp_path: Path
) -> None:
    _check_ptx(text, where, name, tmp_path)


@pytest.mark.parametrize("workload", list(workloads.WORKLOADS))
def test_benchmark_workload_builds_ptx_that_ptxas_accepts(workload: str, tmp_path: Path) -> None:
    make, _ = workloads.WORKLOADS[workload]
    _check_ptx(make(), workload, workload, tmp_path)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(ops=st.integers(1, 24), seed=st.integers(0, 2**31 - 1))
def test_random_graph_builds_ptx_that_ptxas_accepts(ops: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _check_ptx(random_graph(ops, seed), "random", f"random graph {seed}", Path(folder))


def test_row_kernels_use_shuffles_and_shared_memory() -> None:
    softmax = workloads.softmax(64, 1000)
    (ptx,) = _kernels(lower_to(parse_text(softmax, "softmax"), Stage.PTX)).values()
    assert "shfl.sync.bfly" in ptx
    assert ".shared" in ptx
    assert "bar.sync" in ptx


def test_chip_and_ptx_isa_options_reach_the_ptx() -> None:
    text = workloads.elementwise_chain(8, 8)
    options = CompileOptions(chip="sm_80", ptx_isa="8.3")
    (ptx,) = _kernels(lower_to(parse_text(text, "chain"), Stage.PTX, options)).values()
    assert ".version 8.3" in ptx and ".target sm_80" in ptx


@pytest.mark.parametrize(
    ("chip", "isa", "message"),
    [
        ("sm_99", "8.0", "unknown GPU chip 'sm_99'; valid chips: sm_70, "),
        ("sm_90", "7.5", "unsupported PTX ISA version '7.5'; valid versions: 8.0, "),
        ("sm_90", "ptx80", "unsupported PTX ISA version 'ptx80'"),
        ("sm_120", "8.0", "sm_120 needs PTX ISA 8.7 or newer, got 8.0; valid versions for"),
    ],
)
def test_bad_chip_or_ptx_isa_lists_the_valid_ones(chip: str, isa: str, message: str) -> None:
    with pytest.raises(NvptxTargetError, match=re.escape(message)):
        NvptxTarget(chip, isa).check()
    with pytest.raises(NvptxTargetError, match=re.escape(message)):
        lower_to(
            parse_text(workloads.softmax(4, 8), "s"),
            Stage.GPU,
            CompileOptions(chip=chip, ptx_isa=isa),
        )


def test_every_listed_chip_has_a_listed_ptx_isa() -> None:
    for chip in CHIP_MIN_PTX:
        NvptxTarget(chip, PTX_ISAS[-1]).check()


@pytest.mark.skipif(NO_GPU is None, reason="a GPU is present")
def test_cuda_target_without_a_gpu_says_so() -> None:
    with pytest.raises(CudaError, match="target 'cuda'"):
        graphfuse.compile(parse_text(workloads.softmax(4, 8), "s"), target="cuda")


@needs_gpu
@pytest.mark.parametrize(("where", "text", "name"), CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_case_on_the_gpu_matches_reference(where: str, text: str, name: str) -> None:
    compile_and_compare(parse_text(text, where), name, seed=1, target="cuda")


@needs_gpu
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(ops=st.integers(1, 24), seed=st.integers(0, 2**31 - 1), fuse=st.booleans())
def test_random_graph_on_the_gpu_matches_reference(ops: int, seed: int, fuse: bool) -> None:
    module = parse(random_graph(ops, seed))
    compile_and_compare(module, seed=seed % 1000, options=CompileOptions(fuse=fuse), target="cuda")


@needs_gpu
@pytest.mark.parametrize("workload", ["softmax [4096x1024]", "layernorm [4096x1024]"])
def test_workload_on_the_gpu_matches_reference(workload: str) -> None:
    make, _ = workloads.WORKLOADS[workload]
    compile_and_compare(parse_text(make(512, 1000), workload), target="cuda")
