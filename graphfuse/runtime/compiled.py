"""A compiled graph function called like a Python function on NumPy arrays.

The library's entry point takes inputs, then one buffer per result, then scratch buffers
(see convert-graph-to-loop). A library written out exports only its C interface (c_api/):
it is called through `<entry>_run_packed` with one array of data pointers and a context
that owns the scratch buffers. A library built for this process is called through the
packed entry (packed_entry.py: one array of descriptor pointers, as a model may take more
than the 1024 arguments ctypes passes; a library built from upstream text has only MLIR's
C interface), with scratch buffers kept here. `CompiledFunction` checks each argument's
shape and dtype, allocates the results, keeps the scratch between calls (so a call
allocates only its results), and returns the results as NumPy arrays. A library built for
this process only reserves space for its large constants, which are copied in when it is
loaded (a library written out links them in: graphfuse.runtime.build).
"""

from __future__ import annotations

import ctypes
import math
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard, cast

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute
from xdsl.utils.exceptions import DiagnosticException

from graphfuse.runtime import memref_abi
from graphfuse.runtime.c_api.describe import SCRATCH_ALIGNMENT, CEntry
from graphfuse.runtime.c_api.link import read_interface
from graphfuse.runtime.memref_abi import Array
from graphfuse.runtime.packed_entry import packed_name

CTYPES_MAX_ARGUMENTS = 1024
"""The most arguments ctypes passes in one call (CPython's CTYPES_MAX_ARGCOUNT)."""


class ArgumentError(DiagnosticException, ValueError):
    """Arguments that do not match the compiled function's signature."""


def _describe(typ: MemRefType[Attribute]) -> str:
    shape = "x".join(str(d) for d in typ.get_shape())
    return f"{shape}x{typ.get_element_type()}" if shape else str(typ.get_element_type())


def _writable_c_array(value: object) -> TypeGuard[Array]:
    """Whether results can be written into `value` in place."""
    return isinstance(value, np.ndarray) and value.flags.c_contiguous and value.flags.writeable


class ArrayFunction:
    """A compiled function's signature: checks the arrays a call passes and makes (or
    checks) the arrays its results go to. CompiledFunction (CPU) and CudaFunction share it."""

    def __init__(
        self,
        name: str,
        inputs: Sequence[MemRefType[Attribute]],
        outputs: Sequence[MemRefType[Attribute]],
    ):
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        # What a call checks, worked out once: a call costs microseconds, and reading
        # shapes and element types off the memref types took most of them.
        self._plain_inputs = [_plain_spec(t) for t in self.inputs]
        self._output_specs = [
            (tuple(t.get_shape()), memref_abi.storage_dtype(t.get_element_type()))
            for t in self.outputs
        ]
        self._plain_outputs = all(_plain_spec(t) is not None for t in self.outputs)

    def _signature(self) -> str:
        ins = ", ".join(_describe(t) for t in self.inputs)
        outs = ", ".join(_describe(t) for t in self.outputs)
        return f"@{self.name}({ins}) -> ({outs})"

    def _check(self, arrays: Sequence[Any]) -> list[Array]:
        """The arrays to pass: those given when each is a C-contiguous array of the
        argument's shape and dtype (the common case, checked first), else converted or
        refused with the reason."""
        if len(arrays) == len(self._plain_inputs):
            given: list[Array] = []
            for array, spec in zip(arrays, self._plain_inputs, strict=True):
                if not (
                    spec is not None
                    and type(array) is np.ndarray
                    and array.shape == spec[0]
                    and array.dtype == spec[1]
                    and array.flags.c_contiguous
                ):
                    break
                given.append(cast(Array, array))
            else:
                return given
        return self._check_each(arrays)

    def _check_each(self, arrays: Sequence[Any]) -> list[Array]:
        if len(arrays) != len(self.inputs):
            raise ArgumentError(f"@{self.name} takes {len(self.inputs)} arrays, got {len(arrays)}")
        converted: list[Array] = []
        for index, (array, typ) in enumerate(zip(arrays, self.inputs, strict=True)):
            value = np.asarray(array)
            element = typ.get_element_type()
            expected = memref_abi.user_dtype(element)
            if tuple(value.shape) != tuple(typ.get_shape()):
                raise ArgumentError(
                    f"@{self.name} argument #{index} has shape {value.shape}, expected "
                    f"{tuple(typ.get_shape())} ({_describe(typ)})"
                )
            if value.dtype != expected:
                raise ArgumentError(
                    f"@{self.name} argument #{index} has dtype {value.dtype}, expected "
                    f"{expected} ({_describe(typ)})"
                )
            converted.append(memref_abi.to_buffer_array(value, element))
        return converted

    def _outputs(self, out: Any) -> list[Array]:
        if out is None:
            return [np.empty(shape, dtype) for shape, dtype in self._output_specs]
        given: list[Any] = (
            list(cast(Sequence[Any], out)) if isinstance(out, tuple | list) else [out]
        )
        if len(given) != len(self.outputs):
            raise ArgumentError(
                f"@{self.name} has {len(self.outputs)} results, out= gives {len(given)}"
            )
        for index, (array, typ) in enumerate(zip(given, self.outputs, strict=True)):
            dtype = memref_abi.storage_dtype(typ.get_element_type())
            if memref_abi.user_dtype(typ.get_element_type()) != dtype:
                raise ArgumentError(f"@{self.name} result #{index} is bf16: out= is not supported")
            ok = _writable_c_array(array)
            if not ok or array.dtype != dtype or tuple(array.shape) != tuple(typ.get_shape()):
                raise ArgumentError(
                    f"@{self.name} out #{index} must be a writable C-contiguous {dtype} array "
                    f"of shape {tuple(typ.get_shape())}"
                )
        return given

    def _results(self, outputs: Sequence[Array]) -> Array | tuple[Array, ...]:
        if self._plain_outputs:
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        results = tuple(
            memref_abi.from_buffer_array(o, t.get_element_type())
            for o, t in zip(outputs, self.outputs, strict=True)
        )
        return results[0] if len(results) == 1 else results


def _plain_spec(typ: MemRefType[Attribute]) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """(shape, dtype) of an argument passed as the array itself (its element stored as
    NumPy holds it), None for one that is converted (bf16)."""
    element = typ.get_element_type()
    dtype = np.dtype(memref_abi.storage_dtype(element))
    if np.dtype(memref_abi.user_dtype(element)) != dtype:
        return None
    return tuple(typ.get_shape()), dtype


_LOADED: dict[Path, tuple[int, int]] = {}
"""Each library path this process loaded, with the (device, inode) it had then."""
_ALIASES: list[tempfile.TemporaryDirectory[str]] = []


def load_library(path: Path) -> ctypes.CDLL:
    """dlopen `path`, absolute (ctypes given a bare name searches the library path, not
    the current folder). The dynamic loader hands back the library it already loaded under
    the same path, even after the file was replaced: a model compiled again to the same
    `-o` in one process (a notebook) would run its old code. A replaced file is loaded
    through a new name instead (a link in a private folder, beside links to whatever
    else sits in the library's folder, which its $ORIGIN rpath finds there)."""
    path = path.absolute()
    info = path.stat()
    identity = (info.st_dev, info.st_ino)
    seen = _LOADED.setdefault(path, identity)
    if seen == identity:
        return ctypes.CDLL(str(path))
    folder = tempfile.TemporaryDirectory(prefix="graphfuse-reload-")
    _ALIASES.append(folder)  # removed at exit; the library stays mapped until then
    for neighbour in path.parent.glob("*.so"):
        if neighbour != path:
            (Path(folder.name) / neighbour.name).symlink_to(neighbour)
    alias = Path(folder.name) / path.name
    alias.symlink_to(path)
    _LOADED[path] = identity
    return ctypes.CDLL(str(alias))


class CompiledFunction(ArrayFunction):
    """Calls `name` in a built library: `f(*arrays) -> array or tuple of arrays`."""

    def __init__(
        self,
        library: Path,
        name: str,
        inputs: Sequence[MemRefType[Attribute]],
        outputs: Sequence[MemRefType[Attribute]],
        scratch: Sequence[MemRefType[Attribute]],
        kernel_count: int = 0,
        detached: dict[str, bytes] | None = None,
        scratch_offsets: Sequence[int] | None = None,
    ):
        super().__init__(name, inputs, outputs)
        self.library_path = library
        self.scratch = list(scratch)
        """The scratch buffers the entry takes after its results."""
        self.scratch_offsets = list(scratch_offsets) if scratch_offsets is not None else None
        """Their byte offsets in one block (loop-plan-scratch: buffers never in use at
        once share bytes), or None: one after another."""
        self.kernel_count = kernel_count
        """How many kernels the function calls."""
        self._library = load_library(Path(library))
        interface = read_interface(Path(library))
        entry = interface.entry(name) if interface is not None else None
        passed = len(self.inputs) + len(self.outputs)
        self._call: _CInterfaceCall | _DescriptorCall
        if entry is not None:
            self._call = _CInterfaceCall(self._library, entry, Path(library))
        else:
            for symbol, data in (detached or {}).items():
                # Large constants the library only reserves space for (kernel_split.py).
                address = ctypes.addressof(ctypes.c_char.in_dll(self._library, symbol))
                ctypes.memmove(address, data, len(data))
            self._call = _DescriptorCall(
                self._library, name, Path(library), scratch, passed, self.scratch_offsets
            )

    def __repr__(self) -> str:
        return f"<compiled {self._signature()} from {self.library_path}>"

    def described(self) -> str:
        """`@entry(inputs) -> (outputs)`, as the repr shows it (the model cache keeps it
        for the command line, which prints it without loading xDSL)."""
        return self._signature()

    def __call__(self, *arrays: Any, out: Any = None) -> Array | tuple[Array, ...]:
        """Run on `arrays`; results go to new arrays, or into `out` (an array or a tuple,
        one per result) when given, which saves allocating (and first touching) them."""
        inputs = self._check(arrays)
        outputs = self._outputs(out)
        if out is not None and _overlapping(inputs, outputs):
            # The kernels take their buffers not to overlap (scf-outline-tasks): results
            # that would overwrite an input on the way go through new arrays.
            fresh = self._outputs(None)
            self._call([*inputs, *fresh])
            for given, result in zip(outputs, fresh, strict=True):
                np.copyto(given, result)
        else:
            self._call([*inputs, *outputs])
        return self._results(outputs)


def _overlapping(inputs: Sequence[Array], outputs: Sequence[Array]) -> bool:
    """Whether an output array may share memory with an input or another output."""
    return any(
        np.may_share_memory(output, other)
        for n, output in enumerate(outputs)
        for other in [*inputs, *outputs[n + 1 :]]
    )


class _CInterfaceCall:
    """An entry called through a library's C interface. A context (the library's scratch
    for this function) serves one call at a time: calls at once from several threads take
    one each from a pool, made when none is free and kept for the next calls."""

    def __init__(self, library: ctypes.CDLL, entry: CEntry, path: Path):
        self._create = getattr(library, f"{entry.symbol}_create")
        self._create.restype, self._create.argtypes = ctypes.c_void_p, []
        self._destroy = getattr(library, f"{entry.symbol}_destroy")
        self._destroy.restype, self._destroy.argtypes = None, [ctypes.c_void_p]
        self._run = getattr(library, f"{entry.symbol}_run_packed")
        self._run.restype, self._run.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
        self._entry, self._path = entry, path
        self._pointers = ctypes.c_void_p * (len(entry.inputs) + len(entry.outputs))
        self._free: list[int] = [self._context()]

    def _context(self) -> int:
        context: int | None = self._create()
        if not context:
            _, size = self._entry.scratch_offsets()
            raise MemoryError(
                f"{self._path}: no memory for @{self._entry.function}'s scratch ({size} bytes)"
            )
        weakref.finalize(self, self._destroy, context)
        return context

    def __call__(self, buffers: Sequence[Array]) -> None:
        # list.pop and append are atomic: each call at once gets a context of its own.
        try:
            context = self._free.pop()
        except IndexError:
            context = self._context()
        try:
            status = self._run(context, self._pointers(*(b.ctypes.data for b in buffers)))
        finally:
            self._free.append(context)
        if status != 0:
            raise MemoryError(f"{self._path}: @{self._entry.function} returned status {status}")


class _Arguments:
    """One call's worth of what a packed (or plain) entry takes: descriptors of the
    passed buffers (re-pointed per call: every call passes C-contiguous arrays of the
    signature's shapes) and scratch buffers with their descriptors, kept for later calls."""

    def __init__(self, call: _DescriptorCall, buffers: Sequence[Array]):
        # Zeroed (calloc: pages are only touched when used): loop-tile-matmul's "constant
        # operand packed" flags must start at 0 (loop-plan-scratch shares no bytes of them).
        self.scratch = scratch_arrays(call.scratch, call.offsets)
        self.descriptors: list[Any] = [memref_abi.descriptor(b) for b in (*buffers, *self.scratch)]
        self.passed = self.descriptors[: len(buffers)]
        self.packed = (ctypes.c_void_p * len(self.descriptors))(
            *(ctypes.addressof(d) for d in self.descriptors)
        )
        self.plain = [ctypes.byref(d) for d in self.descriptors]


class _DescriptorCall:
    """An entry called with memref descriptors (a library built for this process), its
    scratch buffers allocated here: one set per call running at once (a pool, as
    `_CInterfaceCall`'s contexts), built on first use and kept (a model has hundreds of
    scratch buffers: docs/decisions.md)."""

    def __init__(
        self,
        library: ctypes.CDLL,
        name: str,
        path: Path,
        scratch: Sequence[MemRefType[Attribute]],
        passed: int,
        offsets: Sequence[int] | None = None,
    ):
        self._packed = _symbol(library, packed_name(name))
        self.offsets = offsets
        self._function = _symbol(library, f"_mlir_ciface_{name}")
        assert self._function is not None, f"{path} has no @{name}"
        self.scratch = list(scratch)
        self._free: list[_Arguments] = []
        if self._packed is None and passed + len(scratch) > CTYPES_MAX_ARGUMENTS:
            raise ArgumentError(
                f"@{name} takes {passed + len(scratch)} buffers, more than ctypes passes "
                f"({CTYPES_MAX_ARGUMENTS}), and {path} has no {packed_name(name)}"
            )

    def __call__(self, buffers: Sequence[Array]) -> None:
        try:
            arguments = self._free.pop()  # atomic: each call at once gets its own
        except IndexError:
            arguments = _Arguments(self, buffers)
        try:
            for descriptor, buffer in zip(arguments.passed, buffers, strict=True):
                pointer = buffer.ctypes.data
                descriptor.allocated = pointer
                descriptor.aligned = pointer
            if self._packed is not None:
                self._packed(arguments.packed)
            else:
                self._function(*arguments.plain)
        finally:
            self._free.append(arguments)


def scratch_arrays(
    types: Sequence[MemRefType[Attribute]], offsets: Sequence[int] | None
) -> list[Array]:
    """Zeroed arrays for scratch buffers of `types`: views at `offsets` into one block
    (cache-line aligned) when the entry planned them, else one array each."""
    dtypes = [memref_abi.storage_dtype(t.get_element_type()) for t in types]
    if offsets is None:
        return [np.zeros(t.get_shape(), d) for t, d in zip(types, dtypes, strict=True)]
    assert len(offsets) == len(types), "one scratch offset per scratch buffer"
    sizes = [math.prod(t.get_shape()) * d.itemsize for t, d in zip(types, dtypes, strict=True)]
    size = max((o + n for o, n in zip(offsets, sizes, strict=True)), default=0)
    block = np.zeros(size + SCRATCH_ALIGNMENT, np.uint8)
    start = -block.ctypes.data % SCRATCH_ALIGNMENT
    return [
        block[start + o : start + o + n].view(d).reshape(t.get_shape())
        for t, d, o, n in zip(types, dtypes, offsets, sizes, strict=True)
    ]


def _symbol(library: ctypes.CDLL, name: str) -> Any:
    """The function `name` of `library` returning void, or None when it has none."""
    try:
        function = getattr(library, name)
    except AttributeError:
        return None
    function.restype = None
    return function
