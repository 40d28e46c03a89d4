"""Random valid ONNX models: the builder the op recipes write into, and whole-model assembly.

Each node is checked on its own as it is added, by ONNX's per-node shape inference: a
recipe proposes attributes that are plausible, the schema decides, and a node whose output
shapes are not fully static and positive is dropped. So recipes stay short and shapes are
never computed twice. A finished model must pass `onnx.checker.check_model(full_check=True)`
and run in onnxruntime; one that does not is not a test case and is generated again.
Values stay bounded (recipes guard exp, log, division), so outputs are finite and a
difference is a bug rather than rounding of huge numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
OPSETS = (17, 18, 18, 20, 23, 24)
"""Opsets a model may import: 17 (LayerNormalization), 18 (axes as inputs), 20 (Gelu),
23 and 24 (Attention)."""
IR_VERSION = 9
"""The IR version of a model, or the lowest its opset needs when that is higher."""
MAX_ELEMENTS = 60_000
"""Largest tensor a recipe may make: keeps each case a fraction of a second to run."""
SIZES = (1, 1, 2, 3, 3, 4, 5, 7, 8, 16, 127)


@dataclass
class Tensor:
    """A value of the graph being built, with its static type."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Case:
    """One test: a model and the arrays for its graph inputs, by name."""

    model: Any
    feeds: dict[str, Array]
    seed: int = 0


@dataclass
class GraphBuilder:
    """The nodes, initializers and inputs of a model being generated, and its typed values."""

    rng: np.random.Generator
    opset: int
    nodes: list[Any] = field(default_factory=lambda: [])
    initializers: dict[str, Array] = field(default_factory=lambda: {})
    inputs: list[Tensor] = field(default_factory=lambda: [])
    feeds: dict[str, Array] = field(default_factory=lambda: {})
    values: list[Tensor] = field(default_factory=lambda: [])
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, array: Array | float | int | Sequence[Any], dtype: Any = None) -> str:
        """An initializer holding `array`; returns its name."""
        data = np.asarray(array, dtype=dtype)
        name = self.fresh("c")
        self.initializers[name] = data
        return name

    def input(self, dtype: Any, shape: Sequence[int], high: int = 4) -> Tensor:
        """A new graph input with random contents (ints in [-high, high), for int64)."""
        tensor = Tensor(self.fresh("in"), np.dtype(dtype), tuple(shape))
        self.inputs.append(tensor)
        self.values.append(tensor)
        self.feeds[tensor.name] = random_array(self.rng, tensor.dtype, tensor.shape, high)
        return tensor

    def node(
        self, op_type: str, inputs: Sequence[str], outputs: int | Sequence[bool] = 1, **attrs: Any
    ) -> list[Tensor] | None:
        """Add a node if ONNX's shape inference gives each named output a static shape.
        `outputs` counts the outputs, or says which to name: an optional output left
        unnamed (False) is one the node does not compute (Attention's present_key)."""
        from onnx import helper

        wanted = [True] * outputs if isinstance(outputs, int) else list(outputs)
        names = [self.fresh("t") if named else "" for named in wanted]
        proto = helper.make_node(op_type, list(inputs), names, name=self.fresh("n"), **attrs)
        typed = self._infer(proto)
        if typed is None:
            return None
        self.nodes.append(proto)
        self.values.extend(typed)
        return typed

    def _infer(self, proto: Any) -> list[Tensor] | None:
        from onnx import defs, helper, numpy_helper, shape_inference

        known = {t.name: t for t in self.values}
        used = [n for n in proto.input if n]
        types = {
            n: _type_proto(known[n].dtype, known[n].shape)
            if n in known
            else _type_proto(self.initializers[n].dtype, self.initializers[n].shape)
            for n in used
        }
        data = {
            n: numpy_helper.from_array(self.initializers[n], n)
            for n in used
            if n in self.initializers
        }
        try:
            schema = defs.get_schema(proto.op_type, self.opset)
            inferred = shape_inference.infer_node_outputs(
                schema, proto, types, data, opset_imports=[helper.make_opsetid("", self.opset)]
            )
        except Exception:  # noqa: BLE001 - any refusal of the schema means "not this node"
            return None
        return _static_outputs(proto, inferred)

    def pick(self, accept: Callable[[Tensor], bool]) -> Tensor | None:
        """A value that `accept`s, mostly a recent one (as layers read the layer before)."""
        candidates = [t for t in self.values if accept(t)]
        if not candidates:
            return None
        recent = candidates[-6:]
        pool = recent if self.rng.random() < 0.8 else candidates
        return pool[int(self.rng.integers(len(pool)))]

    def float_value(self, min_rank: int = 0, max_rank: int = 5) -> Tensor:
        """A float32 value of rank in range, or a new input when there is none."""
        found = self.pick(lambda t: t.dtype == np.float32 and min_rank <= t.rank <= max_rank)
        if found is not None and self.rng.random() < 0.9:
            return found
        lowest = min_rank if self.rng.random() < 0.05 else max(min_rank, 1)
        rank = int(self.rng.integers(lowest, min(max_rank, 4) + 1))
        return self.input(np.float32, self.shape(rank))

    def shape(self, rank: int) -> tuple[int, ...]:
        """A random shape, small enough that every recipe stays under MAX_ELEMENTS."""
        dims = [int(self.rng.choice(SIZES)) for _ in range(rank)]
        while np.prod(dims) > 4096:
            dims[int(np.argmax(dims))] = int(self.rng.choice(SIZES[:8]))
        return tuple(dims)


def random_array(
    rng: np.random.Generator, dtype: np.dtype[Any], shape: Sequence[int], high: int
) -> Array:
    """Inputs: normal floats, small ints, fair booleans."""
    if dtype == np.bool_:
        return rng.random(tuple(shape)) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-high, high, tuple(shape)).astype(dtype)
    return rng.standard_normal(tuple(shape)).astype(dtype)


def _type_proto(dtype: np.dtype[Any], shape: Sequence[int]) -> Any:
    from onnx import helper

    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(dtype), list(shape))


def _static_outputs(proto: Any, inferred: dict[str, Any]) -> list[Tensor] | None:
    from onnx import helper

    outputs: list[Tensor] = []
    for name in filter(None, proto.output):
        if name not in inferred or not inferred[name].tensor_type.HasField("shape"):
            return None
        tensor_type = inferred[name].tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor_type.shape.dim]
        if any(d < 1 for d in dims) or int(np.prod(dims)) > MAX_ELEMENTS:
            return None
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        outputs.append(Tensor(name, dtype, tuple(dims)))
    return outputs


# ---- whole models -----------------------------------------------------------------------


def to_model(b: GraphBuilder, outputs: Sequence[Tensor]) -> Any:
    """The builder's nodes as a ModelProto with `outputs` as the graph outputs."""
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        b.nodes,
        "fuzz",
        [_value_info(t) for t in b.inputs],
        [_value_info(t) for t in outputs],
        [numpy_helper.from_array(a, n) for n, a in b.initializers.items()],
    )
    opsets = [helper.make_opsetid("", b.opset)]
    ir_version = max(IR_VERSION, helper.find_min_ir_version_for(opsets))
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def _value_info(t: Tensor) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(
        t.name, helper.np_dtype_to_tensor_dtype(t.dtype), list(t.shape)
    )


def choose_outputs(b: GraphBuilder) -> list[Tensor]:
    """The last value, and sometimes others: interior values still read inside (an output
    also used inside), or leaves; the leaves left out are dead code."""
    produced = [t for t in b.values if t not in b.inputs]
    outputs = [produced[-1]]
    extra = int(b.rng.integers(0, 4))
    for _ in range(extra):
        choice = produced[int(b.rng.integers(len(produced)))]
        if choice not in outputs:
            outputs.append(choice)
    return outputs


def onnxruntime_outputs(model: Any, feeds: dict[str, Array]) -> list[Array]:
    """The model's outputs as onnxruntime computes them, unoptimised, on one thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return [np.asarray(v) for v in session.run(None, feeds)]


def is_valid(model: Any, feeds: dict[str, Array]) -> bool:
    """Passes the full ONNX checker and runs in onnxruntime with finite float outputs."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        results = onnxruntime_outputs(model, feeds)
    except Exception:  # noqa: BLE001 - checker and onnxruntime raise many kinds
        return False
    return all(r.dtype.kind != "f" or bool(np.isfinite(r).all()) for r in results)


def generate(seed: int, min_nodes: int = 5, max_nodes: int = 60, attempts: int = 20) -> Case | None:
    """A valid random model and its inputs from `seed` (the same seed, the same case)."""
    from graphfuse.testing.fuzz.onnx_recipes import add_random_node

    rng = np.random.default_rng(seed)
    for _ in range(attempts):
        b = GraphBuilder(rng, int(rng.choice(OPSETS)))
        target = int(rng.integers(min_nodes, max_nodes + 1))
        tries = 0
        while len(b.nodes) < target and tries < 20 * target:
            add_random_node(b)
            tries += 1
        if not b.nodes or not b.inputs:
            continue
        model = to_model(b, choose_outputs(b))
        if is_valid(model, b.feeds):
            return Case(model, b.feeds, seed)
    return None
