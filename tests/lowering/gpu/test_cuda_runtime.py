"""CudaFunction end to end without a GPU: a fake CUDA driver keeps device memory in NumPy
arrays and runs each launch as the CPU emulation of its kernel (gpu_on_cpu), so the host
plan, buffer sizes, constant uploads, device copies, the order of launches, argument
checks and result downloads are all checked against the reference interpreter. The fake
also checks that each launch passes as many pointers as the kernel's PTX entry declares
parameters."""

from __future__ import annotations

import ctypes
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

from graphfuse.compiler import CompileOptions, _entry, fuse, load, to_gpu
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text
from graphfuse.runtime import memref_abi
from graphfuse.runtime.build import CpuTarget, build_shared_library
from graphfuse.runtime.compiled import ArgumentError
from graphfuse.runtime.cuda_function import CudaFunction, HostPlan
from graphfuse.runtime.nvptx import build_ptx
from graphfuse.testing.compare import assert_matches
from graphfuse.testing.gpu_on_cpu import emulate_on_cpu

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class FakeDriver:
    """The Driver interface over host memory; launches run emulated kernels."""

    library: ctypes.CDLL
    emulated: dict[tuple[str, str], str]
    signatures: dict[str, list[MemRefType[Attribute]]]
    memory: dict[int, np.ndarray] = field(default_factory=dict[int, np.ndarray])
    params: dict[tuple[str, str], int] = field(default_factory=dict[tuple[str, str], int])
    launches: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])

    def load_module(self, ptx: str, label: str) -> str:
        for name, params in re.findall(r"\.entry (\S+)\(\n(.*?)\n\)", ptx, flags=re.S):
            self.params[(label, name)] = params.count(".param .u64")
        return label

    def function(self, module: str, name: str) -> tuple[str, str]:
        assert (module, name) in self.params, f"no .entry {name} in the PTX of @{module}"
        return (module, name)

    def alloc(self, size: int) -> int:
        pointer = 4096 * (len(self.memory) + 1)
        self.memory[pointer] = np.zeros(max(size, 1), np.uint8)
        return pointer

    def free(self, pointer: int) -> None:
        del self.memory[pointer]

    def to_device(self, pointer: int, host: np.ndarray) -> None:
        data = np.frombuffer(np.ascontiguousarray(host).tobytes(), np.uint8)
        assert data.size <= self.memory[pointer].size, "upload larger than its buffer"
        self.memory[pointer][: data.size] = data

    def to_host(self, host: np.ndarray, pointer: int) -> None:
        host.view(np.uint8).reshape(-1)[:] = self.memory[pointer][: host.nbytes]

    def copy(self, destination: int, source: int, size: int) -> None:
        self.memory[destination][:size] = self.memory[source][:size]

    def launch(self, function: tuple[str, str], grid: int, block: int, pointers: list[int]) -> None:
        assert len(pointers) == self.params[function], "pointer count differs from the PTX"
        name = self.emulated[function]
        arrays = []
        for pointer, typ in zip(pointers, self.signatures[name], strict=True):
            dtype = memref_abi.storage_dtype(typ.get_element_type())
            count = int(np.prod(typ.get_shape()))
            view = self.memory[pointer][: count * dtype.itemsize].view(dtype)
            arrays.append(view.reshape(typ.get_shape()))
        descriptors = [memref_abi.descriptor(a) for a in arrays]
        getattr(self.library, f"_mlir_ciface_{name}")(*(ctypes.byref(d) for d in descriptors))
        self.launches.append(function)

    def synchronize(self) -> None:
        pass

    def make_current(self) -> None:
        pass

    def event(self) -> list[float]:
        return [0.0]

    def record(self, event: list[float]) -> None:
        event[0] = time.perf_counter()

    def elapsed_ms(self, start: list[float], end: list[float]) -> float:
        return (end[0] - start[0]) * 1e3

    def destroy_event(self, event: list[float]) -> None:
        event.clear()

    def unload_module(self, module: str) -> None:
        pass


def _memrefs(types: Any) -> list[MemRefType[Attribute]]:
    result: list[MemRefType[Attribute]] = []
    for typ in types:
        assert isa(typ, MemRefType[Attribute])
        result.append(typ)
    return result


def _fake_build(text: str, entry: str = "main") -> tuple[CudaFunction, FakeDriver, ModuleOp]:
    module = load(parse_text(text, "case"))
    options = CompileOptions()
    fuse(module, options)
    stages = to_gpu(module, options, entry)
    assert stages is not None
    kernels = build_ptx(str(module), options.nvptx)
    plan = HostPlan(module, _entry(module, entry))
    emulation = module.clone()
    names = emulate_on_cpu(emulation, c_interface=True)
    signatures = {
        op.sym_name.data: _memrefs(op.function_type.inputs.data)
        for op in emulation.ops
        if isinstance(op, func.FuncOp)
    }
    library = ctypes.CDLL(str(build_shared_library(str(emulation), CpuTarget(threads=1))))
    driver = FakeDriver(library, names, signatures)
    compiled = CudaFunction(driver, entry, kernels, plan, stages.inputs, stages.outputs)  # type: ignore[arg-type]
    return compiled, driver, module


CASES = {
    "transformer": (ROOT / "examples" / "transformer_block.mlir").read_text(),
    "constants and a returned input": """
func.func @main(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<2xf32>) {
  %c = graph.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0]]> : tensor<1x5xf32>
  %k = graph.constant dense<[7.0, 8.0]> : tensor<2xf32>
  %y = graph.mul %x, %c : (tensor<4x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %s = graph.softmax %y axis = -1 : tensor<4x5xf32>
  func.return %s, %x, %k : tensor<4x5xf32>, tensor<4x5xf32>, tensor<2xf32>
}
""",
    "booleans": """
func.func @main(%x: tensor<6x33xf32>, %y: tensor<6x33xf32>) -> (tensor<6x33xi1>, tensor<6x33xf32>) {
  %m = graph.compare gt, %x, %y : (tensor<6x33xf32>, tensor<6x33xf32>) -> tensor<6x33xi1>
  %w = graph.select %m, %x, %y : (tensor<6x33xi1>, tensor<6x33xf32>, tensor<6x33xf32>) -> tensor<6x33xf32>
  func.return %m, %w : tensor<6x33xi1>, tensor<6x33xf32>
}
""",
}


@pytest.mark.parametrize("case", list(CASES))
def test_cuda_function_on_a_fake_driver_matches_reference(case: str) -> None:
    """The f32 reference's own rounding sizes the slack, as in compile_and_compare: its
    matmuls go through NumPy's BLAS, whose kernels (and so roundings) follow the host's
    CPU; on an AVX-512 one the transformer's reference was further from the float64 run
    than the emulated kernels were."""
    compiled, driver, _ = _fake_build(CASES[case])
    module = parse_text(CASES[case], case)
    function = reference.find_function(module, "main")
    for seed in (0, 1):  # a second call reuses the device buffers
        arrays = reference.random_inputs(function, seed)
        expected = reference.run(module, "main", *arrays)
        exact = reference.run(module, "main", *arrays, f32_as_f64=True)
        got = compiled(*arrays)
        assert_matches(got if isinstance(got, tuple) else (got,), expected, exact=exact)
    assert driver.launches and len(driver.launches) == 2 * len(compiled.plan.launches)


def test_cuda_function_checks_arguments() -> None:
    compiled, _, _ = _fake_build(CASES["booleans"])
    with pytest.raises(ArgumentError, match=r"argument #1 has shape \(6, 32\)"):
        compiled(np.zeros((6, 33), np.float32), np.zeros((6, 32), np.float32))
    assert "for the GPU" in repr(compiled)


def test_timing_covers_every_step_and_counts_touched_bytes() -> None:
    compiled, driver, _ = _fake_build(CASES["constants and a returned input"])
    module = parse_text(CASES["constants and a returned input"], "case")
    compiled.upload(*reference.random_inputs(reference.find_function(module, "main"), 0))
    assert compiled.time_ms(3) > 0
    steps = compiled.kernel_times_ms(2)
    assert [step for step, _ in steps] == compiled.plan.steps
    softmax = next(s for s in compiled.plan.launches if "softmax" in s.module or "exp" in s.module)
    # The softmax kernel reads x (4x5 f32), writes its result (160 bytes) and reads the
    # 1x5 constant (20 bytes per copy the kernel lowering made of it).
    constants = [b for b in softmax.touched if isinstance(b, str)]
    assert constants and compiled.step_bytes(softmax) == 160 + 20 * len(constants)
