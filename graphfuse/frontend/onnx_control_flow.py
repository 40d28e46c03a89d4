"""ONNX control flow (If, Loop, Scan) flattened into the graph at import.

graphfuse's graph functions are single dataflow blocks, and with static shapes most
control flow in inference models is decided before run time:

- **If** whose condition is known takes that branch; one whose condition is computed, when
  both branches give values of the same types, computes both and selects (no side effects
  exist in ONNX graphs, so this is exact; the cost is running both branches);
- **Loop** whose trip count and conditions are known at import is unrolled (iteration by
  iteration its body is converted, so a condition computed from the iteration number folds);
- **Scan** runs over a static sequence length, so it is always unrolled.

The body of each iteration goes through the importer like any other nodes (`Inliner`), so
its ops fold, fuse and are checked as usual. A loop that would unroll past MAX_ITERATIONS,
or whose condition depends on run-time values, is refused in one line that says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from graphfuse.dialects import graph
from graphfuse.dialects.graph import shape_rules as rules
from graphfuse.frontend.onnx_builder import Builder, Value, element_of, i64_attr, shape_of
from graphfuse.frontend.onnx_inlining import Importing, inline_graph

MAX_ITERATIONS = 4096
"""The most iterations a Loop or Scan is unrolled to (each one adds its body's ops)."""


def _attribute(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def convert_if(
    importer: Importing, node: Any, inputs: Sequence[Value | None], label: str
) -> list[Value]:
    b = importer.builder
    condition = inputs[0]
    if condition is None:
        raise b.fail("If without a condition")
    then_branch, else_branch = _attribute(node, "then_branch"), _attribute(node, "else_branch")
    if not isinstance(condition, SSAValue):
        chosen = then_branch if bool(np.asarray(condition).reshape(-1)[0]) else else_branch
        return inline_graph(importer, chosen, [], label)
    taken = inline_graph(importer, then_branch, [], label + "/then")
    other = inline_graph(importer, else_branch, [], label + "/else")
    results: list[Value] = []
    for index, (a, c) in enumerate(zip(taken, other, strict=True)):
        if shape_of(a) != shape_of(c) or element_of(a, label) != element_of(c, label):
            b.node = label  # not the branch's last node
            raise b.fail(
                f"If's branches differ in output #{index} ({_type(a, label)} vs "
                f"{_type(c, label)}), so its condition must be known at import: "
                + b.must_be_constant(condition, "the condition")
            )
        flag = b.reshape(condition, [1] * len(shape_of(a)))
        if not isinstance(a, SSAValue) and not isinstance(c, SSAValue):
            a = b.tensor(a)
        results.append(b.op(graph.SelectOp, [flag, a, c], shape_of(a), element_of(a, label)))
    return results


def convert_loop(
    importer: Importing, node: Any, inputs: Sequence[Value | None], label: str
) -> list[Value]:
    b = importer.builder
    trip, condition, *carried = [*inputs, None, None][: max(len(inputs), 2)]
    body = _attribute(node, "body")
    for value, what in ((trip, "the trip count"), (condition, "the condition")):
        if isinstance(value, SSAValue):
            raise b.fail(f"graphfuse unrolls a Loop at import: {b.must_be_constant(value, what)}")
    limit = int(np.asarray(trip).reshape(-1)[0]) if trip is not None else None
    going = bool(np.asarray(condition).reshape(-1)[0]) if condition is not None else True
    state: list[Value] = [v for v in carried if v is not None]
    if len(body.output) < 1 + len(state) or len(body.input) != 2 + len(state):
        raise b.fail(
            f"Loop body takes {len(body.input)} inputs and gives {len(body.output)} outputs; "
            f"with {len(state)} loop-carried values it must take {2 + len(state)} and give "
            f"at least {1 + len(state)}"
        )
    scanned: list[list[Value]] = []
    iteration = 0
    while going and (limit is None or iteration < limit):
        if iteration >= MAX_ITERATIONS:
            raise b.fail(f"Loop runs more than {MAX_ITERATIONS} iterations: too many to unroll")
        counter = np.array(iteration, np.int64)
        outputs = inline_graph(
            importer, body, [counter, np.array(going), *state], f"{label}@{iteration}"
        )
        keep = outputs[0]
        if isinstance(keep, SSAValue):
            raise b.fail(
                "Loop's condition is computed at run time: graphfuse unrolls loops "
                "whose condition is known at import"
            )
        going = bool(np.asarray(keep).reshape(-1)[0])
        state = outputs[1 : 1 + len(state)]
        scanned.append(outputs[1 + len(state) :])
        iteration += 1
    count = len(body.output) - 1 - len(state)
    if count and not scanned:
        raise b.fail("Loop runs no iteration, so its scan outputs would be empty")
    stacked = [_stack(b, [s[i] for s in scanned], 0) for i in range(count)]
    return [*state, *stacked]


def convert_scan(
    importer: Importing, node: Any, inputs: Sequence[Value | None], label: str
) -> list[Value]:
    b = importer.builder
    body = _attribute(node, "body")
    scans = int(_attribute(node, "num_scan_inputs"))
    values = [v for v in inputs if v is not None]
    state, sequences = list(values[: len(values) - scans]), values[len(values) - scans :]
    in_axes = list(_attribute(node, "scan_input_axes", [0] * scans))
    in_directions = list(_attribute(node, "scan_input_directions", [0] * scans))
    out_count = len(body.output) - len(state)
    out_axes = list(_attribute(node, "scan_output_axes", [0] * out_count))
    out_directions = list(_attribute(node, "scan_output_directions", [0] * out_count))
    axes = [
        rules.normalize_axis(a, len(shape_of(s))) for a, s in zip(in_axes, sequences, strict=True)
    ]
    lengths = {shape_of(s)[a] for s, a in zip(sequences, axes, strict=True)}
    if len(lengths) != 1:
        raise b.fail(f"Scan inputs of different sequence lengths {sorted(lengths)}")
    length = lengths.pop()
    if length > MAX_ITERATIONS:
        raise b.fail(f"Scan over {length} steps: too many to unroll (at most {MAX_ITERATIONS})")
    scanned: list[list[Value]] = []
    for step in range(length):
        slices = [
            _take(b, s, length - 1 - step if reverse else step, axis)
            for s, axis, reverse in zip(sequences, axes, in_directions, strict=True)
        ]
        outputs = inline_graph(importer, body, [*state, *slices], f"{label}@{step}")
        state = outputs[: len(state)]
        scanned.append(outputs[len(state) :])
    results = list(state)
    for index in range(out_count):
        parts = [s[index] for s in scanned]
        if out_directions[index]:
            parts.reverse()
        rank = len(shape_of(parts[0])) + 1
        results.append(_stack(b, parts, rules.normalize_axis(out_axes[index], rank)))
    return results


def _type(value: Value, where: str) -> str:
    shape = "x".join(map(str, shape_of(value)))
    return f"tensor<{shape}{'x' if shape else ''}{element_of(value, where)}>"


def _take(b: Builder, x: Value, index: int, axis: int) -> Value:
    """x[..., index, ...] along `axis`, that axis removed."""
    shape = list(shape_of(x))
    if not isinstance(x, SSAValue):
        return np.take(x, index, axis=axis)
    starts = [index if i == axis else 0 for i in range(len(shape))]
    sizes = [1 if i == axis else d for i, d in enumerate(shape)]
    sliced = b.op(
        graph.SliceOp,
        [x],
        sizes,
        starts=_i64s(starts),
        strides=_i64s([1] * len(shape)),
    )
    return b.reshape(sliced, [d for i, d in enumerate(shape) if i != axis])


def _stack(b: Builder, parts: Sequence[Value], axis: int) -> Value:
    """numpy.stack(parts, axis) as graph ops (or NumPy when every part is known)."""
    if all(not isinstance(p, SSAValue) for p in parts):
        return np.stack([np.asarray(p) for p in parts], axis=axis)
    shape = list(shape_of(parts[0]))
    expanded = [b.reshape(p, [*shape[:axis], 1, *shape[axis:]]) for p in parts]
    if len(expanded) == 1:
        return expanded[0]
    first = next(p for p in expanded if isinstance(p, SSAValue))
    expanded = [b.same_element(first, p)[1] for p in expanded]
    out = [*shape[:axis], len(parts), *shape[axis:]]
    return b.op(graph.ConcatOp, expanded, out, axis=i64_attr(axis))


def _i64s(values: Sequence[int]) -> Any:
    from graphfuse.frontend.onnx_builder import i64_array

    return i64_array(values)
