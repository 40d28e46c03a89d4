"""Element types as NumPy holds them, and dense attributes to and from arrays.

Shared by the interpreter, constant folding, the ONNX importer and the lowering, without the
interpreter's machinery (xDSL's interpreter framework), so a pass that only converts
constants imports little. bf16 lives in float32 (rounded to bf16), i1 in bool, uiN in uintN.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

from graphfuse.dialects.graph.ops import is_unsigned, tensor_type_of
from graphfuse.parsing import GraphfuseError

Array = NDArray[Any]


def numpy_dtype(element_type: Attribute) -> np.dtype[Any]:
    """The NumPy dtype that holds values of an element type (bf16 lives in float32)."""
    if isinstance(element_type, Float32Type | BFloat16Type):
        return np.dtype(np.float32)
    if isinstance(element_type, Float16Type):
        return np.dtype(np.float16)
    if isinstance(element_type, Float64Type):
        return np.dtype(np.float64)
    if isa(element_type, IntegerType):
        width = element_type.bitwidth
        if width == 1:
            return np.dtype(np.bool_)
        if width in (8, 16, 32, 64):
            return np.dtype(f"uint{width}" if is_unsigned(element_type) else f"int{width}")
    raise GraphfuseError(f"element type {element_type} is not supported by the interpreter")


def round_to_bf16(values: Array) -> Array:
    """Round float32 values to the nearest bf16 (ties to even), keeping NaN and inf."""
    as_f32 = np.asarray(values, dtype=np.float32)
    bits = as_f32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(as_f32), as_f32, rounded.view(np.float32))


F32_AS_F64: ContextVar[bool] = ContextVar("graphfuse_reference_f32_as_f64", default=False)
"""Set by `run(..., f32_as_f64=True)`: f32 values are held as float64 (see `run`)."""


def value_dtype(element_type: Attribute) -> np.dtype[Any]:
    """The dtype the interpreter holds `element_type` in (f32 as float64 under F32_AS_F64)."""
    if isinstance(element_type, Float32Type) and F32_AS_F64.get():
        return np.dtype(np.float64)
    return numpy_dtype(element_type)


def to_element_type(value: Array, element_type: Attribute) -> Array:
    """Convert a computed array to how the interpreter stores `element_type`."""
    dtype = value_dtype(element_type)
    converted = np.asarray(value).astype(dtype, copy=False)
    if isinstance(element_type, BFloat16Type):
        return round_to_bf16(converted)
    return converted


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> Array:
    """The contents of a dense elements attribute as an array of its storage dtype."""
    tensor_type = tensor_type_of(attr.get_type())
    element_type: Attribute = tensor_type.get_element_type()
    dtype = numpy_dtype(element_type)
    raw = attr.data.data
    shape = tensor_type.get_shape()
    if isinstance(element_type, BFloat16Type):
        halves = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return halves.view(np.float32).reshape(shape)
    if dtype == np.bool_:
        return (np.frombuffer(raw, dtype=np.uint8) != 0).reshape(shape)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def same_bits(array: Array) -> bool:
    """Every element of a non-empty `array` holds the first one's bits: the splat test.
    Compared as bits, not values: -0.0 == 0.0 would make zeros of both signs a splat of
    the first (x / c then gives +inf where -inf is due), and NaN != NaN no NaN splat."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.size == 0:
        return False
    bits = flat.view(f"u{flat.itemsize}")
    return bool(np.all(bits == bits[0]))


def numpy_to_dense(array: Array, tensor_type: TensorType[Attribute]) -> DenseIntOrFPElementsAttr:
    """`array` as a dense attribute of `tensor_type` (inverse of `dense_to_numpy`), as raw
    bytes in the layout the MLIR parser produces."""
    element_type: Attribute = tensor_type.get_element_type()
    stored = to_element_type(np.asarray(array).reshape(tensor_type.get_shape()), element_type)
    if isinstance(element_type, BFloat16Type):
        raw = (stored.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    elif stored.dtype == np.bool_:
        raw = np.where(stored, 0xFF, 0).astype(np.uint8).tobytes()
    else:
        raw = _raw_bytes(stored)
    assert isinstance(element_type, IntegerType | AnyFloat), element_type
    dense_type = cast(TensorType[IntegerType | AnyFloat], tensor_type)
    return DenseIntOrFPElementsAttr(dense_type, BytesAttr(raw))


def _raw_bytes(array: Array) -> bytes:
    """The array's elements in C order as bytes: the `bytes` object it views, when it
    views the whole of one in that order (an ONNX initializer read from its file or its
    protobuf field), so a weight's bytes are not copied once more; else a copy."""
    owner = _base(array)
    while isinstance(owner, np.ndarray):
        owner = _base(cast(Array, owner))
    if isinstance(owner, bytes) and array.flags.c_contiguous and array.nbytes == len(owner):
        return owner
    return np.ascontiguousarray(array).tobytes()


def _base(array: Array) -> object:
    """What the array's memory belongs to: NumPy's stubs say an array or None, but one
    `np.frombuffer` made belongs to the buffer it was given."""
    return array.base
