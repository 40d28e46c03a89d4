"""GPU benchmark: every workload of graphfuse/testing/workloads.py built for the NVIDIA GPU the CUDA
driver finds, fused and unfused (every op its own kernel), timed side by side.

For each workload: kernels (and launches) of both builds, device time of one run of each
(CUDA events, best of --repeat runs, inputs already on the device, fused and unfused in
alternating rounds), and for each memory-bound kernel of the fused build (no matmul or
convolution in it) the bandwidth it achieves, as a fraction of the GPU's peak (2 x memory
clock x bus width, from the driver). Also checks each fused result against the reference
interpreter on the same inputs.

    .venv/bin/python bench/bench_gpu.py [--only softmax layernorm] [--repeat 50]

Without a GPU it says why in one line and exits with status 1. `--plan` needs no GPU: it
prints each workload's GPU build (kernels, launches, how many run a block per row, and the
time mlir-opt takes to build the PTX), fused and unfused.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import numpy as np

import graphfuse
from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text
from graphfuse.runtime.cuda_driver import CudaError, driver
from graphfuse.runtime.cuda_function import CudaFunction, LaunchStep
from graphfuse.runtime.nvptx import build_ptx
from graphfuse.testing import workloads

ROUNDS = 4
COMPUTE_KERNELS = ("matmul", "conv")


def _build(text: str, name: str, options: CompileOptions) -> CudaFunction:
    compiled = graphfuse.compile(parse_text(text, name), target="cuda", options=options)
    assert isinstance(compiled, CudaFunction)
    return compiled


def _max_error(got: object, want: tuple[np.ndarray, ...]) -> float:
    results = got if isinstance(got, tuple) else (got,)
    worst = 0.0
    for a, b in zip(results, want, strict=True):
        scale = float(np.max(np.abs(b), initial=0.0)) or 1.0
        worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)) / scale)
    return worst


def bench_workload(name: str, text: str, repeat: int, peak: float, block: int) -> None:
    options = CompileOptions(block_size=block)
    fused = _build(text, name, options)
    unfused = _build(text, name, replace(options, fuse=False))
    module = parse_text(text, name)
    inputs = reference.random_inputs(reference.find_function(module, "main"), 0)
    error = _max_error(fused(*inputs), reference.run(module, "main", *inputs))
    fused_ms = unfused_ms = float("inf")
    for _ in range(ROUNDS):
        fused_ms = min(fused_ms, fused.time_ms(repeat))
        unfused_ms = min(unfused_ms, unfused.time_ms(repeat))
    print(
        f"{name:40s} kernels {unfused.kernel_count:3d} -> {fused.kernel_count:3d}  "
        f"unfused {unfused_ms:9.4f} ms  fused {fused_ms:9.4f} ms  "
        f"{unfused_ms / fused_ms:5.2f}x  (max rel. error {error:.1e})"
    )
    for step, ms in fused.kernel_times_ms(repeat):
        if not isinstance(step, LaunchStep) or any(k in step.module for k in COMPUTE_KERNELS):
            continue
        moved = fused.step_bytes(step)
        rate = moved / (ms * 1e-3)
        share = f"{rate / peak:6.1%} of peak" if peak else "peak unknown"
        print(
            f"    {step.function[:56]:56s} {ms * 1e3:9.1f} us {moved / 1e6:8.2f} MB "
            f"{rate / 1e9:8.1f} GB/s  {share}"
        )


def plan_workload(name: str, text: str, block: int) -> None:
    counts: list[str] = []
    for fuse in (False, True):
        options = CompileOptions(fuse=fuse, block_size=block)
        gpu_text = lower_to(parse_text(text, name), Stage.GPU, options)
        start = time.perf_counter()
        build_ptx(gpu_text, options.nvptx)
        seconds = time.perf_counter() - start
        kernels = gpu_text.count('"gpu.module"')
        launches = gpu_text.count('"gpu.launch_func"')
        functions = gpu_text.split('"gpu.func"')[1:]
        rows = sum(1 for f in functions if '"gpu.all_reduce"' in f.split('"gpu.return"')[0])
        counts.append(
            f"{kernels:3d} kernels {launches:3d} launches {rows:2d} row  PTX {seconds:5.2f}s"
        )
    print(f"{name:40s} unfused {counts[0]}   fused {counts[1]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="workloads whose name starts with these")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per round")
    parser.add_argument("--block-size", type=int, default=CompileOptions.block_size)
    parser.add_argument("--plan", action="store_true", help="the GPU builds only (no GPU needed)")
    args = parser.parse_args()
    if args.plan:
        for name, (make, _) in workloads.WORKLOADS.items():
            if not args.only or any(name.startswith(prefix) for prefix in args.only):
                plan_workload(name, make(), args.block_size)
        return 0
    try:
        info = driver().info()
    except CudaError as error:
        print(f"bench_gpu: {error}", file=sys.stderr)
        return 1
    print(
        f"GPU: {info.name} ({info.chip}, {info.multiprocessors} SMs), peak memory bandwidth "
        f"{info.peak_bandwidth / 1e9:.0f} GB/s; block size {args.block_size}"
    )
    for name, (make, _) in workloads.WORKLOADS.items():
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        bench_workload(name, make(), args.repeat, info.peak_bandwidth, args.block_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
