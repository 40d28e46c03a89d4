"""The reference interpreter: runs graph-dialect functions on NumPy arrays.

It is the ground truth every pass and every compiled kernel is checked against, so it is
written for clarity, not speed: each op is its NumPy definition. It runs on xDSL's
`Interpreter` (func.func, func.call and func.return come from xDSL), with one
implementation per graph op, `graph.fused` regions included.

Values are NumPy arrays of the element type's dtype: f32 -> float32, f16 -> float16,
f64 -> float64, iN -> intN, uiN -> uintN, i1 -> bool, and bf16 -> float32 holding values
rounded to bf16 (NumPy has no bf16). f16 and bf16 ops compute in float32 and round the
result, as kernels do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    IntegerType,
    ModuleOp,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import InterpretationError

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.dialects.graph.elements import (
    F32_AS_F64,
    value_dtype,
)

# The element-type helpers stay part of the interpreter's API (`reference.numpy_to_dense`).
from graphfuse.dialects.graph.elements import Array as Array
from graphfuse.dialects.graph.elements import dense_to_numpy as dense_to_numpy
from graphfuse.dialects.graph.elements import numpy_dtype as numpy_dtype
from graphfuse.dialects.graph.elements import numpy_to_dense as numpy_to_dense
from graphfuse.dialects.graph.elements import round_to_bf16 as round_to_bf16
from graphfuse.dialects.graph.elements import to_element_type as to_element_type
from graphfuse.parsing import GraphfuseError, op_error


def _widen(value: Array) -> Array:
    """f16 computes in float32 (bf16 already lives there)."""
    return value.astype(np.float32) if value.dtype == np.float16 else value


# ---------------------------------------------------------------------------------------
# NumPy definitions of the ops
# ---------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: Array) -> Array:
    """Gauss error function, elementwise (NumPy has none; math.erf is exact to 1 ulp)."""
    return np.asarray(_erf(x), dtype=x.dtype)


def sigmoid(x: Array) -> Array:
    """Logistic function, written to avoid overflow for large |x|."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def divide(a: Array, b: Array) -> Array:
    """True division for floats; integer division truncating toward zero (as arith.divsi)."""
    if np.issubdtype(a.dtype, np.floating):
        return a / b
    safe_b = np.where(b == 0, 1, b)
    # a - fmod(a, b) is an exact multiple of b no larger than |a|, so floor division of it
    # truncates and nothing overflows (np.abs(INT_MIN) would).
    with np.errstate(over="ignore"):
        return (a - np.fmod(a, safe_b)) // safe_b


def modulo(a: Array, b: Array, fmod: bool) -> Array:
    """Remainder with the divisor's sign (numpy.mod), or the dividend's under `fmod`
    (numpy.fmod). An integer remainder by 0 is 0 (as by 1: the kernels' guard)."""
    if np.issubdtype(a.dtype, np.floating):
        return np.fmod(a, b) if fmod else np.mod(a, b)
    safe_b = np.where(b == 0, np.ones((), b.dtype), b)
    return np.fmod(a, safe_b) if fmod else np.mod(a, safe_b)


def power(a: Array, b: Array) -> Array:
    """a ** b; on integers (wrapping) a negative exponent gives 1 / a ** -b truncated: 0
    unless a is 1 or -1 (and 0 for a == 0, where 1 / 0 is undefined)."""
    if np.issubdtype(a.dtype, np.floating) or not np.issubdtype(b.dtype, np.signedinteger):
        return np.power(a, b)
    negative = b < 0
    result = np.power(a, np.where(negative, np.zeros((), b.dtype), b))
    odd = (b % 2) != 0
    reciprocal = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return np.where(negative, reciprocal.astype(a.dtype), result)


def shift(a: Array, b: Array, left: bool) -> Array:
    """a << b or a >> b (arithmetic for signed a); a count of at least the width, read
    unsigned, shifts every bit out (0, or -1 for a negative signed a shifted right)."""
    width = a.dtype.itemsize * 8
    count = b.astype(np.dtype(f"uint{width}")).astype(np.uint64)
    out = count >= width
    safe = np.where(out, 0, count).astype(a.dtype)
    if left:
        return np.where(out, np.zeros((), a.dtype), np.left_shift(a, safe))
    fill = np.where(a < 0, -1, 0).astype(a.dtype)
    return np.where(out, fill, np.right_shift(a, safe))


def _bits(x: Array, element_type: Attribute) -> Array:
    """The stored bits of `x`, an array of `element_type`, as unsigned integers."""
    if isinstance(element_type, BFloat16Type):
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if element_type == IntegerType(1):
        return x.astype(np.uint8)
    stored = x.astype(numpy_dtype(element_type))
    return stored.view(np.dtype(f"uint{stored.dtype.itemsize * 8}"))


def bitcast(x: Array, source: Attribute, target: Attribute) -> Array:
    """The bits of each element of `x` (of type `source`) read as `target`."""
    bits = _bits(x, source)
    if isinstance(target, BFloat16Type):
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(numpy_dtype(target))


def gather(data: Array, indices: Array, axis: int) -> Array:
    """numpy.take with ONNX's negative indices; indices still out of range are clamped
    (as the compiled kernels do)."""
    axis = rules.normalize_axis(axis, data.ndim)
    dim = data.shape[axis]
    wrapped = np.where(indices < 0, indices + dim, indices)
    return np.take(data, np.clip(wrapped, 0, dim - 1), axis=axis)


def cast(x: Array, element_type: Attribute) -> Array:
    """Element-type conversion: float to int truncates; anything to i1 is `x != 0`."""
    dtype = value_dtype(element_type)
    if dtype == np.bool_:
        return x != 0
    if np.issubdtype(dtype, np.integer) and np.issubdtype(x.dtype, np.floating):
        return np.trunc(x).astype(dtype)
    return x.astype(dtype)


def conv2d(
    x: Array,
    w: Array,
    strides: Sequence[int],
    padding: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> Array:
    """NCHW x OIHW convolution as a sum over kernel taps of grouped channel contractions."""
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = rules.conv2d_shape(x.shape, w.shape, strides, padding, dilations, groups)[2:]
    padded = np.pad(x, ((0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])))
    grouped = padded.reshape(n, groups, c // groups, *padded.shape[2:])
    weights = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), dtype=np.result_type(x, w))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dilations[0], i * dilations[0] + strides[0] * (oh - 1) + 1, strides[0])
            cols = slice(j * dilations[1], j * dilations[1] + strides[1] * (ow - 1) + 1, strides[1])
            patch = grouped[:, :, :, rows, cols]
            out += np.einsum("ngchw,goc->ngohw", patch, weights[:, :, :, i, j])
    return out.reshape(n, o, oh, ow)


def _windows(x: Array, kernel: Sequence[int], strides: Sequence[int]) -> Array:
    """All pooling windows of an already padded NCHW array: shape N, C, OH, OW, KH, KW."""
    view = np.lib.stride_tricks.sliding_window_view(x, tuple(kernel), axis=(2, 3))
    return view[:, :, :: strides[0], :: strides[1]]


def _pad_hw(x: Array, padding: Sequence[int], fill: float) -> Array:
    pads = ((0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3]))
    return np.pad(x, pads, constant_values=fill)


def max_pool2d(
    x: Array, kernel: Sequence[int], strides: Sequence[int], padding: Sequence[int]
) -> Array:
    """Max over each window; padding never wins."""
    lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    padded = _pad_hw(x, padding, lowest)
    return _windows(padded, kernel, strides).max(axis=(-2, -1))


def avg_pool2d(
    x: Array,
    kernel: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[int],
    count_include_pad: bool,
) -> Array:
    """Mean over each window; the divisor counts padding only if `count_include_pad`."""
    sums = _windows(_pad_hw(x, padding, 0), kernel, strides).sum(axis=(-2, -1))
    if count_include_pad:
        return sums / (kernel[0] * kernel[1])
    ones = _pad_hw(np.ones((1, 1, *x.shape[2:]), dtype=x.dtype), padding, 0)
    counts = _windows(ones, kernel, strides).sum(axis=(-2, -1))
    return sums / counts


def softmax(x: Array, axis: int) -> Array:
    """exp(x - max) / sum(exp(x - max)) along axis."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x: Array, axis: int) -> Array:
    """x - max - log(sum(exp(x - max))) along axis."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def layer_norm(x: Array, scale: Array, bias: Array, axis: int, epsilon: float) -> Array:
    """Normalise over dims axis.. with the population variance, then scale and shift."""
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * scale + bias


def batch_norm(
    x: Array, scale: Array, bias: Array, mean: Array, var: Array, epsilon: float
) -> Array:
    """Inference batch norm with per-channel (axis 1) statistics."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale.reshape(shape) / np.sqrt(var.reshape(shape) + epsilon)
    return (x - mean.reshape(shape)) * inv + bias.reshape(shape)


def gelu(x: Array, approximate: graph.GeluApproximation) -> Array:
    """x * Phi(x): exact with erf, or PyTorch's tanh approximation."""
    if approximate == graph.GeluApproximation.TANH:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def top_k(x: Array, k: int, axis: int) -> tuple[Array, Array]:
    """The k largest along axis, descending; ties keep the lower index first (ONNX)."""
    key = -x if np.issubdtype(x.dtype, np.floating) else ~x
    order = np.argsort(key, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)


def sort(x: Array, axis: int, descending: bool) -> Array:
    """Sorted copy along axis."""
    result = np.sort(x, axis=axis, kind="stable")
    return np.flip(result, axis=axis) if descending else result


def strided_slice(
    x: Array, starts: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> Array:
    """x[starts + i * strides] for i < sizes, per dimension."""
    index = tuple(
        slice(start, start + (size - 1) * stride + 1, stride) if size else slice(start, start)
        for start, size, stride in zip(starts, sizes, strides, strict=False)
    )
    return x[index]


def _relu(x: Array) -> Array:
    return np.maximum(x, np.zeros((), dtype=x.dtype))


def _rsqrt(x: Array) -> Array:
    return 1 / np.sqrt(x)


_UNARY: dict[type[Operation], Callable[[Array], Array]] = {
    graph.NegOp: np.negative,
    graph.AbsOp: np.abs,
    graph.ReluOp: _relu,
    graph.ExpOp: np.exp,
    graph.LogOp: np.log,
    graph.SqrtOp: np.sqrt,
    graph.RsqrtOp: _rsqrt,
    graph.TanhOp: np.tanh,
    graph.SigmoidOp: sigmoid,
    graph.ErfOp: erf,
    graph.SiluOp: lambda x: x * sigmoid(x),
    graph.SinOp: np.sin,
    graph.CosOp: np.cos,
    graph.TanOp: np.tan,
    graph.AsinOp: np.arcsin,
    graph.AcosOp: np.arccos,
    graph.AtanOp: np.arctan,
    graph.SinhOp: np.sinh,
    graph.CoshOp: np.cosh,
    graph.AsinhOp: np.arcsinh,
    graph.AcoshOp: np.arccosh,
    graph.AtanhOp: np.arctanh,
    graph.FloorOp: np.floor,
    graph.CeilOp: np.ceil,
    graph.RoundOp: np.round,  # halves to even
    graph.SignOp: np.sign,
    graph.BitwiseNotOp: np.invert,
}

_BINARY: dict[type[Operation], Callable[[Array, Array], Array]] = {
    graph.AddOp: np.add,
    graph.SubOp: np.subtract,
    graph.MulOp: np.multiply,
    graph.DivOp: divide,
    graph.MaxOp: np.maximum,
    graph.MinOp: np.minimum,
    graph.PowOp: power,
    graph.BitwiseAndOp: np.bitwise_and,
    graph.BitwiseOrOp: np.bitwise_or,
    graph.BitwiseXorOp: np.bitwise_xor,
    graph.ShiftLeftOp: lambda a, b: shift(a, b, left=True),
    graph.ShiftRightOp: lambda a, b: shift(a, b, left=False),
    graph.MatmulOp: np.matmul,
}

_REDUCTIONS: dict[type[Operation], Callable[..., Array]] = {
    graph.ReduceSumOp: np.sum,
    graph.ReduceMaxOp: np.max,
    graph.ReduceMinOp: np.min,
    graph.ReduceProdOp: np.prod,
    graph.ReduceMeanOp: np.mean,
}

_COMPARISONS: dict[graph.ComparePredicate, Callable[[Array, Array], Array]] = {
    graph.ComparePredicate.EQ: np.equal,
    graph.ComparePredicate.NE: np.not_equal,
    graph.ComparePredicate.LT: np.less,
    graph.ComparePredicate.LE: np.less_equal,
    graph.ComparePredicate.GT: np.greater,
    graph.ComparePredicate.GE: np.greater_equal,
}

# Semantics of the ops that need their parameters: op -> NumPy result(s).
OpSemantics = Callable[[Any, Sequence[Array]], Array | tuple[Array, ...]]


def _axis(op: Any) -> int:
    return rules.normalize_axis(op.axis.value.data, len(op.input.type.get_shape()))


def _reduce(op: graph.ReduceOp, args: Sequence[Array]) -> Array:
    axes = rules.normalize_axes(op.axes.get_values(), args[0].ndim)
    return _REDUCTIONS[type(op)](args[0], axis=axes, keepdims=op.keepdims is not None)


_WITH_PARAMS: dict[type[Operation], OpSemantics] = {
    graph.CastOp: lambda op, a: cast(a[0], op.result.type.get_element_type()),
    graph.BitcastOp: lambda op, a: bitcast(
        a[0], op.input.type.get_element_type(), op.result.type.get_element_type()
    ),
    graph.ModOp: lambda op, a: modulo(a[0], a[1], op.fmod is not None),
    graph.CompareOp: lambda op, a: _COMPARISONS[op.predicate.data](*a),
    graph.SelectOp: lambda op, a: np.where(*a),
    graph.BroadcastToOp: lambda op, a: np.broadcast_to(a[0], op.result.type.get_shape()),
    graph.ReshapeOp: lambda op, a: a[0].reshape(op.result.type.get_shape()),
    graph.TransposeOp: lambda op, a: np.transpose(a[0], op.perm.get_values()),
    graph.SliceOp: lambda op, a: strided_slice(
        a[0], op.starts.get_values(), op.result.type.get_shape(), op.strides.get_values()
    ),
    graph.ConcatOp: lambda op, a: np.concatenate(
        a, axis=rules.normalize_axis(op.axis.value.data, a[0].ndim)
    ),
    graph.GatherOp: lambda op, a: gather(a[0], a[1], op.axis.value.data),
    graph.PadOp: lambda op, a: np.pad(
        a[0],
        tuple(zip(op.low.get_values(), op.high.get_values(), strict=False)),
        constant_values=op.value.value.data,
    ),
    graph.ReduceSumOp: _reduce,
    graph.ReduceMaxOp: _reduce,
    graph.ReduceMinOp: _reduce,
    graph.ReduceProdOp: _reduce,
    graph.ReduceMeanOp: _reduce,
    graph.Conv2dOp: lambda op, a: conv2d(
        a[0],
        a[1],
        op.strides.get_values(),
        op.padding.get_values(),
        op.dilations.get_values(),
        op.groups.value.data,
    ),
    graph.MaxPool2dOp: lambda op, a: max_pool2d(
        a[0], op.kernel.get_values(), op.strides.get_values(), op.padding.get_values()
    ),
    graph.AvgPool2dOp: lambda op, a: avg_pool2d(
        a[0],
        op.kernel.get_values(),
        op.strides.get_values(),
        op.padding.get_values(),
        op.count_include_pad is not None,
    ),
    graph.SoftmaxOp: lambda op, a: softmax(a[0], _axis(op)),
    graph.LogSoftmaxOp: lambda op, a: log_softmax(a[0], _axis(op)),
    graph.GeluOp: lambda op, a: gelu(a[0], op.approximate.data),
    graph.LayerNormOp: lambda op, a: layer_norm(a[0], a[1], a[2], _axis(op), op.epsilon.value.data),
    graph.BatchNormOp: lambda op, a: batch_norm(
        a[0], a[1], a[2], a[3], a[4], op.epsilon.value.data
    ),
    graph.SortOp: lambda op, a: sort(a[0], _axis(op), op.descending is not None),
    graph.TopKOp: lambda op, a: top_k(a[0], op.k.value.data, _axis(op)),
    graph.ConstantOp: lambda op, a: dense_to_numpy(op.value),
}


def evaluate(op: Operation, arrays: Sequence[Array]) -> tuple[Array, ...] | None:
    """An op's results on given operand values, or None if it has no NumPy definition."""
    semantics = semantics_of(type(op))
    if semantics is None:
        return None
    with np.errstate(all="ignore"):
        return _finish(op, semantics(op, tuple(_widen(a) for a in arrays)))


def semantics_of(op_type: type[Operation]) -> OpSemantics | None:
    """The NumPy definition of a graph op type, or None if it has none here."""
    if op_type in _UNARY:
        fn1 = _UNARY[op_type]
        return lambda op, a: fn1(a[0])
    if op_type in _BINARY:
        fn2 = _BINARY[op_type]
        return lambda op, a: fn2(a[0], a[1])
    return _WITH_PARAMS.get(op_type)


# ---------------------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------------------

_EXTERNALS: dict[str, Callable[..., Array | tuple[Array, ...]]] = {}


def register_external(name: str, fn: Callable[..., Array | tuple[Array, ...]]) -> None:
    """Give `graph.external "<name>"` its meaning in the reference interpreter."""
    _EXTERNALS[name] = fn


def _finish(op: Operation, values: Array | tuple[Array, ...]) -> tuple[Array, ...]:
    """Store each result as its declared element type (rounding f16/bf16, wrapping ints)."""
    results = values if isinstance(values, tuple) else (values,)
    finished: list[Array] = []
    for value, result in zip(results, op.results, strict=True):
        result_type = graph.tensor_type_of(result)
        array = to_element_type(value, result_type.get_element_type())
        finished.append(np.ascontiguousarray(array).reshape(result_type.get_shape()))
    return tuple(finished)


def _make_impl(op_type: type[Operation], semantics: OpSemantics):
    @impl(op_type)
    def run(
        self: GraphFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        with np.errstate(all="ignore"):
            return _finish(op, semantics(op, tuple(_widen(a) for a in args)))

    return run


class GraphFunctions(InterpreterFunctions):
    """xDSL interpreter implementations of every graph op."""

    @impl(graph.FusedOp)
    def run_fused(
        self, interpreter: Interpreter, op: graph.FusedOp, args: PythonValues
    ) -> PythonValues:
        return interpreter.run_ssacfg_region(op.body, args, op.sym_name.data)

    @impl_terminator(graph.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: graph.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl(graph.ExternalOp)
    def run_external(
        self, interpreter: Interpreter, op: graph.ExternalOp, args: PythonValues
    ) -> PythonValues:
        callee = op.callee.data
        if callee not in _EXTERNALS:
            raise op_error(
                op,
                f"no implementation of external kernel '{callee}'; register one with "
                "graphfuse.dialects.graph.interpreter.register_external",
            )
        return _finish(op, _EXTERNALS[callee](*args))


for _op_type in graph.Graph.operations:
    if (_semantics := semantics_of(_op_type)) is not None:
        setattr(GraphFunctions, f"run_{_op_type.name[6:]}", _make_impl(_op_type, _semantics))
register_impls(GraphFunctions)


# Arrays convert to an element type of the same family only: floats, integers, booleans.
_KIND_GROUP = {"f": "float", "i": "int", "u": "int", "b": "bool"}


def _check_arguments(function: func.FuncOp, arrays: Sequence[Any]) -> list[Array]:
    inputs = function.function_type.inputs.data
    name = function.sym_name.data
    if len(arrays) != len(inputs):
        raise GraphfuseError(f"@{name} takes {len(inputs)} arguments, got {len(arrays)}")
    checked: list[Array] = []
    for index, (array, input_type) in enumerate(zip(arrays, inputs, strict=True)):
        typ = graph.tensor_type_of(input_type)
        value = np.asarray(array)
        if value.shape != typ.get_shape():
            raise GraphfuseError(
                f"@{name} argument #{index} has shape {rules.format_shape(value.shape)}, "
                f"expected {rules.format_shape(typ.get_shape())}"
            )
        dtype = numpy_dtype(typ.get_element_type())
        if _KIND_GROUP.get(value.dtype.kind) != _KIND_GROUP[dtype.kind]:
            raise GraphfuseError(
                f"@{name} argument #{index} has dtype {value.dtype}, expected {dtype} "
                f"({typ.get_element_type()})"
            )
        checked.append(to_element_type(value, typ.get_element_type()))
    return checked


def find_function(module: ModuleOp, name: str) -> func.FuncOp:
    """The `func.func @name` of a module, or a diagnostic listing the functions it has."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for function in functions:
        if function.sym_name.data == name:
            from graphfuse.graph_inputs import check_entry

            return check_entry(function)
    names = ", ".join("@" + f.sym_name.data for f in functions) or "none"
    raise GraphfuseError(f"module has no function @{name} (functions: {names})")


def run(module: ModuleOp, name: str, *arrays: Any, f32_as_f64: bool = False) -> tuple[Array, ...]:
    """Run `func.func @name` of a verified module on NumPy arrays; returns its results.

    Arguments are checked against the function type (shape exact, dtype of the same kind)
    and converted to the element type; results come back as arrays of the result types.
    `f32_as_f64` computes and returns f32 values in float64 instead: how far that run is
    from the f32 one measures how much rounding a result suffers (e.g. from cancellation),
    which differential tests use to size their tolerance.
    """
    from graphfuse.graph_inputs import check_calls

    function = check_calls(find_function(module, name))
    token = F32_AS_F64.set(f32_as_f64)
    try:
        args = _check_arguments(function, arrays)
        interpreter = Interpreter(module)
        interpreter.register_implementations(FuncFunctions())
        interpreter.register_implementations(GraphFunctions())
        return tuple(interpreter.call_op(function, tuple(args)))
    except InterpretationError as error:
        raise GraphfuseError(f"@{name}: cannot interpret: {str(error).splitlines()[0]}") from None
    finally:
        F32_AS_F64.reset(token)


def random_inputs(function: func.FuncOp, seed: int = 0) -> list[Array]:
    """Random arguments for a function: floats in [-1, 1), ints in [-8, 8), random bools."""
    rng = np.random.default_rng(seed)
    arrays: list[Array] = []
    for input_type in function.function_type.inputs.data:
        typ = graph.tensor_type_of(input_type)
        element_type = typ.get_element_type()
        dtype = numpy_dtype(element_type)
        shape = typ.get_shape()
        if dtype == np.bool_:
            value: Array = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            value = rng.integers(-8, 8, size=shape)
        else:
            value = rng.uniform(-1, 1, size=shape)
        arrays.append(to_element_type(value, element_type))
    return arrays
