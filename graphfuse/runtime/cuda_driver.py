"""The few CUDA driver API calls graphfuse's GPU runtime makes, through ctypes on libcuda.

The driver library comes with the NVIDIA driver, not with a Python package, so nothing is
installed for it: on a machine without it (or without a GPU) `Driver()` raises `CudaError`
with one line saying which of the two is missing. Every call's status is checked and a
failure names the call and the driver's own name for the error. The device is device 0,
used through its primary context (the one the CUDA runtime and other libraries share).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.utils.exceptions import DiagnosticException

_DEVICE_ATTRIBUTES = {
    "multiprocessors": 16,
    "memory_clock_khz": 36,
    "memory_bus_bits": 37,
    "major": 75,
    "minor": 76,
}
_JIT_ERROR_LOG_BUFFER = 5
_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
_LOG_BYTES = 8192


class CudaError(DiagnosticException):
    """The CUDA driver is missing, finds no GPU, or a call failed."""


@dataclass(frozen=True)
class DeviceInfo:
    """What the benchmarks and error messages say about the GPU."""

    name: str
    chip: str
    """sm_XY from the compute capability."""
    multiprocessors: int
    peak_bandwidth: float
    """Bytes per second: 2 (double data rate) x memory clock x bus width; 0 if unknown."""


class Driver:
    """libcuda, initialised, with device 0's primary context current."""

    def __init__(self, library: str = "libcuda.so.1"):
        try:
            self._lib: Any = ctypes.CDLL(library)
        except OSError as error:
            raise CudaError(
                f"target 'cuda' needs the NVIDIA driver, and {library} could not be loaded "
                f"({error}); use target 'cpu', or build PTX alone with "
                "`graphfuse compile --target nvptx`"
            ) from None
        self._lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self._check(self._lib.cuInit(0), "cuInit")
        count = ctypes.c_int(0)
        self._check(self._lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value == 0:
            raise CudaError("target 'cuda': the NVIDIA driver is installed but sees no GPU")
        self.device = ctypes.c_int(0)
        self._check(self._lib.cuDeviceGet(ctypes.byref(self.device), 0), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self._check(
            self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.device),
            "cuDevicePrimaryCtxRetain",
        )
        self.make_current()
        self._lib.cuLaunchKernel.argtypes = [
            ctypes.c_void_p,
            *([ctypes.c_uint] * 7),
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        for name in ("cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2"):
            getattr(self._lib, name).argtypes = [
                ctypes.c_uint64 if name != "cuMemcpyDtoH_v2" else ctypes.c_void_p,
                ctypes.c_uint64 if name != "cuMemcpyHtoD_v2" else ctypes.c_void_p,
                ctypes.c_size_t,
            ]
        self._lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self._lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self._elapsed = getattr(self._lib, "cuEventElapsedTime_v2", None) or (
            self._lib.cuEventElapsedTime
        )

    def make_current(self) -> None:
        """Make the context current on the calling thread (CUDA keeps it per thread)."""
        self._check(self._lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def _check(self, status: int, call: str) -> None:
        if status == 0:
            return
        name = ctypes.c_char_p()
        known = self._lib.cuGetErrorName(status, ctypes.byref(name)) == 0 and name.value
        label = name.value.decode() if known and name.value else f"error {status}"
        if call in ("cuInit", "cuDeviceGetCount") and label in (
            "CUDA_ERROR_NO_DEVICE",
            "CUDA_ERROR_STUB_LIBRARY",
        ):
            raise CudaError(f"target 'cuda': no usable NVIDIA GPU ({call}: {label})")
        raise CudaError(f"CUDA driver call {call} failed: {label}")

    def info(self) -> DeviceInfo:
        raw = ctypes.create_string_buffer(256)
        self._check(self._lib.cuDeviceGetName(raw, 256, self.device), "cuDeviceGetName")
        values: dict[str, int] = {}
        for key, attribute in _DEVICE_ATTRIBUTES.items():
            value = ctypes.c_int(0)
            self._check(
                self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, self.device),
                "cuDeviceGetAttribute",
            )
            values[key] = value.value
        peak = 2.0 * values["memory_clock_khz"] * 1e3 * values["memory_bus_bits"] / 8
        return DeviceInfo(
            raw.value.decode(),
            f"sm_{values['major']}{values['minor']}",
            values["multiprocessors"],
            peak,
        )

    def load_module(self, ptx: str, label: str) -> ctypes.c_void_p:
        """JIT-compile and load one PTX module; a failure quotes the JIT's log."""
        module = ctypes.c_void_p()
        log = ctypes.create_string_buffer(_LOG_BYTES)
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.addressof(log), _LOG_BYTES)
        status = self._lib.cuModuleLoadDataEx(
            ctypes.byref(module), ptx.encode() + b"\0", 2, options, values
        )
        if status != 0:
            detail = log.value.decode(errors="replace").strip().splitlines()
            reason = f": {detail[0]}" if detail else ""
            try:
                self._check(status, "cuModuleLoadDataEx")
            except CudaError as error:
                raise CudaError(f"loading the PTX of kernel @{label}: {error}{reason}") from None
        return module

    def unload_module(self, module: ctypes.c_void_p) -> None:
        self._check(self._lib.cuModuleUnload(module), "cuModuleUnload")

    def function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        status = self._lib.cuModuleGetFunction(ctypes.byref(handle), module, name.encode())
        self._check(status, f"cuModuleGetFunction({name})")
        return handle

    def alloc(self, size: int) -> int:
        """A device buffer of `size` bytes (at least 1: the driver refuses 0)."""
        pointer = ctypes.c_uint64(0)
        self._check(self._lib.cuMemAlloc_v2(ctypes.byref(pointer), max(size, 1)), "cuMemAlloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self._check(self._lib.cuMemFree_v2(pointer), "cuMemFree")

    def to_device(self, pointer: int, host: Any) -> None:
        """Copy a C-contiguous NumPy array to the device."""
        self._check(
            self._lib.cuMemcpyHtoD_v2(pointer, host.ctypes.data, host.nbytes), "cuMemcpyHtoD"
        )

    def to_host(self, host: Any, pointer: int) -> None:
        """Copy into a C-contiguous, writable NumPy array from the device."""
        self._check(
            self._lib.cuMemcpyDtoH_v2(host.ctypes.data, pointer, host.nbytes), "cuMemcpyDtoH"
        )

    def copy(self, destination: int, source: int, size: int) -> None:
        self._check(self._lib.cuMemcpyDtoD_v2(destination, source, size), "cuMemcpyDtoD")

    def launch(
        self, function: ctypes.c_void_p, grid: int, block: int, pointers: Sequence[int]
    ) -> None:
        """Launch on a 1-D grid; each kernel parameter is a 64-bit device pointer."""
        assert 0 < grid < 2**31 and 0 < block <= 1024, (grid, block)
        values = [ctypes.c_uint64(p) for p in pointers]
        # kernelParams: one pointer per parameter, to where that parameter's value is.
        params = (ctypes.c_void_p * max(len(values), 1))(*(ctypes.addressof(v) for v in values))
        status = self._lib.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, None, params, None)
        self._check(status, "cuLaunchKernel")

    def synchronize(self) -> None:
        self._check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def event(self) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._check(self._lib.cuEventCreate(ctypes.byref(handle), 0), "cuEventCreate")
        return handle

    def destroy_event(self, event: ctypes.c_void_p) -> None:
        self._check(self._lib.cuEventDestroy_v2(event), "cuEventDestroy")

    def record(self, event: ctypes.c_void_p) -> None:
        self._check(self._lib.cuEventRecord(event, None), "cuEventRecord")

    def elapsed_ms(self, start: ctypes.c_void_p, end: ctypes.c_void_p) -> float:
        self._check(self._lib.cuEventSynchronize(end), "cuEventSynchronize")
        milliseconds = ctypes.c_float(0.0)
        self._check(self._elapsed(ctypes.byref(milliseconds), start, end), "cuEventElapsedTime")
        return milliseconds.value


_driver: Driver | None = None


def unavailable_reason() -> str | None:
    """Why no GPU can be used in this process (the driver's one line), or None: for tests
    and tools that skip GPU work cleanly."""
    try:
        driver()
    except CudaError as error:
        return str(error)
    return None


def driver() -> Driver:
    """The process's driver (loaded and initialised once)."""
    global _driver
    if _driver is None:
        _driver = Driver()
    return _driver
