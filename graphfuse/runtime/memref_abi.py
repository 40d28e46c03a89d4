"""Passing NumPy arrays to functions built with `llvm.emit_c_interface`.

MLIR's C interface takes each memref as a pointer to its descriptor: allocated pointer,
aligned pointer, offset, then `rank` sizes and `rank` strides (in elements), all 64-bit.
bf16 has no NumPy dtype: such buffers are uint16 holding the upper half of a float32,
rounded to nearest even, which `to_buffer_array` and `from_buffer_array` convert.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    Signedness,
)
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

Array = np.ndarray[Any, Any]


def storage_dtype(element: Attribute) -> np.dtype[Any]:
    """The NumPy dtype of a buffer's storage for an MLIR element type."""
    if isinstance(element, Float32Type):
        return np.dtype(np.float32)
    if isinstance(element, Float16Type):
        return np.dtype(np.float16)
    if isinstance(element, Float64Type):
        return np.dtype(np.float64)
    if isinstance(element, BFloat16Type):
        return np.dtype(np.uint16)
    assert isa(element, IntegerType), element
    width = element.width.data
    if width == 1:
        return np.dtype(np.bool_)
    unsigned = element.signedness.data is Signedness.UNSIGNED
    return np.dtype(f"uint{width}" if unsigned else f"int{width}")


def user_dtype(element: Attribute) -> np.dtype[Any]:
    """The dtype callers pass and get back (bf16 travels as float32, as in the reference)."""
    if isinstance(element, BFloat16Type):
        return np.dtype(np.float32)
    return storage_dtype(element)


def to_buffer_array(array: Array, element: Attribute) -> Array:
    """A C-contiguous array in the storage layout of `element`."""
    if isinstance(element, BFloat16Type):
        bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
        rounded = bits + 0x7FFF + ((bits >> 16) & 1)
        return (rounded >> 16).astype(np.uint16)
    return np.ascontiguousarray(array, dtype=storage_dtype(element))


def from_buffer_array(array: Array, element: Attribute) -> Array:
    if isinstance(element, BFloat16Type):
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


@cache
def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """The ctypes struct of a rank-`rank` memref descriptor."""
    fields: list[tuple[str, Any]] = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


def descriptor(array: Array) -> ctypes.Structure:
    """A descriptor pointing at a C-contiguous array's data (which must outlive the call)."""
    desc = descriptor_type(array.ndim)()
    pointer = array.ctypes.data
    desc.allocated = pointer
    desc.aligned = pointer
    desc.offset = 0
    if array.ndim:
        desc.sizes[:] = array.shape
        desc.strides[:] = (
            [s // array.itemsize for s in array.strides] if array.size else [0] * array.ndim
        )
    return desc


def memref_shape(typ: MemRefType[Attribute]) -> tuple[int, ...]:
    return tuple(typ.get_shape())
