"""A graph-dialect function as an ONNX model: the onnxruntime side of bench_cpu.py.

The benchmark workloads are written in the graph dialect; onnxruntime needs ONNX. Each op
maps to the ONNX node with the same semantics (compound ops to ONNX's own compound nodes,
Gelu and LayerNormalization included, so onnxruntime's fused kernels are used as a user of
it would get them). Constants become initializers. Ops outside the workloads' vocabulary
are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects import func

from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.dialects.graph import shape_rules as rules

OPSET = 20  # Gelu is an ONNX op from opset 20

_SIMPLE = {
    graph.NegOp: "Neg",
    graph.AbsOp: "Abs",
    graph.ReluOp: "Relu",
    graph.ExpOp: "Exp",
    graph.LogOp: "Log",
    graph.SqrtOp: "Sqrt",
    graph.TanhOp: "Tanh",
    graph.SigmoidOp: "Sigmoid",
    graph.ErfOp: "Erf",
    graph.AddOp: "Add",
    graph.SubOp: "Sub",
    graph.MulOp: "Mul",
    graph.DivOp: "Div",
    graph.MaxOp: "Max",
    graph.MinOp: "Min",
    graph.PowOp: "Pow",
    graph.MatmulOp: "MatMul",
    graph.BatchNormOp: "BatchNormalization",
}


def _conv(op: Any) -> dict[str, Any]:
    p = op.padding.get_values()
    return {
        "strides": list(op.strides.get_values()),
        "pads": [p[0], p[1], p[2], p[3]],
        "dilations": list(op.dilations.get_values()),
        "group": op.groups.value.data,
    }


def _axis(op: Any) -> int:
    return rules.normalize_axis(op.axis.value.data, len(op.input.type.get_shape()))


_WITH_ATTRIBUTES: dict[type, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    graph.Conv2dOp: ("Conv", _conv),
    graph.SoftmaxOp: ("Softmax", lambda op: {"axis": _axis(op)}),
    graph.LayerNormOp: (
        "LayerNormalization",
        lambda op: {"axis": _axis(op), "epsilon": op.epsilon.value.data},
    ),
    graph.GeluOp: ("Gelu", lambda op: {"approximate": op.approximate.data.value}),
    graph.TransposeOp: ("Transpose", lambda op: {"perm": list(op.perm.get_values())}),
}


def _attributes(op: Any) -> dict[str, Any]:
    if isinstance(op, graph.BatchNormOp):
        return {"epsilon": op.epsilon.value.data}
    return {}


def to_onnx(function: func.FuncOp) -> onnx.ModelProto:
    """`function` (graph dialect, f32, unfused) as a checked ONNX model."""
    names: dict[Any, str] = {}
    block = function.body.block

    def name(value: Any) -> str:
        return names.setdefault(value, f"v{len(names)}")

    inputs = [
        helper.make_tensor_value_info(name(a), TensorProto.FLOAT, a.type.get_shape())
        for a in block.args
    ]
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    for op in block.ops:
        if isinstance(op, graph.ConstantOp):
            array = reference.dense_to_numpy(op.value)
            initializers.append(numpy_helper.from_array(array, name(op.result)))
            continue
        if op.dialect_name() != "graph":
            continue
        operands = [name(v) for v in op.operands]
        outputs = [name(r) for r in op.results]
        if isinstance(op, graph.ReshapeOp):
            shape = numpy_helper.from_array(
                np.asarray(op.result.type.get_shape(), dtype=np.int64),
                name(op.result) + "_shape",
            )
            initializers.append(shape)
            operands.append(shape.name)
            nodes.append(helper.make_node("Reshape", operands, outputs))
        elif type(op) in _SIMPLE:
            nodes.append(helper.make_node(_SIMPLE[type(op)], operands, outputs, **_attributes(op)))
        elif type(op) in _WITH_ATTRIBUTES:
            kind, attributes = _WITH_ATTRIBUTES[type(op)]
            nodes.append(helper.make_node(kind, operands, outputs, **attributes(op)))
        else:
            raise NotImplementedError(f"{op.name}: no ONNX translation")
    returned = block.last_op
    assert returned is not None
    outputs = [
        helper.make_tensor_value_info(name(v), TensorProto.FLOAT, v.type.get_shape())
        for v in returned.operands
    ]
    model = helper.make_model(
        helper.make_graph(nodes, function.sym_name.data, inputs, outputs, initializers),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    onnx.checker.check_model(model)
    return model
