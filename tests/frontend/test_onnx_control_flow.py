"""ONNX If, Loop and Scan, flattened at import, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import model, onnxruntime_outputs

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
node = helper.make_node
value = helper.make_tensor_value_info


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _compiled_matches(built: object, inputs: dict[str, np.ndarray], **kwargs: object) -> None:
    expected = onnxruntime_outputs(built, inputs)  # type: ignore[arg-type]
    module = from_onnx(built, **kwargs)  # type: ignore[arg-type]
    arguments = [a for n, a in inputs.items() if n not in kwargs.get("constants", {})]  # type: ignore[operator]
    got = graphfuse.compile(module)(*arguments)
    got = got if isinstance(got, tuple) else (got,)
    for index, (actual, want) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-5, err_msg=f"#{index}")


def _branches() -> tuple[object, object]:
    then = helper.make_graph(
        [node("Mul", ["x", "two"], ["t"])], "then", [], [value("t", F, [3, 4])]
    )
    other = helper.make_graph([node("Neg", ["x"], ["e"])], "else", [], [value("e", F, [3, 4])])
    return then, other


@pytest.mark.parametrize("flag", [True, False])
def test_if_on_a_known_condition_takes_one_branch(flag: bool) -> None:
    x = _rand(3, 4)
    then, other = _branches()
    built = model(
        [node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
        {"x": x},
        {"y": (F, [3, 4])},
        {"cond": np.array(flag), "two": np.array(2.0, np.float32)},
    )
    module = from_onnx(built)
    assert ("graph.neg" in str(module)) != flag  # the other branch is gone
    _compiled_matches(built, {"x": x})


def test_if_on_a_computed_condition_selects_between_both_branches() -> None:
    x = _rand(3, 4)
    then, other = _branches()
    nodes = [
        node("ReduceSum", ["x"], ["total"], keepdims=0),
        node("Greater", ["total", "zero"], ["cond"]),
        node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
    ]
    inits = {"two": np.array(2.0, np.float32), "zero": np.array(0.0, np.float32)}
    built = model(nodes, {"x": x}, {"y": (F, [3, 4])}, inits)
    _compiled_matches(built, {"x": x})
    _compiled_matches(built, {"x": -x})


def _accumulating_loop() -> object:
    """acc += x * i for i in range(trip count); also every partial sum (a scan output)."""
    body = helper.make_graph(
        [
            node("Cast", ["i"], ["fi"], to=F),
            node("Mul", ["x", "fi"], ["step"]),
            node("Add", ["acc", "step"], ["acc_out"]),
            node("Identity", ["keep"], ["keep_out"]),
            node("Identity", ["acc_out"], ["partial"]),
        ],
        "body",
        [value("i", I64, []), value("keep", B, []), value("acc", F, [2, 3])],
        [value("keep_out", B, []), value("acc_out", F, [2, 3]), value("partial", F, [2, 3])],
    )
    return model(
        [node("Loop", ["trip", "", "init"], ["acc_final", "partials"], body=body)],
        {"x": _rand(2, 3), "trip": np.array(4, np.int64)},
        {"acc_final": (F, [2, 3]), "partials": (F, [4, 2, 3])},
        {"init": np.zeros((2, 3), np.float32)},
    )


def test_loop_with_a_trip_count_bound_at_import_is_unrolled() -> None:
    built = _accumulating_loop()
    x, trip = _rand(2, 3), np.array(4, np.int64)
    with pytest.raises(ImportFailure, match=r"--constant trip=") as info:
        from_onnx(built)
    assert "the trip count comes from graph input 'trip'" in str(info.value)
    _compiled_matches(built, {"x": x, "trip": trip}, constants={"trip": trip})


def test_scan_is_unrolled_over_its_static_sequence() -> None:
    """A running sum over axis 0 of the scan input, reversed output direction."""
    body = helper.make_graph(
        [node("Add", ["sum", "row"], ["sum_out"]), node("Mul", ["sum_out", "row"], ["out"])],
        "body",
        [value("sum", F, [3]), value("row", F, [3])],
        [value("sum_out", F, [3]), value("out", F, [3])],
    )
    x, init = _rand(5, 3), _rand(3, seed=1)
    built = model(
        [
            node(
                "Scan",
                ["init", "x"],
                ["final", "ys"],
                body=body,
                num_scan_inputs=1,
                scan_output_directions=[1],
            )
        ],
        {"init": init, "x": x},
        {"final": (F, [3]), "ys": (F, [5, 3])},
    )
    _compiled_matches(built, {"init": init, "x": x})


def test_malformed_control_flow_is_one_line() -> None:
    """A missing branch, a body with too few outputs, an empty condition: one line naming
    the node, never a traceback."""
    x = _rand(3, 4)
    then, _ = _branches()
    no_else = model(
        [node("If", ["cond"], ["y"], then_branch=then)],
        {"x": x},
        {"y": (F, [3, 4])},
        {"cond": np.array(False), "two": np.array(2.0, np.float32)},
        check=False,
    )
    empty_condition = model(
        [node("If", ["cond"], ["y"], then_branch=then, else_branch=then)],
        {"x": x},
        {"y": (F, [3, 4])},
        {"cond": np.zeros((0,), np.bool_), "two": np.array(2.0, np.float32)},
        check=False,
    )
    short = helper.make_graph(
        [node("Identity", ["keep"], ["keep_out"])],
        "body",
        [value("i", I64, []), value("keep", B, []), value("acc", F, [3, 4])],
        [value("keep_out", B, [])],
    )
    short_loop = model(
        [node("Loop", ["trip", "", "x"], ["y"], body=short)],
        {"x": x},
        {"y": (F, [3, 4])},
        {"trip": np.array(2, np.int64)},
        check=False,
    )
    for built, reason in [
        (no_else, "malformed node"),
        (empty_condition, "malformed node"),
        (short_loop, "Loop body takes 3 inputs and gives 1 outputs"),
    ]:
        with pytest.raises(ImportFailure) as info:
            from_onnx(built)
        assert reason in str(info.value) and "\n" not in str(info.value), str(info.value)
        assert str(info.value).startswith("node ")


def test_old_hardmax_flattens_at_its_axis() -> None:
    """Hardmax before opset 13 works on the input flattened at `axis`; the converter keeps
    the attribute, so the importer writes the flattening out first."""
    x = _rand(2, 3, 4)
    for axis in (0, 1, 2):
        built = model(
            [node("Hardmax", ["x"], ["y"], axis=axis)], {"x": x}, {"y": (F, [2, 3, 4])}, opset=11
        )
        _compiled_matches(built, {"x": x})
