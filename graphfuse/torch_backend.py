"""`torch.compile(model, backend="graphfuse")`: graphfuse as a TorchDynamo backend.

Registered through the `torch_dynamo_backends` entry point. Dynamo's graph is traced to
core ATen by AOTAutograd (inference: parameters and buffers are frozen into the compiled
graphs as constants); the torch.fx front end (graphfuse.frontend.torch_fx) splits it into
the partitions graphfuse supports and imports each to the graph dialect; this module
compiles them and makes the fx graph call each compiled function on the tensors' own
memory. Everything else runs eagerly. A graph Dynamo made dynamic is compiled again for
each new set of shapes. It sits beside the compiler (it compiles and runs), above the
front end, which may not import it. docs/torch-compile.md says what maps and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, cast

import torch
from torch._functorch.aot_autograd import aot_module_simplified
from torch._subclasses.fake_tensor import unset_fake_temporarily
from xdsl.utils.exceptions import DiagnosticException

from graphfuse.compiler import CompileOptions
from graphfuse.compiler import compile as compile_graph
from graphfuse.frontend.onnx_builder import Array
from graphfuse.frontend.torch_fx.fx_import import constant_array, placeholders
from graphfuse.frontend.torch_fx.partition import Partition, SplitGraph, frozen_inputs, split
from graphfuse.frontend.torch_fx.typed_torch import core_aten_table, from_numpy
from graphfuse.parsing import GraphfuseError

Compiled = Callable[..., Any]
"""What a Dynamo backend returns: the graph's replacement, called with its inputs."""


class EagerFallbackWarning(UserWarning):
    """Part or all of a graph runs eagerly instead of through graphfuse (and why)."""


def _as_array(tensor: torch.Tensor) -> Array:
    """The tensor's memory as a NumPy array (copied only when not contiguous)."""
    if tensor.requires_grad or not tensor.is_contiguous():
        tensor = tensor.detach().contiguous()
    return tensor.numpy()


def _kernel(name: str, function: Callable[..., object], returns_tuple: bool) -> Compiled:
    """A plain function calling the compiled `function` on tensors, named `name` for fx's
    generated code. It is on every call's path, so it does no more than convert: the
    arrays share the tensors' memory both ways."""
    # The compiled function returns a tuple exactly when the partition does.
    several = cast(Callable[..., tuple[Array, ...]], function)
    one = cast(Callable[..., Array], function)

    def tuple_kernel(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple([from_numpy(r) for r in several(*[_as_array(t) for t in tensors])])

    def kernel(*tensors: torch.Tensor) -> torch.Tensor:
        return from_numpy(one(*[_as_array(t) for t in tensors]))

    chosen = tuple_kernel if returns_tuple else kernel
    chosen.__name__ = chosen.__qualname__ = name
    return chosen


@dataclass
class GraphfuseBackend:
    """A Dynamo backend with its compile options; `kernels` and `eager` record, per graph
    compiled, the partitions graphfuse computes and the ATen ops left to eager."""

    options: CompileOptions = field(default_factory=CompileOptions)
    kernels: list[str] = field(default_factory=list[str])
    eager: list[str] = field(default_factory=list[str])

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Compiled:
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
        self, gm: torch.fx.GraphModule, args: Sequence[object], frozen: Sequence[int]
    ) -> Compiled:
        """`gm` specialised to the shapes of `args` (real tensors and ints)."""
        lifted = [
            *dict(gm.named_parameters(remove_duplicate=False)).values(),
            *dict(gm.named_buffers(remove_duplicate=False)).values(),
        ]

        # Read now: AOTAutograd calls `inference` under its fake tensor mode.
        weights = {i: constant_array(t) for i, t in enumerate(lifted)}
        weights |= {len(lifted) + i: constant_array(args[i]) for i in frozen}

        def inference(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Compiled:
            # AOTAutograd's inference graph takes the lifted weights, then `args`.
            count = len(placeholders(gm)) == len(lifted) + len(args)
            with unset_fake_temporarily():
                return self.partition(gm, weights if count else {})

        return aot_module_simplified(
            gm, list(args), fw_compiler=inference, decompositions=core_aten_table()
        )

    def partition(self, aten: torch.fx.GraphModule, constants: Mapping[int, Array]) -> Compiled:
        """The ATen graph with its supported partitions compiled by graphfuse."""
        graph = split(aten, constants)
        self.eager += graph.eager
        for partition in graph.partitions:
            self._compile(graph, partition)
        # Its forward, not the module: a module's __call__ costs more than the rest of a
        # small graph's wrapping (hooks, the error handler of fx's generated code).
        return graph.finish().forward

    def _compile(self, graph: SplitGraph, partition: Partition) -> None:
        """Replace the call of one partition by its graphfuse kernel (on failure, warn and
        leave it eager)."""
        try:
            function = compile_graph(partition.import_module(), options=self.options, reuse=True)
        except (GraphfuseError, DiagnosticException) as error:
            warnings.warn(
                f"graphfuse: {partition.name} runs eagerly: {error}",
                EagerFallbackWarning,
                stacklevel=2,
            )
            return
        graph.install(partition, _kernel(partition.name, function, partition.returns_tuple))
        self.kernels.append(f"{partition.name}: {', '.join(partition.ops)}")


class _PerShape:
    """A graph with symbolic shapes, compiled once per set of concrete shapes it meets."""

    def __init__(
        self, backend: GraphfuseBackend, gm: torch.fx.GraphModule, frozen: Sequence[int]
    ) -> None:
        self.backend = backend
        self.gm = gm
        self.frozen = frozen
        self.compiled: dict[tuple[object, ...], Compiled] = {}

    def __call__(self, *args: object) -> object:
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
    example_inputs: Sequence[object],
    options: Mapping[str, Any] | None = None,
    mode: str | None = None,
) -> Compiled:
    """The backend torch.compile finds as "graphfuse"; `options` are CompileOptions
    fields (`torch.compile(m, backend="graphfuse", options={"threads": 2})`)."""
    return GraphfuseBackend(options_from(options))(gm, example_inputs)
