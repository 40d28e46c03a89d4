"""Every converted op type, alone in a model, with every element type its ONNX schema allows
that graphfuse has: it imports and equals onnxruntime, or it is refused in one line naming
the node, the op type and the element type (never a verifier message about an operand)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import defs, helper, numpy_helper

from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.frontend.onnx_ops import CONVERTERS
from graphfuse.testing.onnx_models import onnxruntime_outputs

OPSET = 20
_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
    "tensor(double)": np.float64,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint64)": np.uint64,
    "tensor(uint32)": np.uint32,
    "tensor(uint16)": np.uint16,
    "tensor(uint8)": np.uint8,
}
_MIXED_DTYPES = list(_DTYPES)[:5]
_OTHER_REFUSAL = re.compile(r"node [^\n:]+: (?!.*(element type|verify))[^\n]+")
_REFUSED = re.compile(r"node \S+ \((\w+)\): element type \w+ is not supported by graph\.\w+")


def _ints(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


# op type -> (shapes of the typed inputs, attributes, known inputs by position, outputs)
_SPECS: dict[str, tuple[list[tuple[int, ...]], dict[str, Any], dict[int, np.ndarray], int]] = {
    "Where": ([(2, 3)] * 3, {}, {}, 1),
    "Cast": ([(2, 3)], {"to": onnx.TensorProto.FLOAT}, {}, 1),
    "Dropout": ([(2, 3)], {}, {}, 1),
    "Clip": ([(2, 3)], {}, {}, 1),
    "LayerNormalization": ([(2, 3), (3,)], {}, {}, 1),
    "BatchNormalization": ([(1, 2, 3, 3), (2,), (2,), (2,), (2,)], {}, {}, 1),
    "MatMul": ([(2, 3), (3, 4)], {}, {}, 1),
    "Gemm": ([(2, 3), (3, 4)], {}, {}, 1),
    "Conv": ([(1, 2, 5, 5), (3, 2, 3, 3)], {}, {}, 1),
    "MaxPool": ([(1, 2, 5, 5)], {"kernel_shape": [2, 2]}, {}, 1),
    "AveragePool": ([(1, 2, 5, 5)], {"kernel_shape": [2, 2]}, {}, 1),
    "GlobalAveragePool": ([(1, 2, 5, 5)], {}, {}, 1),
    "GlobalMaxPool": ([(1, 2, 5, 5)], {}, {}, 1),
    "Reshape": ([(2, 3)], {}, {1: _ints(3, 2)}, 1),
    "Flatten": ([(2, 3, 2)], {}, {}, 1),
    "Squeeze": ([(2, 1, 3)], {}, {1: _ints(1)}, 1),
    "Unsqueeze": ([(2, 3)], {}, {1: _ints(0)}, 1),
    "Expand": ([(1, 3)], {}, {1: _ints(2, 3)}, 1),
    "Concat": ([(2, 3), (2, 3)], {"axis": 0}, {}, 1),
    "Slice": ([(4, 3)], {}, {1: _ints(1), 2: _ints(3)}, 1),
    "Split": ([(4, 3)], {"num_outputs": 2}, {}, 2),
    "Pad": ([(2, 3)], {}, {1: _ints(1, 0, 0, 1)}, 1),
    "Gather": ([(4, 3)], {}, {1: _ints(3, 0)}, 1),
    "BitShift": ([(2, 3)] * 2, {"direction": "LEFT"}, {}, 1),
    "GatherND": ([(4, 3)], {}, {1: np.array([[1], [3]], np.int64)}, 1),
}
for _reduce in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
    _SPECS[_reduce] = ([(2, 3)], {"keepdims": 0}, {1: _ints(1)}, 1)


def _spec(schema: Any) -> tuple[list[tuple[int, ...]], dict[str, Any], dict[int, np.ndarray], int]:
    if schema.name in _SPECS:
        return _SPECS[schema.name]
    variadic = schema.max_input > 2 and schema.min_input < 2
    return [(2, 3)] * (2 if variadic else max(schema.min_input, 1)), {}, {}, 1


def _type_params(schema: Any) -> list[str]:
    """The type parameters of the inputs the model feeds, in order of first use."""
    allowed = {c.type_param_str for c in schema.type_constraints}
    count = len(_spec(schema)[0])
    formals = [schema.inputs[min(i, len(schema.inputs) - 1)].type_str for i in range(count)]
    return list(dict.fromkeys(f for f in formals if f in allowed))


NOT_GENERIC = frozenset(
    {
        # Inputs or attributes the generic spec cannot give (sizes, scales, indices in
        # range, required attributes, ranks above 2) or refusals about the generic model's
        # shape rather than its element type (values that must be constants, output shapes
        # that depend on values). Their element types are tested by their family's tests
        # (test_onnx_nn, test_onnx_tensor, test_onnx_recurrent, test_onnx_signal,
        # test_onnx_quantization, test_onnx_more_ops) and by ONNX's conformance suite.
        *("Col2Im", "ConvTranspose", "DeformConv", "GridSample", "InstanceNormalization"),
        *("LRN", "LpPool", "MaxUnpool", "Resize", "RoiAlign", "Upsample"),
        *("Compress", "NonMaxSuppression", "NonZero", "Unique", "ConstantOfShape"),
        *("CumSum", "DepthToSpace", "Det", "Einsum", "OneHot", "ReverseSequence", "Scatter"),
        *("ScatterND", "SpaceToDepth", "Tile", "TopK"),
        *("GRU", "LSTM", "RNN", "DFT", "STFT"),
        *("DequantizeLinear", "DynamicQuantizeLinear", "QuantizeLinear"),
    }
)
"""Converters left out of the generic single-op test, and why."""


def _cases() -> list[Any]:
    """(op type, element type of each type parameter its inputs use) for every mix."""
    cases: list[Any] = []
    for op_type in sorted(CONVERTERS):
        if not defs.has(op_type, OPSET) or op_type in NOT_GENERIC:
            continue  # an op of a later opset (BitCast), or one listed above
        schema = defs.get_schema(op_type, OPSET)
        allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        # Every type for the first parameter, the first five for the rest: a mix of
        # three parameters (OneHot) would otherwise be 12 ** 3 models.
        choices = [
            [t for t in allowed[p] if t in (_DTYPES if i == 0 else _MIXED_DTYPES)]
            for i, p in enumerate(_type_params(schema))
        ]
        for combo in itertools.product(*choices):
            name = "-".join(t[len("tensor(") : -1] for t in combo)
            cases.append(pytest.param(op_type, combo, id=f"{op_type}-{name}"))
    return cases


def _example(op_type: str, index: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    values = np.random.default_rng(index).standard_normal(shape) * 3
    if dtype is np.bool_ or (op_type == "Where" and index == 0):
        return values > 0
    if op_type in ("Sqrt", "Log") or (op_type == "BatchNormalization" and index == 4):
        values = np.abs(values) + 0.5
    if op_type == "Pow" and index == 1:
        values = np.abs(values).round()
    if op_type == "BitShift" and index == 1:
        values = np.abs(values).round() % 4
    if op_type in ("Div", "Mod") and index == 1:
        values = np.where(np.abs(values) < 1, 1.5, values)
    return values.astype(dtype)


def _single_op_model(op_type: str, combo: tuple[str, ...]) -> tuple[Any, dict[str, np.ndarray]]:
    schema = defs.get_schema(op_type, OPSET)
    chosen = dict(zip(_type_params(schema), combo, strict=True))
    shapes, attrs, known, outputs = _spec(schema)
    feeds: dict[str, np.ndarray] = {}
    names: list[str] = []
    for index, shape in enumerate(shapes):
        formal = schema.inputs[min(index, len(schema.inputs) - 1)].type_str
        feeds[f"x{index}"] = _example(op_type, index, shape, _DTYPES[chosen[formal]])
        names.append(f"x{index}")
    for index in known:
        names += [""] * (index + 1 - len(names))
        names[index] = f"k{index}"
    graph = helper.make_graph(
        [helper.make_node(op_type, names, [f"y{i}" for i in range(outputs)], **attrs)],
        op_type,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in feeds.items()
        ],
        [helper.make_value_info(f"y{i}", onnx.TypeProto()) for i in range(outputs)],
        [numpy_helper.from_array(a, f"k{i}") for i, a in known.items()],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    built.ir_version = 10
    inferred = onnx.shape_inference.infer_shapes(built, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred, feeds


@pytest.mark.parametrize(("op_type", "combo"), _cases())
def test_single_op_imports_or_names_its_element_type(op_type: str, combo: tuple[str, ...]) -> None:
    try:
        built, feeds = _single_op_model(op_type, combo)
    except (KeyError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        pytest.fail(
            f"no single-op {op_type} model from the generic spec ({error!r:.80}): give it a "
            "_SPECS entry, or list it in NOT_GENERIC with the tests that cover it"
        )
    try:
        module = from_onnx(built)
    except ImportFailure as error:
        message = str(error)
        match = _REFUSED.fullmatch(message)
        if match is None and _OTHER_REFUSAL.fullmatch(message):
            pytest.fail(
                f"{message}: a refusal about the generic model, not its element type; list "
                f"{op_type} in NOT_GENERIC with the tests that cover it"
            )
        assert match is not None and match.group(1) == op_type, message
        return
    got = reference.run(module, "main", *feeds.values())
    try:
        expected = onnxruntime_outputs(built, feeds)
    except Exception:  # onnxruntime has no kernel for some valid type mixes (Relu on i64)
        return
    for result, want in zip(got, expected, strict=True):
        assert result.shape == want.shape and result.dtype == want.dtype
        np.testing.assert_allclose(result.astype(np.float64), want.astype(np.float64), 1e-2, 1e-2)
