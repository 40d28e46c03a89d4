"""`torch.compile(model, backend="graphfuse")`: graphfuse as a TorchDynamo backend.

Registered through the `torch_dynamo_backends` entry point. Dynamo's graph is traced to
core ATen by AOTAutograd (inference: parameters and buffers are frozen into the compiled
graphs as constants), split by torch.fx's CapabilityBasedPartitioner into partitions of
the ops aten_table maps, and each partition is imported (fx_import), compiled by
graphfuse and called from the fx graph on the tensors' own memory; everything else runs
eagerly. A graph Dynamo made dynamic is compiled again for each new set of shapes.
This module sits above the compiler (it compiles and runs), unlike the importers beside it.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from xdsl.utils.exceptions import DiagnosticException

from graphfuse.compiler import CompileOptions
from graphfuse.compiler import compile as compile_graph
from graphfuse.frontend.torch_fx.fx_import import from_fx, placeholders
from graphfuse.frontend.torch_fx.support import NO_WORK, AtenSupport
from graphfuse.parsing import GraphfuseError

Array = np.ndarray[Any, Any]
Compiled = Callable[..., Any]
PREFIX = "graphfuse_"
"""Names of the fx submodules graphfuse computes."""


class EagerFallbackWarning(UserWarning):
    """Part or all of a graph runs eagerly instead of through graphfuse (and why)."""


def _as_array(tensor: torch.Tensor) -> Array:
    """The tensor's memory as a NumPy array (copied only when not contiguous)."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return tensor.numpy()


class GraphfuseKernel(torch.nn.Module):
    """A compiled partition called from the fx graph: tensors in, tensors out."""

    def __init__(self, compiled: Compiled, tuple_result: bool) -> None:
        super().__init__()
        self.compiled = compiled
        self.tuple_result = tuple_result

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        result = self.compiled(*[_as_array(t) for t in tensors])
        if self.tuple_result:
            return tuple(torch.from_numpy(r) for r in result)
        return torch.from_numpy(result)


@dataclass
class GraphfuseBackend:
    """A Dynamo backend with its compile options; `kernels` and `eager` record, per graph
    compiled, the partitions graphfuse computes and the ATen ops left to eager."""

    options: CompileOptions = field(default_factory=CompileOptions)
    kernels: list[str] = field(default_factory=list[str])
    eager: list[str] = field(default_factory=list[str])

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Compiled:
        if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs
        ):
            warnings.warn(
                "graphfuse compiles inference only and this graph needs gradients: it runs "
                "eagerly (call the model under torch.no_grad() or torch.inference_mode())",
                EagerFallbackWarning,
                stacklevel=2,
            )
            return gm.forward
        frozen = frozen_inputs(gm)
        if any(isinstance(a, torch.SymInt) for a in example_inputs):
            return _PerShape(self, gm, frozen)
        return self.compile_static(gm, example_inputs, frozen)

    def compile_static(
        self, gm: torch.fx.GraphModule, args: Sequence[Any], frozen: Sequence[int]
    ) -> Compiled:
        """`gm` specialised to the shapes of `args` (real tensors and ints)."""
        lifted = [
            *dict(gm.named_parameters(remove_duplicate=False)).values(),
            *dict(gm.named_buffers(remove_duplicate=False)).values(),
        ]

        # Read now: AOTAutograd calls `inference` under its fake tensor mode.
        weights = {i: _constant(t) for i, t in enumerate(lifted)}
        weights |= {len(lifted) + i: _constant(args[i]) for i in frozen}

        def inference(aten: torch.fx.GraphModule, fakes: Sequence[Any]) -> Compiled:
            # AOTAutograd's inference graph takes the lifted weights, then `args`.
            count = len(placeholders(aten)) == len(lifted) + len(args)
            with unset_fake_temporarily():
                return self.partition(aten, weights if count else {})

        return aot_module_simplified(
            gm, list(args), fw_compiler=inference, decompositions=core_aten_decompositions()
        )

    def partition(self, aten: torch.fx.GraphModule, constants: Mapping[int, Array]) -> Compiled:
        """The ATen graph with its supported partitions compiled by graphfuse."""
        inputs = placeholders(aten)
        partitioner = CapabilityBasedPartitioner(
            aten, AtenSupport({inputs[i] for i in constants}), allows_single_node_partition=True
        )
        partitions = [p for p in partitioner.propose_partitions() if _does_work(p.nodes)]
        taken = {node for p in partitions for node in p.nodes}
        self.eager += [
            str(n.target) for n in aten.graph.nodes if n.op == "call_function" and n not in taken
        ]
        if not partitions:
            return aten
        fused = partitioner.fuse_partitions(partitions, prefix=PREFIX)
        # Fusing copies the graph's nodes (a topological sort): placeholders by position.
        inputs = placeholders(fused)
        frozen = {inputs[i]: constant for i, constant in constants.items()}
        for node in list(fused.graph.nodes):
            if node.op == "call_module" and str(node.target).startswith(PREFIX):
                self._compile_partition(fused, node, frozen)
        fused.recompile()
        return fused

    def _compile_partition(
        self,
        fused: torch.fx.GraphModule,
        node: torch.fx.Node,
        frozen: Mapping[torch.fx.Node, Array],
    ) -> None:
        """Replace the call of one partition by its graphfuse kernel (on failure, warn and
        leave it eager)."""
        name = str(node.target)
        sub = fused.get_submodule(name)
        assert isinstance(sub, torch.fx.GraphModule)
        constants: dict[int, Array] = {}
        runtime: list[torch.fx.Node] = []
        for index, arg in enumerate(node.args):
            assert isinstance(arg, torch.fx.Node)
            if arg in frozen:
                constants[index] = frozen[arg]
            elif arg.op == "get_attr":
                constants[index] = _constant(getattr(fused, str(arg.target)))
            else:
                runtime.append(arg)
        try:
            kernel = compile_graph(from_fx(sub, constants), options=self.options)
        except (GraphfuseError, DiagnosticException) as error:
            warnings.warn(
                f"graphfuse: {name} runs eagerly: {error}", EagerFallbackWarning, stacklevel=2
            )
            return
        output = next(n for n in sub.graph.nodes if n.op == "output")
        fused.delete_submodule(name)
        fused.add_submodule(name, GraphfuseKernel(kernel, isinstance(output.args[0], tuple)))
        node.args = tuple(runtime)
        self.kernels.append(f"{name}: {', '.join(_op_names(sub))}")


def _constant(value: Any) -> Array:
    tensor = value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    return np.array(tensor.cpu().numpy(), copy=True)


def _op_names(gm: torch.fx.GraphModule) -> list[str]:
    return [
        str(n.target).removeprefix("aten.")
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem
    ]


def _does_work(nodes: Mapping[torch.fx.Node, Any] | Sequence[torch.fx.Node]) -> bool:
    """Whether a partition computes anything (not only views, copies and getitems)."""
    return any(n.target not in NO_WORK and n.target is not operator.getitem for n in nodes)


def frozen_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of Dynamo's graph inputs that are a module's parameters or buffers."""
    found: list[int] = []
    for index, node in enumerate(placeholders(gm)):
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        name = source.name if source is not None else ""
        if "._parameters[" in name or "._buffers[" in name:
            found.append(index)
    return found


class _PerShape:
    """A graph with symbolic shapes, compiled once per set of concrete shapes it meets."""

    def __init__(
        self, backend: GraphfuseBackend, gm: torch.fx.GraphModule, frozen: Sequence[int]
    ) -> None:
        self.backend = backend
        self.gm = gm
        self.frozen = frozen
        self.compiled: dict[tuple[Any, ...], Compiled] = {}

    def __call__(self, *args: Any) -> Any:
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        found = self.compiled.get(key)
        if found is None:
            found = self.backend.compile_static(self.gm, args, self.frozen)
            self.compiled[key] = found
        return found(*args)


OPTION_NAMES = tuple(f.name for f in fields(CompileOptions))


def options_from(given: Mapping[str, Any] | None) -> CompileOptions:
    """torch.compile's `options` dict as CompileOptions (unknown names refused)."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(OPTION_NAMES))
    if unknown:
        raise GraphfuseError(
            f"unknown graphfuse option {unknown[0]!r} (options: {', '.join(OPTION_NAMES)})"
        )
    return CompileOptions(**given)


def graphfuse_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    mode: str | None = None,
) -> Compiled:
    """The backend torch.compile finds as "graphfuse"; `options` are CompileOptions
    fields (`torch.compile(m, backend="graphfuse", options={"threads": 2})`)."""
    return GraphfuseBackend(options_from(options))(gm, example_inputs)
