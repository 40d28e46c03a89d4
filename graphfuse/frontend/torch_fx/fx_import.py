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
from typing import cast

import numpy as np
import torch
from torch.fx.node import Argument
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from graphfuse.dialects.graph.elements import numpy_dtype
from graphfuse.frontend.onnx_builder import (
    Array,
    Builder,
    ImportFailure,
    Value,
    element_of,
    shape_of,
)
from graphfuse.frontend.torch_fx.aten_call import (
    NUMPY_DTYPES,
    Call,
    element_of_dtype,
)
from graphfuse.frontend.torch_fx.aten_table import ATEN_OPS
from graphfuse.frontend.torch_fx.typed_torch import overload_of
from graphfuse.parsing import verify

Result = Value | tuple[Value, ...]


def placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def from_fx(
    gm: torch.fx.GraphModule, constants: Mapping[int, Array], name: str = "main"
) -> ModuleOp:
    """`gm` as a verified graph module; `constants` gives placeholder positions' values."""
    importer = _FxImporter(gm)
    return importer.run(constants, name)


def flat(value: object) -> list[object]:
    """A node's value, or each of the values it holds (a tuple or list of results)."""
    if not isinstance(value, tuple | list):
        return [value]
    # fx holds a node's several results as a tuple or list of values of any kind.
    return list(cast(Sequence[object], value))


def traced_tensors(node: torch.fx.Node) -> list[torch.Tensor]:
    """The fake tensors torch traced for a node's result(s) (its `val`), in order."""
    found = [v for v in flat(node.meta.get("val")) if isinstance(v, torch.Tensor)]
    if not found:
        raise ImportFailure(f"node {node.name} ({node.target}): no traced tensor result")
    return found


def _sizes(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


class _FxImporter:
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.block = Block()
        self.b = Builder(self.block)
        self.values: dict[torch.fx.Node, Result] = {}

    def run(self, constants: Mapping[int, Array], name: str) -> ModuleOp:
        arg_types: list[Attribute] = []
        for index, node in enumerate(placeholders(self.gm)):
            if index in constants:
                self.values[node] = constants[index]
                continue
            typ = _tensor_type(node.meta.get("val"), f"input {node.name}")
            arg_types.append(typ)
            self.values[node] = self.block.insert_arg(typ, len(self.block.args))
        results: list[SSAValue] = []
        for node in self.gm.graph.nodes:
            if node.op == "call_function":
                self.values[node] = self._call(node)
            elif node.op == "get_attr":
                self.values[node] = constant_array(getattr(self.gm, str(node.target)))
            elif node.op == "output":
                results = [self._result(v) for v in flat(node.args[0])]
        self.block.add_op(func.ReturnOp(*results))
        function = func.FuncOp(
            name, FunctionType.from_lists(arg_types, [r.type for r in results]), Region(self.block)
        )
        module = ModuleOp([function])
        verify(module)
        return module

    def _call(self, node: torch.fx.Node) -> Result:
        if node.target is operator.getitem:
            return self._getitem(node)
        overload = overload_of(node)
        assert overload is not None, node.target  # the partitioner took only table ops
        b = self.b
        b.node, b.op_type, b.outputs = node.name, str(overload), [node.name]
        fakes = traced_tensors(node)
        call = Call(
            args=tuple(self._value(a) for a in node.args),
            kwargs={k: self._value(v) for k, v in node.kwargs.items()},
            shape=_sizes(fakes[0]),
            dtype=fakes[0].dtype,
            shapes=tuple(_sizes(f) for f in fakes),
        )
        try:
            result = ATEN_OPS[overload].build(b, call)
        except VerifyException as error:
            text = " ".join(str(error).split())
            raise ImportFailure(f"node {node.name} ({overload}): {text}") from None
        built: Sequence[Value] = result if isinstance(result, tuple) else (result,)
        for value, fake in zip(built, fakes, strict=False):
            self._check(node, value, fake)
        return result

    def _getitem(self, node: torch.fx.Node) -> Value:
        source, index = node.args[0], node.args[1]
        assert isinstance(source, torch.fx.Node) and isinstance(index, int), node.args
        results = self.values[source]
        assert isinstance(results, tuple), (node.args, type(results))
        return results[index]

    def _value(self, arg: Argument) -> object:
        """fx arguments with nodes replaced by their values (lists too)."""
        if isinstance(arg, torch.fx.Node):
            return self.values[arg]
        if isinstance(arg, list | tuple):
            return [self._value(a) for a in arg]
        return arg

    def _check(self, node: torch.fx.Node, value: Value, fake: torch.Tensor) -> None:
        expected = _sizes(fake)
        element = element_of(value, node.name)
        if shape_of(value) != expected or element != element_of_dtype(fake.dtype, node.name):
            raise ImportFailure(
                f"node {node.name} ({node.target}): built {_describe(value, node.name)}, "
                f"torch traced {list(expected)} {fake.dtype}"
            )

    def _result(self, value: object) -> SSAValue:
        assert isinstance(value, torch.fx.Node), value  # a partition returns its nodes
        result = self.values[value]
        assert not isinstance(result, tuple), value
        return self.b.tensor(result)


def _describe(value: Value, where: str) -> str:
    return f"{list(shape_of(value))} {element_of(value, where)}"


def _tensor_type(fake: object, where: str) -> TensorType[Attribute]:
    if not isinstance(fake, torch.Tensor) or fake.dtype not in NUMPY_DTYPES:
        raise ImportFailure(f"{where}: not a tensor graphfuse supports")
    return TensorType(element_of_dtype(fake.dtype, where), list(_sizes(fake)))


def constant_array(value: object) -> Array:
    """A constant (a tensor, or a Python scalar) as a NumPy array of its own, so later
    in-place changes to the tensor do not reach the compiled graph."""
    tensor = value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    array = tensor.cpu().numpy()
    if tensor.dtype not in NUMPY_DTYPES:
        return np.array(array, copy=True)
    return np.array(array, numpy_dtype(element_of_dtype(tensor.dtype, "constant")), copy=True)
