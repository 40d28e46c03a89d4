"""Small ONNX models written with onnx.helper, and the checks run on them.

`check_against_onnxruntime` imports a model, runs it in the reference interpreter (and,
when asked, compiled for the CPU) and compares with onnxruntime on the same inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_import import from_onnx

TOLERANCE = 1e-4
_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, tuple[int, Sequence[int | str] | None]],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 18,
    check: bool = True,
) -> onnx.ModelProto:
    """A model (checked by onnx.checker unless `check` is off, for deliberately bad ones):
    inputs typed like the example arrays, outputs as (element type, shape)."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(n, _TYPES[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    built.ir_version = 10
    if check:
        onnx.checker.check_model(built, full_check=True)
    return built


def onnxruntime_outputs(built: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[Any]:
    session = ort.InferenceSession(built.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def check_against_onnxruntime(
    built: onnx.ModelProto, inputs: dict[str, np.ndarray], compile_it: bool = False
) -> None:
    expected = onnxruntime_outputs(built, inputs)
    module = from_onnx(built)
    arrays = list(inputs.values())
    results = [reference.run(module, "main", *arrays)]
    if compile_it:
        got = graphfuse.compile(module)(*arrays)
        results.append(got if isinstance(got, tuple) else (got,))
    for result in results:
        assert len(result) == len(expected)
        for index, (got, want) in enumerate(zip(result, expected, strict=True)):
            assert got.shape == want.shape, f"output #{index}: {got.shape} vs {want.shape}"
            np.testing.assert_allclose(
                got, want, rtol=TOLERANCE, atol=TOLERANCE, err_msg=f"output #{index}"
            )
