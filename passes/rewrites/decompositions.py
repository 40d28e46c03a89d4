"""The compound ops opened into primitives before fusion (APOLLO), as declarative rules.

Each rule keeps the numerics of the reference: softmax and log-softmax subtract the row
maximum first, so large inputs stay finite; layer-norm uses the population variance;
batch-norm folds its per-channel scale (`scale / sqrt(var + eps)`) on the small vectors
before touching the large input, leaving `sub -> mul -> add` on the activation. Roots of
f16 or bf16 are opened in f32 between two casts (`DecompositionPattern`), so the opened
form rounds once, as the reference does.
"""

from __future__ import annotations

import math

from graphfuse.passes.rewrites.rewrite_spec import Decomposition, Step

_SHIFTED_EXP_SUM = (
    Step("max", "graph.reduce_max", ("x",), axes="axis", keepdims=True),
    Step("shifted", "graph.sub", ("x", "max")),
    Step("exp", "graph.exp", ("shifted",)),
    Step("sum", "graph.reduce_sum", ("exp",), axes="axis", keepdims=True),
)
"""`exp(x - max)` and its sum along the axis: how softmax and log-softmax both start."""

SOFTMAX = Decomposition(
    root="graph.softmax",
    operands=("x",),
    steps=(*_SHIFTED_EXP_SUM, Step("out", "graph.div", ("exp", "sum"))),
)

LOG_SOFTMAX = Decomposition(
    root="graph.log_softmax",
    operands=("x",),
    steps=(
        *_SHIFTED_EXP_SUM,
        Step("log_sum", "graph.log", ("sum",)),
        Step("out", "graph.sub", ("shifted", "log_sum")),
    ),
)

LAYER_NORM = Decomposition(
    root="graph.layer_norm",
    operands=("x", "scale", "bias"),
    steps=(
        Step("mean", "graph.reduce_mean", ("x",), axes="trailing_axes", keepdims=True),
        Step("centered", "graph.sub", ("x", "mean")),
        Step("squared", "graph.mul", ("centered", "centered")),
        Step("var", "graph.reduce_mean", ("squared",), axes="trailing_axes", keepdims=True),
        Step("eps", "graph.constant", value="epsilon"),
        Step("var_eps", "graph.add", ("var", "eps")),
        Step("inv_std", "graph.rsqrt", ("var_eps",)),
        Step("normed", "graph.mul", ("centered", "inv_std")),
        Step("scaled", "graph.mul", ("normed", "scale")),
        Step("out", "graph.add", ("scaled", "bias")),
    ),
)

BATCH_NORM = Decomposition(
    root="graph.batch_norm",
    operands=("x", "scale", "bias", "mean", "var"),
    steps=(
        Step("eps", "graph.constant", value="epsilon"),
        Step("var_eps", "graph.add", ("var", "eps")),
        Step("inv_std", "graph.rsqrt", ("var_eps",)),
        Step("factor", "graph.mul", ("scale", "inv_std")),
        Step("mean_c", "graph.reshape", ("mean",), shape="channel_shape"),
        Step("factor_c", "graph.reshape", ("factor",), shape="channel_shape"),
        Step("bias_c", "graph.reshape", ("bias",), shape="channel_shape"),
        Step("centered", "graph.sub", ("x", "mean_c")),
        Step("scaled", "graph.mul", ("centered", "factor_c")),
        Step("out", "graph.add", ("scaled", "bias_c")),
    ),
)


def _gelu_tail(phi_arg: str) -> tuple[Step, ...]:
    """x * 0.5 * (1 + f), where f = erf(...) or tanh(...) is the step named `phi_arg`."""
    return (
        Step("one", "graph.constant", value=1.0),
        Step("half", "graph.constant", value=0.5),
        Step("cdf2", "graph.add", (phi_arg, "one")),
        Step("cdf", "graph.mul", ("cdf2", "half")),
        Step("out", "graph.mul", ("x", "cdf")),
    )


GELU_ERF = Decomposition(
    root="graph.gelu",
    operands=("x",),
    when=(("approximate", "none"),),
    steps=(
        Step("rsqrt2", "graph.constant", value=1 / math.sqrt(2)),
        Step("scaled", "graph.mul", ("x", "rsqrt2")),
        Step("erf", "graph.erf", ("scaled",)),
        *_gelu_tail("erf"),
    ),
)

GELU_TANH = Decomposition(
    root="graph.gelu",
    operands=("x",),
    when=(("approximate", "tanh"),),
    steps=(
        Step("coeff", "graph.constant", value=0.044715),
        Step("sqrt_2_pi", "graph.constant", value=math.sqrt(2 / math.pi)),
        Step("x2", "graph.mul", ("x", "x")),
        Step("x3", "graph.mul", ("x2", "x")),
        Step("cx3", "graph.mul", ("x3", "coeff")),
        Step("inner", "graph.add", ("x", "cx3")),
        Step("arg", "graph.mul", ("inner", "sqrt_2_pi")),
        Step("tanh", "graph.tanh", ("arg",)),
        *_gelu_tail("tanh"),
    ),
)

SILU = Decomposition(
    root="graph.silu",
    operands=("x",),
    steps=(Step("sigmoid", "graph.sigmoid", ("x",)), Step("out", "graph.mul", ("x", "sigmoid"))),
)

REDUCE_MEAN = Decomposition(
    root="graph.reduce_mean",
    operands=("x",),
    steps=(
        Step("sum", "graph.reduce_sum", ("x",), axes="axes", keepdims="keepdims"),
        Step("inv", "graph.constant", value="inverse_count"),
        Step("out", "graph.mul", ("sum", "inv")),
    ),
)

DECOMPOSITIONS: tuple[Decomposition, ...] = (
    SOFTMAX,
    LOG_SOFTMAX,
    LAYER_NORM,
    BATCH_NORM,
    GELU_ERF,
    GELU_TANH,
    SILU,
    REDUCE_MEAN,
)
