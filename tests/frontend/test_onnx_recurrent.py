"""ONNX RNN, GRU and LSTM imported (unrolled over the sequence) and run equal onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphfuse
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.frontend.onnx_builder import ImportFailure
from graphfuse.frontend.onnx_import import from_onnx
from graphfuse.testing.onnx_models import check_against_onnxruntime, model, onnxruntime_outputs

F = TensorProto.FLOAT
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INPUT, HIDDEN = 4, 3, 5, 6


def _rand(*shape: int, seed: int) -> np.ndarray:
    return (0.5 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def _layer(
    op: str,
    directions: int = 1,
    layout: int = 0,
    with_bias: bool = True,
    with_state: bool = False,
    lengths: list[int] | None = None,
    peepholes: bool = False,
    outputs: tuple[str, ...] = ("Y", "Y_h"),
    **attrs: Any,
) -> tuple[Any, dict[str, np.ndarray]]:
    """A one-node model: X, W, R (and B, initial states) graph inputs, sequence_lens an
    initializer (it must be known at import)."""
    gates = GATES[op]
    x_shape = [BATCH, SEQ, INPUT] if layout else [SEQ, BATCH, INPUT]
    state_shape = [BATCH, directions, HIDDEN] if layout else [directions, BATCH, HIDDEN]
    feeds = {
        "X": _rand(*x_shape, seed=1),
        "W": _rand(directions, gates * HIDDEN, INPUT, seed=2),
        "R": _rand(directions, gates * HIDDEN, HIDDEN, seed=3),
    }
    names = ["X", "W", "R", "", "", "", "", ""]
    inits: dict[str, np.ndarray] = {}
    if with_bias:
        feeds["B"] = _rand(directions, 2 * gates * HIDDEN, seed=4)
        names[3] = "B"
    if lengths is not None:
        inits["lens"] = np.array(lengths, np.int32)
        names[4] = "lens"
    if with_state:
        feeds["h0"] = _rand(*state_shape, seed=5)
        names[5] = "h0"
        if op == "LSTM":
            feeds["c0"] = _rand(*state_shape, seed=6)
            names[6] = "c0"
    if peepholes:
        feeds["P"] = _rand(directions, 3 * HIDDEN, seed=7)
        names[7] = "P"
    while names and not names[-1]:
        names.pop()
    y_shape = [BATCH, SEQ, directions, HIDDEN] if layout else [SEQ, directions, BATCH, HIDDEN]
    shapes = {"Y": y_shape, "Y_h": state_shape, "Y_c": state_shape}
    node = helper.make_node(op, names, list(outputs), hidden_size=HIDDEN, layout=layout, **attrs)
    built = model([node], feeds, {n: (F, shapes[n]) for n in outputs if n}, inits, opset=22)
    return built, feeds


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_directions_with_states(op: str, direction: str) -> None:
    directions = 2 if direction == "bidirectional" else 1
    outputs = ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")
    built, feeds = _layer(op, directions, with_state=True, outputs=outputs, direction=direction)
    check_against_onnxruntime(built, feeds)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_batch_first_compiled(op: str) -> None:
    """layout 1 (batch first) equals layout 0 with transposed inputs and outputs;
    onnxruntime runs only layout 0."""
    outputs = ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")
    kwargs: dict[str, Any] = {"with_state": True, "outputs": outputs}
    seq_first, feeds = _layer(op, 2, direction="bidirectional", **kwargs)
    batch_first, _ = _layer(op, 2, layout=1, direction="bidirectional", **kwargs)
    expected = onnxruntime_outputs(seq_first, feeds)
    swapped = dict(feeds)
    swapped["X"] = feeds["X"].transpose(1, 0, 2)
    for state in ("h0", "c0"):
        if state in feeds:
            swapped[state] = feeds[state].transpose(1, 0, 2)
    module = from_onnx(batch_first)
    arrays = list(swapped.values())
    compiled = graphfuse.compile(module)(*arrays)
    for got in (reference.run(module, "main", *arrays), compiled):
        want = [expected[0].transpose(2, 0, 1, 3), *(e.transpose(1, 0, 2) for e in expected[1:])]
        assert len(got) == len(want)
        for index, (a, e) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, err_msg=f"output #{index}")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_shorter_sequence_lengths_are_masked(op: str, direction: str) -> None:
    directions = 2 if direction == "bidirectional" else 1
    built, feeds = _layer(op, directions, lengths=[4, 2, 1], direction=direction)
    check_against_onnxruntime(built, feeds)


def test_lstm_shorter_sequence_lengths_compiled() -> None:
    built, feeds = _layer(
        "LSTM",
        2,
        lengths=[3, 4, 1],
        with_state=True,
        outputs=("Y", "Y_h", "Y_c"),
        direction="bidirectional",
    )
    check_against_onnxruntime(built, feeds, compile_it=True)


def test_gru_linear_before_reset() -> None:
    built, feeds = _layer(
        "GRU", 2, with_state=True, direction="bidirectional", linear_before_reset=1
    )
    check_against_onnxruntime(built, feeds, compile_it=True)


def test_lstm_peepholes_input_forget_and_clip() -> None:
    built, feeds = _layer(
        "LSTM",
        peepholes=True,
        with_state=True,
        input_forget=1,
        clip=0.7,
        outputs=("Y", "Y_h", "Y_c"),
    )
    check_against_onnxruntime(built, feeds)


def test_lstm_only_the_cell_state() -> None:
    built, feeds = _layer("LSTM", with_bias=False, outputs=("", "", "Y_c"))
    check_against_onnxruntime(built, feeds)


@pytest.mark.parametrize(
    ("activations", "alphas", "betas"),
    [
        (["LeakyRelu", "HardSigmoid", "Softsign"], [0.3, 0.4], [0.6]),
        (["Affine", "ScaledTanh", "Elu"], [0.9, 1.2, 0.8], [0.1, 0.7]),
        (["ThresholdedRelu", "Softplus", "Relu"], [0.2], []),
        (["Sigmoid", "Tanh", "Tanh"], [], []),
        (["HardSigmoid", "LeakyRelu", "Elu"], [], []),  # ONNX's default alphas and betas
    ],
)
def test_lstm_activations_with_alpha_and_beta(
    activations: list[str], alphas: list[float], betas: list[float]
) -> None:
    attrs: dict[str, Any] = {"activations": activations}
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    built, feeds = _layer("LSTM", with_state=True, outputs=("Y", "Y_h", "Y_c"), **attrs)
    check_against_onnxruntime(built, feeds)


def test_bidirectional_rnn_with_an_activation_per_direction() -> None:
    built, feeds = _layer(
        "RNN",
        2,
        direction="bidirectional",
        activations=["Relu", "LeakyRelu"],
        activation_alpha=[0.2],
    )
    check_against_onnxruntime(built, feeds)


def test_gru_with_clip_and_parameterised_activations() -> None:
    built, feeds = _layer(
        "GRU",
        with_state=True,
        clip=0.5,
        activations=["HardSigmoid", "Elu"],
        activation_alpha=[0.3, 0.5],
        activation_beta=[0.45],
    )
    check_against_onnxruntime(built, feeds)


# ---- refusals --------------------------------------------------------------------------------


def test_computed_sequence_lengths_are_refused() -> None:
    built, feeds = _layer("RNN", with_bias=True)
    built.graph.node[0].input.append("L")  # after X, W, R, B
    built.graph.input.append(helper.make_tensor_value_info("L", TensorProto.INT32, [BATCH]))
    with pytest.raises(ImportFailure, match="sequence_lens comes from graph input 'L'"):
        from_onnx(built)


def test_sequence_length_out_of_range_is_refused() -> None:
    built, _ = _layer("GRU", lengths=[4, 5, 1])
    with pytest.raises(ImportFailure, match=r"sequence_lens \[4, 5, 1\]: expected 3 lengths"):
        from_onnx(built)


def test_unknown_activation_is_refused() -> None:
    built, _ = _layer("RNN")
    built.graph.node[0].attribute.append(helper.make_attribute("activations", ["Swish"]))
    with pytest.raises(ImportFailure, match="activation 'Swish' is not one ONNX defines"):
        from_onnx(built)


def test_affine_activation_without_alpha_and_beta_is_refused() -> None:
    built, _ = _layer("RNN", activations=["Affine"], activation_alpha=[0.5])
    with pytest.raises(ImportFailure, match="activation 'Affine' needs its alpha and beta"):
        from_onnx(built)
