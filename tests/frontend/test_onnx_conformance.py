"""ONNX's backend node conformance suite in `make test`: every tensor case on the reference
interpreter, and a compiled sample of one passing case per op type (`make conformance` builds
them all). The full figures are in the README."""

from __future__ import annotations

import re

import numpy as np
import pytest

from graphfuse.runtime.cpu_tools import LANES_VARIABLE, runnable_lanes
from graphfuse.testing import onnx_conformance as suite

MIN_PASSING = 1550
"""Interpreted cases of the extended set (1,858) that must pass: a floor under today's 1,581
(the README's figure is the compiled run of the 1,506 array cases); 0 wrong results and 0
crashes are required outright."""
SAMPLE_SIZE = 48


@pytest.fixture(scope="module")
def interpreted() -> list[suite.Outcome]:
    return list(suite.run_cases(list(suite.all_cases(extended=True)), "interpret", jobs=2))


def test_whole_suite_interpreted(interpreted: list[suite.Outcome]) -> None:
    summary = suite.summarize(interpreted)
    bad = [o for o in interpreted if o.status in ("wrong", "crash")]
    assert not bad, "\n".join(f"{o.name}: {o.status}: {o.detail}" for o in bad)
    assert summary.cases == len(suite.all_cases(extended=True)) > len(suite.all_cases()) >= 1500
    assert summary.passed >= MIN_PASSING, summary.line()
    for outcome in interpreted:
        if outcome.status == "refused":
            assert outcome.detail and "\n" not in outcome.detail, outcome


def test_compiled_sample(interpreted: list[suite.Outcome]) -> None:
    """One interpreted-passing case per op type (spread over the op types when there are
    more than SAMPLE_SIZE), compiled for the CPU: each must pass compiled too."""
    first: dict[str, str] = {}
    for outcome in interpreted:
        if outcome.status == "pass":
            first.setdefault(outcome.op_type, outcome.name)
    names = [first[op] for op in sorted(first)]
    step = max(1, len(names) // SAMPLE_SIZE)
    sample = names[::step][:SAMPLE_SIZE]
    compiled = list(suite.run_cases(sample, "compile", jobs=2))
    failed = [o for o in compiled if o.status != "pass"]
    assert not failed, "\n".join(f"{o.name}: {o.status}: {o.detail}" for o in failed)
    assert len(compiled) == len(sample) >= min(SAMPLE_SIZE, len(names))


GROUPED_QUERY_ATTENTION = (
    r"test_attention_3d_(gqa(_attn_mask|_causal|_scaled|_softcap)?|local_window)"
)
"""ONNX Attention on 3-D inputs split into heads by q_num_heads/kv_num_heads, grouped-query
heads and a sliding window, with and without the `_expanded` function body: a fused
kernel once read the query's heads from columns it had not written."""


@pytest.mark.parametrize("lanes", runnable_lanes())
def test_grouped_query_attention_compiled(lanes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 3-D attention cases compiled (fused) at every vector width this machine runs
    give ONNX's expected outputs."""
    monkeypatch.setenv(LANES_VARIABLE, str(lanes))
    names = [
        n for n in suite.all_cases() if re.fullmatch(f"{GROUPED_QUERY_ATTENTION}(_expanded)?", n)
    ]
    compiled = list(suite.run_cases(names, "compile", jobs=2))
    failed = [o for o in compiled if o.status != "pass"]
    assert not failed, "\n".join(f"{o.name}: {o.status}: {o.detail}" for o in failed)
    assert len(compiled) == 12


def test_the_comparison_can_fail() -> None:
    """Shape, dtype and values are all checked, NaN only matches NaN."""
    case = suite.all_cases()["test_relu"]
    expected = case.outputs[0]
    assert suite._compare([expected.copy()], case) is None  # pyright: ignore[reportPrivateUsage]
    off = expected.copy()
    off.reshape(-1)[0] += 1.0
    for got, reason in [
        ([off], "elements differ"),
        ([expected.astype(np.float64)], "dtype float64"),
        ([expected.reshape(-1)], "shape"),
        ([], "0 outputs"),
        ([np.full_like(expected, np.nan)], "elements differ"),
    ]:
        message = suite._compare(got, case)  # pyright: ignore[reportPrivateUsage]
        assert message is not None and reason in message, (reason, message)


def test_refusals_and_exclusions_are_reported_with_reasons() -> None:
    outcomes = [
        suite.Outcome("test_a", "A", "pass", "", 0.1),
        suite.Outcome("test_b", "B", "refused", "node b1 (B): X is not supported", 0.1),
        suite.Outcome("test_c", "B", "refused", "node c1 (B): X is not supported", 0.1),
        suite.Outcome("test_d", "D", "excluded", "a reason", 0.0),
    ]
    text = suite.report(outcomes)
    assert text.splitlines()[0].startswith("ONNX backend node suite: 1/4 tensor cases pass")
    assert "1/3 op types" in text
    assert "2  node N (...): X is not supported" in text and "a reason" in text
    assert suite.exclusion("test_nonzero_example") is not None
    assert suite.exclusion("test_relu") is None


def test_only_inputs_a_refusal_names_as_constants_are_bound() -> None:
    model = suite.all_cases()["test_reduce_sum_keepdims_example"].model
    names = [i.name for i in model.graph.input]
    bind = suite._constant_inputs  # pyright: ignore[reportPrivateUsage]
    axes = names[1]
    message = f"node r: axes comes from graph input '{axes}', which must be constant: bind it"
    assert bind(model, message) == [axes]
    assert bind(model, f"node r: '{axes}' is not a constant we like") == []
    assert bind(model, f"node r: element type of '{names[0]}' is not supported") == []
