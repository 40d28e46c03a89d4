"""An fx graph of ATen calls (one partition) as a graph-dialect module, `func.func @main`.

The function takes the partition's inputs that are not constants, in order, and returns its
outputs. Constants (frozen parameters and buffers, tensor constants) arrive as NumPy arrays
and stay arrays while the builders can fold them (a weight's transpose); each node goes
through its ATEN_OPS builder, and its result is checked against the shape and dtype torch
traced, so a builder that disagrees with torch fails here, naming the node.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import Builder, ImportFailure, Value, element_of, shape_of
from graphfuse.frontend.torch_fx.aten_call import NUMPY_DTYPES, Call, element_of_dtype
from graphfuse.frontend.torch_fx.aten_table import ATEN_OPS
from graphfuse.parsing import verify

Result = Value | tuple[Value, ...]


def placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def from_fx(
    gm: torch.fx.GraphModule, constants: Mapping[int, np.ndarray[Any, Any]], name: str = "main"
) -> ModuleOp:
    """`gm` as a verified graph module; `constants` gives placeholder positions' values."""
    importer = _FxImporter(gm)
    return importer.run(constants, name)


def _fake(node: torch.fx.Node) -> Any:
    return node.meta.get("val")


class _FxImporter:
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.block = Block()
        self.b = Builder(self.block)
        self.values: dict[torch.fx.Node, Result] = {}

    def run(self, constants: Mapping[int, np.ndarray[Any, Any]], name: str) -> ModuleOp:
        arg_types: list[Attribute] = []
        for index, node in enumerate(placeholders(self.gm)):
            if index in constants:
                self.values[node] = constants[index]
                continue
            typ = _tensor_type(_fake(node), f"input {node.name}")
            arg_types.append(typ)
            self.values[node] = self.block.insert_arg(typ, len(self.block.args))
        results: list[SSAValue] = []
        for node in self.gm.graph.nodes:
            if node.op == "call_function":
                self.values[node] = self._call(node)
            elif node.op == "get_attr":
                self.values[node] = _array(getattr(self.gm, str(node.target)))
            elif node.op == "output":
                results = [self._result(v) for v in _flat(node.args[0])]
        self.block.add_op(func.ReturnOp(*results))
        function = func.FuncOp(
            name, FunctionType.from_lists(arg_types, [r.type for r in results]), Region(self.block)
        )
        module = ModuleOp([function])
        verify(module)
        return module

    def _call(self, node: torch.fx.Node) -> Result:
        if node.target is operator.getitem:
            source = self.values[node.args[0]]  # type: ignore[index]
            assert isinstance(source, tuple), (node.args, type(source))
            return source[int(node.args[1])]  # type: ignore[arg-type]
        assert isinstance(node.target, torch._ops.OpOverload)
        entry = ATEN_OPS[node.target]
        b = self.b
        b.node, b.op_type, b.outputs = node.name, str(node.target), [node.name]
        fakes = list(_flat(_fake(node)))
        call = Call(
            args=tuple(self._value(a) for a in node.args),
            kwargs={k: self._value(v) for k, v in node.kwargs.items()},
            shape=tuple(int(d) for d in fakes[0].shape),
            dtype=fakes[0].dtype,
            shapes=tuple(tuple(int(d) for d in f.shape) for f in fakes),
        )
        try:
            result = entry.build(b, call)
        except VerifyException as error:
            text = " ".join(str(error).split())
            raise ImportFailure(f"node {node.name} ({node.target}): {text}") from None
        for value, fake in zip(_flat(result), fakes, strict=False):
            self._check(node, value, fake)
        return result

    def _value(self, arg: Any) -> Any:
        """fx arguments with nodes replaced by their values (lists too)."""
        if isinstance(arg, torch.fx.Node):
            return self.values[arg]
        if isinstance(arg, list | tuple):
            return [self._value(a) for a in arg]  # type: ignore[union-attr]
        return arg

    def _check(self, node: torch.fx.Node, value: Value, fake: Any) -> None:
        expected = tuple(int(d) for d in fake.shape)
        element = element_of(value, node.name)
        if shape_of(value) != expected or element != element_of_dtype(fake.dtype, node.name):
            raise ImportFailure(
                f"node {node.name} ({node.target}): built {_describe(value, node.name)}, "
                f"torch traced {list(expected)} {fake.dtype}"
            )

    def _result(self, value: Any) -> SSAValue:
        result = self.values[value] if isinstance(value, torch.fx.Node) else value
        assert not isinstance(result, tuple)
        return self.b.tensor(result)


def _describe(value: Value, where: str) -> str:
    return f"{list(shape_of(value))} {element_of(value, where)}"


def _flat(value: Any) -> Sequence[Any]:
    return list(value) if isinstance(value, tuple | list) else [value]  # type: ignore[arg-type]


def _tensor_type(fake: Any, where: str) -> TensorType[Attribute]:
    if not isinstance(fake, torch.Tensor) or fake.dtype not in NUMPY_DTYPES:
        raise ImportFailure(f"{where}: not a tensor graphfuse supports")
    return TensorType(element_of_dtype(fake.dtype, where), [int(d) for d in fake.shape])


def _array(tensor: Any) -> np.ndarray[Any, Any]:
    """A constant tensor as a NumPy array of its own (later in-place changes to the
    tensor do not reach the compiled graph)."""
    array = tensor.detach().cpu().numpy()
    return np.array(array, numpy_dtype(element_of_dtype(tensor.dtype, "constant")), copy=True)
