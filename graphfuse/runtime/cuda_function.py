"""A graph function compiled for an NVIDIA GPU, called on NumPy arrays.

The GPU build's host function (convert-loop-to-gpu) is a straight line of
`gpu.launch_func`s, `memref.copy`s and `memref.get_global`s over the function's buffers.
`HostPlan` reads it once into steps; `CudaFunction` loads each kernel's PTX (the driver
compiles it for the GPU), allocates every buffer on the device once (inputs, results,
scratch; constants uploaded once), and per call copies the inputs in, replays the steps and
copies the results out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, SSAValue
from xdsl.transforms.canonicalization_patterns.utils import const_evaluate_operand
from xdsl.utils.hints import isa

from graphfuse.runtime import memref_abi
from graphfuse.runtime.compiled import ArrayFunction
from graphfuse.runtime.cuda_driver import Driver
from graphfuse.runtime.memref_abi import Array

Buffer = int | str
"""A host-function argument by position, or a global by name."""


@dataclass(frozen=True)
class LaunchStep:
    module: str
    function: str
    grid: int
    block: int
    buffers: tuple[Buffer, ...]
    touched: tuple[Buffer, ...]
    """The buffers the kernel loads from or stores to (it is passed all of its kernel's)."""


@dataclass(frozen=True)
class CopyStep:
    source: Buffer
    destination: Buffer


def _memref(value: SSAValue) -> MemRefType[Attribute]:
    assert isa(value.type, MemRefType[Attribute])
    return value.type


def nbytes(typ: MemRefType[Attribute]) -> int:
    """Bytes of a buffer of `typ` as the kernels store it."""
    dtype = memref_abi.storage_dtype(typ.get_element_type())
    return math.prod(typ.get_shape()) * dtype.itemsize


def _global_array(op: memref.GlobalOp) -> Array:
    typ = op.type
    assert isa(typ, MemRefType[Attribute])
    value = op.initial_value
    assert isinstance(value, DenseIntOrFPElementsAttr), f"global @{op.sym_name.data} has no data"
    dtype = memref_abi.storage_dtype(typ.get_element_type())
    flat = np.frombuffer(value.data.data, dtype=dtype)
    count = math.prod(typ.get_shape())
    if flat.size == 1 and count != 1:
        flat = np.full(count, flat[0], dtype)
    return np.ascontiguousarray(flat.reshape(typ.get_shape()))


class HostPlan:
    """The steps of a GPU build's host function, and the globals they use."""

    def __init__(self, module: ModuleOp, function: func.FuncOp):
        self.steps: list[LaunchStep | CopyStep] = []
        self.types: dict[Buffer, MemRefType[Attribute]] = {}
        names: dict[SSAValue, Buffer] = {}
        for position, arg in enumerate(function.body.block.args):
            names[arg] = position
            self.types[position] = _memref(arg)
        for op in function.body.block.ops:
            if isinstance(op, arith.ConstantOp):
                continue  # launch sizes, read where they are used
            if isinstance(op, memref.GetGlobalOp):
                names[op.memref] = op.name_.string_value()
                self.types[op.name_.string_value()] = _memref(op.memref)
            elif isinstance(op, gpu.LaunchFuncOp):
                self.steps.append(self._launch(module, op, names))
            elif isinstance(op, memref.CopyOp):
                self.steps.append(CopyStep(names[op.source], names[op.destination]))
            else:
                assert isinstance(op, func.ReturnOp), f"unexpected {op.name} in a GPU host function"
        used = {b for b in self.types if isinstance(b, str)}
        self.globals = {
            op.sym_name.data: _global_array(op)
            for op in module.ops
            if isinstance(op, memref.GlobalOp) and op.sym_name.data in used
        }

    @staticmethod
    def _launch(
        module: ModuleOp,
        op: gpu.LaunchFuncOp,
        names: dict[SSAValue, Buffer],
    ) -> LaunchStep:
        kernel = op.kernel
        module_name = kernel.root_reference.data
        function_name = kernel.nested_references.data[0].data
        buffers = tuple(names[v] for v in op.kernelOperands)
        function = next(
            f
            for m in module.ops
            if isinstance(m, gpu.ModuleOp) and m.sym_name.data == module_name
            for f in m.body.block.ops
            if isinstance(f, gpu.FuncOp) and f.sym_name.data == function_name
        )
        args = function.body.block.args
        touched = tuple(b for b, arg in zip(buffers, args, strict=True) if arg.uses)
        grid, block = (const_evaluate_operand(v) for v in (op.gridSizeX, op.blockSizeX))
        assert grid is not None and block is not None, "GPU launch sizes are constants"
        return LaunchStep(module_name, function_name, grid, block, buffers, touched)

    @property
    def launches(self) -> list[LaunchStep]:
        return [s for s in self.steps if isinstance(s, LaunchStep)]


class CudaFunction(ArrayFunction):
    """Calls a GPU build: `f(*arrays) -> array or tuple of arrays` (NumPy in and out).
    `driver` is a `Driver` (the tests pass a stand-in that runs kernels on the CPU)."""

    def __init__(
        self,
        driver: Driver,
        name: str,
        kernels: dict[str, str],
        plan: HostPlan,
        inputs: Sequence[MemRefType[Attribute]],
        outputs: Sequence[MemRefType[Attribute]],
    ):
        super().__init__(name, inputs, outputs)
        self.driver = driver
        self.plan = plan
        self.ptx = kernels
        self.kernel_count = len({step.module for step in plan.launches})
        """How many kernels the function calls (each may be several launches)."""
        modules = {name: driver.load_module(ptx, name) for name, ptx in kernels.items()}
        self._functions = {
            (s.module, s.function): driver.function(modules[s.module], s.function)
            for s in plan.launches
        }
        self._modules = modules
        self._pointers: dict[Buffer, int] = {}
        for buffer, typ in plan.types.items():
            self._pointers[buffer] = driver.alloc(nbytes(typ))
        for global_name, array in plan.globals.items():
            driver.to_device(self._pointers[global_name], array)
        self._n_inputs = len(inputs)
        self._runs = [self._resolve(step) for step in plan.steps]

    def __repr__(self) -> str:
        return f"<compiled {self._signature()} for the GPU, {self.kernel_count} kernels>"

    def __del__(self) -> None:
        pointers: dict[Buffer, int] = getattr(self, "_pointers", {})
        modules: dict[str, Any] = getattr(self, "_modules", {})
        try:
            for pointer in pointers.values():
                self.driver.free(pointer)
            for module in modules.values():
                self.driver.unload_module(module)
        except Exception:  # noqa: BLE001 - releasing at interpreter exit may fail
            return

    def _resolve(self, step: LaunchStep | CopyStep) -> Callable[[], None]:
        """The driver call that runs `step` (handles and pointers looked up once)."""
        driver = self.driver
        if isinstance(step, LaunchStep):
            pointers = [self._pointers[b] for b in step.buffers]
            function = self._functions[(step.module, step.function)]
            return lambda: driver.launch(function, step.grid, step.block, pointers)
        size = nbytes(self.plan.types[step.destination])
        destination, source = self._pointers[step.destination], self._pointers[step.source]
        return lambda: driver.copy(destination, source, size)

    def upload(self, *arrays: Any) -> None:
        """Copy the inputs to the device (what a call does first)."""
        for position, array in enumerate(self._check(arrays)):
            self.driver.to_device(self._pointers[position], np.ascontiguousarray(array))

    def run_uploaded(self) -> None:
        """Run every step on the inputs on the device (no copies to or from the host)."""
        for run in self._runs:
            run()

    def __call__(self, *arrays: Any, out: Any = None) -> Array | tuple[Array, ...]:
        """Run on `arrays`; results go to new arrays, or into `out` when given."""
        outputs = self._outputs(out)
        self.driver.make_current()
        self.upload(*arrays)
        self.run_uploaded()
        self.driver.synchronize()
        for index, array in enumerate(outputs):
            self.driver.to_host(array, self._pointers[self._n_inputs + index])
        return self._results(outputs)

    def time_ms(self, repeat: int = 20) -> float:
        """Milliseconds per run of the uploaded inputs (device time between events, best
        of `repeat` runs after one warm-up)."""
        return min(self._timed(self.run_uploaded, repeat))

    def kernel_times_ms(self, repeat: int = 20) -> list[tuple[LaunchStep | CopyStep, float]]:
        """Each step's best device time in milliseconds."""
        return [
            (step, min(self._timed(run, repeat)))
            for step, run in zip(self.plan.steps, self._runs, strict=True)
        ]

    def step_bytes(self, step: LaunchStep | CopyStep) -> int:
        """Bytes a step must move at least: each buffer it touches, once."""
        if isinstance(step, CopyStep):
            return 2 * nbytes(self.plan.types[step.destination])
        return sum(nbytes(self.plan.types[b]) for b in step.touched)

    def _timed(self, run: Callable[[], None], repeat: int) -> Sequence[float]:
        self.driver.make_current()
        run()
        self.driver.synchronize()
        start, end = self.driver.event(), self.driver.event()
        times: list[float] = []
        try:
            for _ in range(repeat):
                self.driver.record(start)
                run()
                self.driver.record(end)
                times.append(self.driver.elapsed_ms(start, end))
        finally:
            self.driver.destroy_event(start)
            self.driver.destroy_event(end)
        return times
