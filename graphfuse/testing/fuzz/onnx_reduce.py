"""Shrinking a failing ONNX case by delta debugging over its nodes (Zeller's ddmin).

A candidate drops a set of nodes. Every value a kept node still reads from a dropped one
becomes a graph input fed with the value it had in the original case (onnxruntime
computes all intermediates once), or an initializer where the original computed it from
initializers alone (graphfuse folds those at import, a path of its own), so the kept nodes
see the same numbers and the graph stays valid by construction; graph outputs computed
by dropped nodes are dropped too (the last kept node's results stand in when none is
left). A candidate is kept when the oracle still fails the same way (`still_fails`; the
driver: same verdict and category). Then outputs are dropped one at a time; unused
inputs and initializers go with every candidate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import Array, Case

Predicate = Callable[[Case], bool]


class Reducer:
    """ddmin over the nodes of one case, within a budget of oracle calls and seconds."""

    def __init__(
        self, case: Case, still_fails: Predicate, max_tests: int = 200, seconds: float = 600
    ) -> None:
        self.best = case
        self.still_fails = still_fails
        self.values = all_values(case)
        self.tests_left = max_tests
        self.deadline = time.monotonic() + seconds

    def run(self) -> Case:
        """The smallest failing case found."""
        self._ddmin()
        self._drop_outputs()
        self._ddmin()
        return self.best

    def _budget(self) -> bool:
        return self.tests_left > 0 and time.monotonic() < self.deadline

    def _try(self, candidate: Case | None) -> bool:
        if candidate is None or not self._budget():
            return False
        self.tests_left -= 1
        if self.still_fails(candidate):
            self.best = candidate
            return True
        return False

    def _ddmin(self) -> None:
        chunks = 2
        while self._budget():
            count = len(self.best.model.graph.node)
            if count <= 1:
                return
            chunks = min(chunks, count)
            if self._remove_some_chunk(count, chunks):
                chunks = max(chunks - 1, 2)
            elif chunks >= count:
                return
            else:
                chunks = min(2 * chunks, count)

    def _remove_some_chunk(self, count: int, chunks: int) -> bool:
        """Try dropping each of `chunks` slices of the nodes, last first (late nodes are
        mostly consumers, so dropping them first leaves fewer inputs to promote)."""
        bounds = np.linspace(0, count, chunks + 1).astype(int)
        for start, end in reversed(list(zip(bounds[:-1], bounds[1:], strict=True))):
            if self._try(without_nodes(self.best, self.values, range(start, end))):
                return True
        return False

    def _drop_outputs(self) -> None:
        index = 0
        while index < len(self.best.model.graph.output) and self._budget():
            if not self._try(without_output(self.best, index)):
                index += 1


def all_values(case: Case) -> Values:
    """Every tensor of the case as onnxruntime computes it, by name (inputs included)."""
    import onnx
    from onnx import shape_inference

    from graphfuse.testing.fuzz.onnx_graphs import onnxruntime_outputs

    inferred = shape_inference.infer_shapes(case.model)
    known = {v.name: v for v in inferred.graph.value_info}
    known.update({v.name: v for v in inferred.graph.output})
    names = [n for node in case.model.graph.node for n in node.output if n in known]
    probe = onnx.ModelProto()
    probe.CopyFrom(case.model)
    del probe.graph.output[:]
    probe.graph.output.extend(known[n] for n in names)
    values = dict(zip(names, onnxruntime_outputs(probe, case.feeds), strict=True))
    values.update(case.feeds)
    return Values(values, constant_names(case.model.graph))


class Values(dict[str, Array]):
    """Every tensor's value by name, and which of them are constants (computed from
    initializers alone)."""

    def __init__(self, values: dict[str, Array], constants: set[str]) -> None:
        super().__init__(values)
        self.constants = constants


def constant_names(graph: Any) -> set[str]:
    known = {t.name for t in graph.initializer}
    for node in graph.node:
        if all(not i or i in known for i in node.input):
            known.update(node.output)
    return known


def without_nodes(case: Case, values: Values, drop: Sequence[int]) -> Case | None:
    """The case without the nodes at `drop`; what they fed to kept nodes becomes inputs."""
    dropped = set(drop)
    graph = case.model.graph
    kept = [n for i, n in enumerate(graph.node) if i not in dropped]
    produced = {o for n in kept for o in n.output}
    outputs = [o for o in graph.output if o.name in produced or o.name in case.feeds]
    if not outputs and kept:
        # The consumers that made the outputs are gone: the last kept node's results are.
        outputs = [_value_info(n, values[n]) for n in kept[-1].output if n in values]
    if not outputs:
        return None
    return rebuild(case, kept, outputs, values)


def without_output(case: Case, index: int) -> Case | None:
    graph = case.model.graph
    if len(graph.output) < 2:
        return None
    outputs = [o for i, o in enumerate(graph.output) if i != index]
    return rebuild(case, list(graph.node), outputs, dict(case.feeds))


def rebuild(case: Case, nodes: list[Any], outputs: list[Any], values: dict[str, Array]) -> Case:
    """A model of `nodes` and `outputs`: inputs are what the nodes read and nobody makes
    (fed from `values`), initializers only those read; dead nodes stay (they may matter)."""
    from onnx import helper, numpy_helper

    graph = case.model.graph
    initializers = {t.name: t for t in graph.initializer}
    produced = {o for n in nodes for o in n.output}
    needed = [i for n in nodes for i in n.input] + [o.name for o in outputs]
    inputs: dict[str, Any] = {}
    for name in needed:
        if name and name not in produced and name not in initializers and name not in inputs:
            inputs[name] = _value_info(name, values[name])
    constants = values.constants if isinstance(values, Values) else set[str]()
    for name in [n for n in inputs if n in constants]:
        initializers[name] = numpy_helper.from_array(values[name], name)
        del inputs[name]
    feeds = {name: values[name] for name in inputs}
    used_initializers = [initializers[n] for n in dict.fromkeys(needed) if n in initializers]
    new_graph = helper.make_graph(
        nodes, graph.name, list(inputs.values()), outputs, used_initializers
    )
    model = helper.make_model(
        new_graph, opset_imports=list(case.model.opset_import), ir_version=case.model.ir_version
    )
    return Case(model, feeds, case.seed)


def _value_info(name: str, value: Array) -> Any:
    from onnx import helper

    dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, dtype, list(value.shape))


def node_list(case: Case) -> str:
    """The op types of a case's nodes in order, for one-line descriptions."""
    return " ".join(n.op_type for n in case.model.graph.node)
