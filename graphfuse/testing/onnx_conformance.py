"""ONNX's own backend conformance suite (the node cases of `onnx.backend.test`) run on graphfuse.

The installed `onnx` wheel ships the generators of its node cases, not their data files, so
this runner builds the cases with `onnx.backend.test.case.node.collect_testcases` (the same
models, inputs and expected outputs the data files hold) and runs data set 0 of every case
whose inputs and outputs are tensors, as onnxruntime's and onnx-mlir's CI do:

- import the model with `graphfuse.from_onnx`, binding the inputs the importer needs as
  constants (axes, shapes, pads given as graph inputs) to the case's values, as a JIT
  specialises on them;
- compile it for the CPU (`--mode compile`, the default) or run the reference interpreter
  on the imported module (`--mode interpret`, seconds instead of minutes, for development);
- compare every output with the expected one: same shape and dtype, values within the
  case's rtol/atol (NaN where NaN is expected).

Each case ends as one of: pass; refused (a graphfuse diagnostic: an op, type or shape it
does not support, named); excluded (listed in EXCLUDED with the reason, never run); wrong
(numbers, shape or dtype differ); crash (an exception that is not a diagnostic, or the
worker process died). The suite's targets are about passes, wrong results and crashes.

Cases run in worker processes (`--jobs`, default the machine's cores) so that a crash in
compiled code takes one case, not the run. The command exits with 1 when any case is wrong
or crashed (a refusal is not a failure), so CI fails on a wrong result.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import re
import selectors
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

EXCLUDED: dict[str, str] = {
    # Data-dependent output shapes: the output's shape depends on the input's values.
    r"test_nonzero_.*": "NonZero's output shape depends on the input values",
    r"test_unique_.*": "Unique's output shape depends on the input values",
    r"test_nonmaxsuppression_.*": "NonMaxSuppression's output shape depends on the inputs",
    r"test_compress_.*": "Compress's output shape depends on the condition's values",
    # Random outputs: no expected values to compare.
    r"test_bernoulli.*": "Bernoulli draws random numbers: no fixed expected output",
    r"test_training_dropout(?!_zero_ratio).*": "Dropout in training mode draws random numbers",
    # Strings: graphfuse's tensors are numbers.
    r"test_(string|regex|strnorm|lexicographic).*": "string tensors are not supported",
    r"test_(equal|concat)_string.*": "string tensors are not supported",
    r"test_cast_.*STRING.*|test_castlike_.*STRING.*": "string tensors are not supported",
    r"test_ai_onnx_ml_.*": "ai.onnx.ml (classic ML) ops are out of scope",
    r"test_(adagrad|adam|momentum|nesterov_momentum).*": "training optimizers "
    "(ai.onnx.preview.training) are out of scope: graphfuse compiles inference",
    r"test_tfidfvectorizer.*": "TfIdfVectorizer (text n-gram counting) is out of scope",
    r"test_image_decoder.*": "ImageDecoder (JPEG/PNG/... bytes to pixels) is out of scope: "
    "decode images before the model",
    # Expected data that no exact computation meets (onnxruntime fails these too).
    r"test_dft_inverse(_opset19)?": "the expected data holds NumPy single-precision FFT "
    "noise (1.9e-7) where the exact value, which graphfuse gives, is 0: over the case's atol "
    "of 1e-7",
    r"test_attention_4d_causal_fp16(_expanded)?": "the expected data carries NumPy's fp16 "
    "rounding in its own operation order: 2 of 192 results within 2 fp16 ulps of it miss "
    "the case's rtol of 1e-3 (onnxruntime misses too)",
    r"test_(celu_bfloat16|attention_.*_bf16)(_expanded)?": "bf16 results are one rounding "
    "step (bf16's epsilon is 7.8e-3) from expected data rounded in another order, which the "
    "case's rtol of 1e-3 cannot absorb; graphfuse rounds each bf16 op (onnxruntime has no "
    "bf16 kernels for these)",
}
"""Case-name patterns never run, each with the reason (matched with re.fullmatch)."""


@dataclass(frozen=True)
class Case:
    """One node case: data set 0 of an onnx.backend.test node test case."""

    name: str
    op_type: str
    model: Any
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    rtol: float
    atol: float


@dataclass(frozen=True)
class Outcome:
    name: str
    op_type: str
    status: str  # pass | refused | excluded | wrong | crash
    detail: str
    seconds: float


def _as_tensor(value: Any) -> np.ndarray | None:
    """A case's datum as an array: a NumPy scalar is a 0-d tensor, a TensorProto its
    contents; sequences, maps and optionals are not tensors (None)."""
    from onnx import TensorProto, numpy_helper

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    return None


@cache
def all_cases(extended: bool = False) -> dict[str, Case]:
    """Every tensor node case by name, in the suite's order: the cases whose data are
    NumPy arrays (1,506 with onnx 1.23: the set onnxruntime's figure is quoted on), or with
    `extended` also those whose data are NumPy scalars or TensorProtos."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            from onnx.backend.test.case.node import collect_testcases

            raw = collect_testcases(None)
    op_of: dict[str, str] = {}
    for case in raw:
        nodes = case.model.graph.node
        if not case.name.endswith("_expanded") and nodes:
            op_of[case.name] = nodes[-1].op_type
    cases: dict[str, Case] = {}
    for case in raw:
        if not case.data_sets:
            continue
        inputs, outputs = case.data_sets[0]
        data = [*inputs, *outputs]
        arrays = [_as_tensor(v) for v in data] if extended else data
        if not all(isinstance(v, np.ndarray) for v in arrays):
            continue
        inputs, outputs = arrays[: len(inputs)], arrays[len(inputs) :]
        base = case.name.removesuffix("_expanded")
        nodes = case.model.graph.node
        op_type = op_of.get(base) or (nodes[-1].op_type if nodes else "?")
        cases[case.name] = Case(
            case.name,
            op_type,
            case.model,
            tuple(inputs),
            tuple(outputs),
            float(case.rtol),
            float(case.atol),
        )
    return cases


def exclusion(name: str) -> str | None:
    for pattern, reason in EXCLUDED.items():
        if re.fullmatch(pattern, name):
            return reason
    return None


# ---- running one case ---------------------------------------------------------------------


def _user_array(value: np.ndarray) -> np.ndarray:
    """ONNX's test data as graphfuse takes it: bfloat16 (ml_dtypes) travels as float32."""
    if value.dtype.name == "bfloat16":
        return value.astype(np.float32)
    return value


def _compare(got: Sequence[np.ndarray], case: Case) -> str | None:
    """Why the results differ from the expected ones, or None."""
    if len(got) != len(case.outputs):
        return f"{len(got)} outputs, expected {len(case.outputs)}"
    for index, (actual, expected) in enumerate(zip(got, case.outputs, strict=True)):
        actual = np.asarray(actual)
        if actual.shape != expected.shape:
            return f"output #{index}: shape {actual.shape}, expected {expected.shape}"
        want_dtype = _user_array(expected).dtype
        if actual.dtype != want_dtype:
            return f"output #{index}: dtype {actual.dtype}, expected {want_dtype}"
        want = _user_array(expected)
        if want.dtype.kind in "biu":
            if not np.array_equal(actual, want):
                bad = int(np.sum(actual != want))
                return f"output #{index}: {bad} of {want.size} elements differ"
            continue
        a64, w64 = actual.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            close = np.isclose(a64, w64, rtol=case.rtol, atol=case.atol, equal_nan=True)
        if not close.all():
            worst = int(np.argmax(~close.reshape(-1)))
            return (
                f"output #{index}: {int(np.sum(~close))} of {want.size} elements differ "
                f"(e.g. {a64.reshape(-1)[worst]!r} vs {w64.reshape(-1)[worst]!r})"
            )
    return None


_MUST_BE_CONSTANT = re.compile(r"graph inputs? ((?:'[^']*'(?:, )?)+), which must be constant")
"""The importer's refusal that names the graph inputs to bind (Builder.must_be_constant)."""


def _constant_inputs(model: Any, message: str) -> list[str]:
    """The graph inputs a refusal asks to bind as constants: only those it names as such."""
    found = _MUST_BE_CONSTANT.search(message)
    if found is None:
        return []
    named = re.findall(r"'([^']*)'", found.group(1))
    return [i.name for i in model.graph.input if i.name in named]


def run_case(case: Case, mode: str) -> Outcome:
    """Import, build and run one case; never raises."""
    from graphfuse.parsing import GraphfuseError

    start = time.perf_counter()

    def done(status: str, detail: str = "") -> Outcome:
        return Outcome(case.name, case.op_type, status, detail, time.perf_counter() - start)

    reason = exclusion(case.name)
    if reason is not None:
        return done("excluded", reason)
    try:
        got = _execute(case, mode)
    except GraphfuseError as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        # The suite's models are valid: a "malformed node" is a converter's own exception.
        return done("crash" if "malformed node" in message else "refused", message)
    except Exception as error:  # anything else is a crash to report
        return done("crash", f"{type(error).__name__}: {str(error).splitlines()[:1]}")
    difference = _compare(got, case)
    if difference:
        return done("wrong", difference)
    return done("pass", FOLDED if isinstance(got, _Folded) else "")


def _execute(case: Case, mode: str) -> list[np.ndarray]:
    import graphfuse
    from graphfuse.dialects.graph import interpreter
    from graphfuse.parsing import GraphfuseError

    names = [i.name for i in case.model.graph.input]
    feeds = dict(zip(names, case.inputs, strict=False))
    if mode == "onnxruntime":
        return _onnxruntime(case.model, feeds)
    constants: dict[str, np.ndarray] = {}
    while True:
        try:
            module = graphfuse.from_onnx(case.model, constants=constants)
            break
        except GraphfuseError as error:
            wanted = [n for n in _constant_inputs(case.model, str(error)) if n not in constants]
            if not wanted:
                raise
            constants.update({n: feeds[n] for n in wanted})
    arrays = [_user_array(feeds[n]) for n in names if n not in constants]
    computed = any(
        op.name.startswith("graph.") and op.name != "graph.constant" for op in module.walk()
    )
    if mode == "interpret":
        results = list(interpreter.run(module, "main", *arrays))
    else:
        result = graphfuse.compile(module)(*arrays)
        results = list(result) if isinstance(result, tuple) else [result]
    return results if computed else _Folded(results)


class _Folded(list[np.ndarray]):
    """Results of a case whose whole model folded at import (its inputs all known or bound
    as constants: ONNX's reference evaluator computed it), so no graphfuse op ran."""


FOLDED = "folded at import"
"""The detail of a pass no graph op computed (see `_Folded`); reported apart."""


def _onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The same case on onnxruntime (all graph optimisations), for side-by-side figures;
    its refusals count as refused, like graphfuse's."""
    import onnxruntime as ort

    from graphfuse.parsing import GraphfuseError

    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return list(session.run(None, feeds))
    except Exception as error:  # onnxruntime raises its own Fail/NotImplemented kinds
        raise GraphfuseError(str(error).splitlines()[0][:200]) from None


# ---- running many, in workers ---------------------------------------------------------------


def _worker(mode: str) -> None:
    """Read case names on stdin, write one JSON outcome per line on stdout."""
    cases = all_cases(extended=True)
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    for line in sys.stdin:
        name = line.strip()
        if name:
            out.write(json.dumps(run_case(cases[name], mode).__dict__) + "\n")
            out.flush()


class _Worker:
    """One worker process running one case at a time."""

    def __init__(self, mode: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "graphfuse.testing.onnx_conformance", "--worker", mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.case = ""
        self.began = 0.0

    def send(self, name: str) -> None:
        assert self.process.stdin is not None
        self.case, self.began = name, time.monotonic()
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()

    def receive(self) -> Outcome:
        """The outcome of the case sent; a crash if the process died on it."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line:
            return Outcome(**json.loads(line))
        code = self.process.wait()
        return self._crash(f"worker died (exit {code})")

    def kill(self, timeout: float) -> Outcome:
        self.process.kill()
        self.process.wait()
        return self._crash(f"timed out after {timeout:.0f} s")

    def _crash(self, detail: str) -> Outcome:
        op_type = all_cases(extended=True)[self.case].op_type
        return Outcome(self.case, op_type, "crash", detail, time.monotonic() - self.began)

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait()


def run_cases(
    names: Sequence[str], mode: str = "compile", jobs: int | None = None, timeout: float = 300
) -> Iterator[Outcome]:
    """Run cases in `jobs` worker processes; yields outcomes as they finish. A worker that
    dies or runs past `timeout` on a case reports it as a crash and is replaced."""
    cases = all_cases(extended=True)
    pending = collections.deque(n for n in names if exclusion(n) is None)
    for name in names:
        reason = exclusion(name)
        if reason is not None:
            yield Outcome(name, cases[name].op_type, "excluded", reason, 0.0)
    selector = selectors.DefaultSelector()

    def next_case(worker: _Worker) -> None:
        if not pending:
            worker.stop()
            return
        worker.send(pending.popleft())
        assert worker.process.stdout is not None
        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)

    for _ in range(max(1, min(jobs or os.cpu_count() or 1, len(pending)))):
        if pending:
            next_case(_Worker(mode))
    while selector.get_map():
        for key, _ in selector.select(timeout=5):
            worker: _Worker = key.data
            selector.unregister(key.fileobj)
            outcome = worker.receive()
            yield outcome
            next_case(worker if outcome.status != "crash" else _Worker(mode))
        for worker in _overdue(selector, timeout):
            yield worker.kill(timeout)
            next_case(_Worker(mode))


def _overdue(selector: selectors.BaseSelector, timeout: float) -> list[_Worker]:
    """The workers on one case for longer than `timeout`, no longer watched."""
    now = time.monotonic()
    late = [k for k in selector.get_map().values() if now - k.data.began > timeout]
    for key in late:
        selector.unregister(key.fileobj)
    return [k.data for k in late]


# ---- the report ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    cases: int
    passed: int
    op_types: int
    passing_op_types: int
    by_status: dict[str, int]

    folded: int = 0
    computing_op_types: int = 0

    def line(self) -> str:
        rate = 100.0 * self.passed / max(self.cases, 1)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.by_status.items()))
        return (
            f"ONNX backend node suite: {self.passed}/{self.cases} tensor cases pass "
            f"({rate:.1f}%), {self.passing_op_types}/{self.op_types} op types with a passing "
            f"case ({counts}); of the passes {self.folded} fold whole at import, leaving "
            f"{self.computing_op_types} op types with a pass graphfuse computes"
        )


def summarize(outcomes: Sequence[Outcome]) -> Summary:
    by_status = collections.Counter(o.status for o in outcomes)
    return Summary(
        cases=len(outcomes),
        passed=by_status["pass"],
        op_types=len({o.op_type for o in outcomes}),
        passing_op_types=len({o.op_type for o in outcomes if o.status == "pass"}),
        folded=sum(1 for o in outcomes if o.status == "pass" and o.detail == FOLDED),
        computing_op_types=len(
            {o.op_type for o in outcomes if o.status == "pass" and o.detail != FOLDED}
        ),
        by_status=dict(by_status),
    )


def report(outcomes: Sequence[Outcome]) -> str:
    """The summary line, then every case that did not pass, grouped by status and reason."""
    lines = [summarize(outcomes).line()]
    for status in ("crash", "wrong", "refused", "excluded"):
        chosen = [o for o in outcomes if o.status == status]
        if not chosen:
            continue
        lines.append(f"\n{status} ({len(chosen)}):")
        by_reason: dict[str, list[str]] = collections.defaultdict(list)
        for o in chosen:
            reason = o.detail if status != "refused" else _reason_key(o.detail)
            by_reason[reason].append(o.name)
        for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            lines.append(f"  {len(names):4d}  {reason}\n        {shown}")
    return "\n".join(lines)


def _reason_key(detail: str) -> str:
    """A refusal's reason without the node names, so like refusals group together."""
    detail = re.sub(
        r"\(([^()]*)\)",
        lambda m: (
            "(...)" if "," in m.group(1) or re.fullmatch(r"[\w.\-/:#]+", m.group(1)) else m.group(0)
        ),
        detail,
    )
    detail = re.sub(r"node [^ ]+ ", "node N ", detail)
    return re.sub(r"'[^']*'", "'...'", detail)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graphfuse.testing.onnx_conformance",
        description="Run ONNX's backend node conformance suite on graphfuse.",
    )
    parser.add_argument("--worker", metavar="MODE", help=argparse.SUPPRESS)
    parser.add_argument(
        "--mode",
        choices=("compile", "interpret", "onnxruntime"),
        default="compile",
        help="compile (the figure), interpret (graphfuse's reference interpreter, fast) or "
        "onnxruntime (the same cases on onnxruntime, to compare)",
    )
    parser.add_argument("-k", "--filter", default="", help="only cases whose name matches")
    parser.add_argument("-j", "--jobs", type=int, default=None)
    parser.add_argument(
        "--extended",
        action="store_true",
        help="also the cases whose data are NumPy scalars or TensorProtos (the default set is "
        "the 1,506 array cases onnxruntime's figure is quoted on)",
    )
    parser.add_argument("--json", metavar="FILE", help="write every outcome to FILE")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker)
        return 0
    names = [n for n in all_cases(args.extended) if re.search(args.filter, n)]
    outcomes: list[Outcome] = []
    for count, outcome in enumerate(run_cases(names, args.mode, args.jobs), 1):
        outcomes.append(outcome)
        if sys.stderr.isatty():
            print(f"\r{count}/{len(names)} {outcome.name[:60]:60}", end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    order = {n: i for i, n in enumerate(names)}
    outcomes.sort(key=lambda o: order[o.name])
    if args.json:
        with open(args.json, "w") as out:
            json.dump([o.__dict__ for o in outcomes], out, indent=0)
    print(report(outcomes))
    bad = [o for o in outcomes if o.status in ("wrong", "crash")]
    if bad:
        print(f"{len(bad)} cases wrong or crashed: the suite fails", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
