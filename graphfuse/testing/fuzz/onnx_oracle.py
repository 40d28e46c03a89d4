"""The differential oracle: one ONNX case through graphfuse, compared with onnxruntime.

Stages: import (`from_onnx`), fuse (`lower_to(..., Stage.GRAPH)`), compile for the CPU
at the case's threads and vector width (`Setting`), run and compare; then the fused text
must re-parse and fuse again to the same text; and, where the setting asks, the text
stage (onnx_text: `graphfuse import`, plain `xdsl-opt -p graph-fuse`, the reference
interpreter) must give onnxruntime's numbers too. Wrong numbers are looked for first, so
a text defect does not hide them. The first failure classifies the case (`Verdict`); its
`category` is the message with names and numbers blanked, so the same defect found twice
(or kept while reducing) compares equal. Comparisons scale with the output: f32 within
1e-4 of its largest magnitude, f16 within 3e-2, ints and bools exactly. `Worker` runs
cases in a child process, so a crash or hang in a compiled kernel is a verdict, not the
end of the fuzzer.
"""

from __future__ import annotations

import os
import re
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import Array, Case, onnxruntime_outputs

TOLERANCE = {"f": 1e-4, "h": 3e-2}
"""Allowed error relative to an output's largest magnitude, by float kind (f32, f16).
f16's is wide: the references themselves differ by tens of f16 ulps on ill-conditioned
f16 models (layer norm of rows whose variance is near epsilon)."""


class Verdict(Enum):
    """What happened to a case; all but OK, UNSUPPORTED and INVALID are graphfuse bugs."""

    OK = "ok"
    UNSUPPORTED = "unsupported"
    """A one-line diagnostic saying an op, attribute or type is not supported."""
    REFUSED = "refused"
    """Any other diagnostic on a valid model."""
    CRASH = "crash"
    """A Python exception that is not a diagnostic, a dead worker or a hang."""
    COMPILE_FAILURE = "compile-failure"
    """mlir-opt, opt, llc or cc failed on what graphfuse produced."""
    MISMATCH = "mismatch"
    """Wrong numbers, shapes or dtypes."""
    NOT_IDEMPOTENT = "not-idempotent"
    """Fused text that does not re-parse, or changes when fused again."""
    INVALID = "invalid"
    """onnxruntime rejects the model: not a test case at all."""


BUGS = (
    Verdict.REFUSED,
    Verdict.CRASH,
    Verdict.COMPILE_FAILURE,
    Verdict.MISMATCH,
    Verdict.NOT_IDEMPOTENT,
)


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    category: str = ""
    """The failure with names and numbers blanked: equal for the same defect."""
    message: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.verdict.value, self.category)


class _Failed(Exception):
    """Carries an outcome out of a stage."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def blank(message: str) -> str:
    """A message with quoted names, SSA names, locations and numbers blanked."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"'[^']*'", "'_'", text)
    text = re.sub(r"%[\w.]+|@[\w.]+|<[^<>]*>", "_", text)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:160]


@dataclass(frozen=True)
class Setting:
    """How one case is built and checked: threads per kernel, the vector width
    (`$GRAPHFUSE_LANES` for the build; None leaves it unset: the CPU's widest), and
    whether the text stage runs too."""

    threads: int = 1
    lanes: int | None = None
    text: bool = False

    def describe(self) -> str:
        lanes = "native" if self.lanes is None else str(self.lanes)
        return f"threads {self.threads}, lanes {lanes}" + (", text" if self.text else "")


def evaluate(case: Case, setting: Setting = Setting()) -> Outcome:
    """Run the case through every stage; the first failure is the outcome."""
    try:
        expected = onnxruntime_outputs(case.model, case.feeds)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises many kinds
        return Outcome(Verdict.INVALID, "onnxruntime", str(error).splitlines()[0][:200])
    try:
        fused, actual = _run_graphfuse(case, setting)
        outcome = _judge(case, expected, actual)
        if outcome.verdict is Verdict.OK:
            _check_idempotent(fused)
        if outcome.verdict is Verdict.OK and setting.text:
            outcome = _judge(case, expected, _run_text(case), "text: ")
    except _Failed as failed:
        return failed.outcome
    return outcome


def _judge(case: Case, expected: list[Array], actual: list[Array], stage: str = "") -> Outcome:
    """OK when `actual` is onnxruntime's outputs within tolerance (for f16 models, or
    ONNX's reference evaluator's); a mismatch's category is prefixed by `stage`."""
    f16 = _uses_f16(case.model)
    outcome = _compare(expected, actual, f16)
    if outcome.verdict is Verdict.MISMATCH and f16:
        second = _onnx_reference_outputs(case)
        if second is not None and _compare(second, actual, f16).verdict is Verdict.OK:
            return Outcome(Verdict.OK)
    if outcome.verdict is Verdict.MISMATCH and stage:
        return Outcome(outcome.verdict, stage + outcome.category, stage + outcome.message)
    return outcome


def _onnx_reference_outputs(case: Case) -> list[Array] | None:
    """ONNX's own reference evaluator's outputs (None where it cannot run the model): a
    second opinion on f16 models, where neither reference is exact. onnxruntime's CPU
    build computes f16 ops in f32 between casts it inserts and then drops the cast pairs,
    so a result that should round to f16 does not (x=1.348176: Cast to f16, Add -1.3701
    gives -0.02194, ONNX's semantics -0.02148); the evaluator computes f16
    LayerNormalization in f16, ignoring stash_type. A case is a mismatch only when
    graphfuse agrees with neither, so a deviation onnxruntime shares goes unseen."""
    from onnx.reference import ReferenceEvaluator

    try:
        outputs = ReferenceEvaluator(case.model).run(None, case.feeds)
    except Exception:  # noqa: BLE001 - the evaluator lacks some ops and raises many kinds
        return None
    return [np.asarray(o) for o in outputs]


def _run_graphfuse(case: Case, setting: Setting) -> tuple[str, list[Array]]:
    """The fused text and the compiled model's outputs."""
    import graphfuse
    from graphfuse.compiler import CompileOptions, Stage, lower_to

    module = _stage("import", lambda: graphfuse.from_onnx(case.model))
    fused = _stage("fuse", lambda: lower_to(module.clone(), Stage.GRAPH))
    options = CompileOptions(threads=setting.threads)
    with lanes_variable(setting.lanes):
        compiled = _stage("compile", lambda: graphfuse.compile(module, options=options))
    result = _stage("run", lambda: compiled(*_arrays(case)))
    return fused, list(result) if isinstance(result, tuple) else [result]


@contextmanager
def lanes_variable(lanes: int | None) -> Iterator[None]:
    """`$GRAPHFUSE_LANES` set to `lanes` (unset for None) while the block runs: the switch
    that also turns off AVX-512 for 8 lanes, and that the build cache keys include."""
    from graphfuse.runtime.cpu_tools import LANES_VARIABLE

    before = os.environ.pop(LANES_VARIABLE, None)
    if lanes is not None:
        os.environ[LANES_VARIABLE] = str(lanes)
    try:
        yield
    finally:
        os.environ.pop(LANES_VARIABLE, None)
        if before is not None:
            os.environ[LANES_VARIABLE] = before


def _arrays(case: Case) -> list[Array]:
    return [case.feeds[i.name] for i in case.model.graph.input if i.name in case.feeds]


def _check_idempotent(fused: str) -> None:
    """The fused text re-parses and fuses again to itself."""
    from graphfuse.compiler import Stage, lower_to
    from graphfuse.parsing import parse_text

    again = _stage("re-parse", lambda: parse_text(fused), Verdict.NOT_IDEMPOTENT)
    twice = _stage("re-fuse", lambda: lower_to(again, Stage.GRAPH), Verdict.NOT_IDEMPOTENT)
    if twice != fused:
        raise _Failed(_not_idempotent(fused, twice))


def _run_text(case: Case) -> list[Array]:
    """The outputs of the text stage (onnx_text) in a folder of its own."""
    from graphfuse.dialects.graph import interpreter
    from graphfuse.testing.fuzz import onnx_text

    with tempfile.TemporaryDirectory(prefix="graphfuse-fuzz-") as name:
        folder = Path(name)
        written = _stage("text import", lambda: onnx_text.import_command(case.model, folder))
        fused = _stage("xdsl-opt", lambda: onnx_text.xdsl_opt_fuse(written), Verdict.CRASH)
        module = _stage("text parse", lambda: onnx_text.parse_fused(fused))
        return list(_stage("interpret", lambda: interpreter.run(module, "main", *_arrays(case))))


def _not_idempotent(fused: str, twice: str) -> Outcome:
    """Categorised by the ops whose lines the second fusion adds or removes, so distinct
    causes are reduced and reported apart."""
    import difflib

    changed = [
        line
        for line in difflib.unified_diff(fused.splitlines(), twice.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    ops = sorted({f"{line[0]}{m}" for line in changed for m in re.findall(r"graph\.\w+", line)})
    first = next((line for line in changed), "")
    category = f"fusing the fused text changes it: {' '.join(ops) or 'other lines'}"
    return Outcome(Verdict.NOT_IDEMPOTENT, category, f"{category}; first: {first.strip()[:200]}")


def _stage(name: str, thunk: Any, diagnostic: Verdict = Verdict.REFUSED) -> Any:
    """Run one stage, turning its exceptions into outcomes named after the stage."""
    from xdsl.utils.exceptions import DiagnosticException

    from graphfuse.toolchain import ToolchainError

    try:
        return thunk()
    except ToolchainError as error:
        outcome = Outcome(Verdict.COMPILE_FAILURE, f"{name}: {blank(str(error))}", str(error))
        raise _Failed(outcome) from None
    except DiagnosticException as error:
        verdict = Verdict.UNSUPPORTED if _says_unsupported(str(error)) else diagnostic
        raise _Failed(Outcome(verdict, f"{name}: {blank(str(error))}", str(error))) from None
    except Exception as error:  # noqa: BLE001 - any other exception is a crash to report
        raise _Failed(_crash(name, error)) from None


def _says_unsupported(message: str) -> bool:
    pattern = r"unsupported|not supported|depends on its input values"
    return bool(re.search(pattern, message, re.IGNORECASE))


def _crash(stage: str, error: BaseException) -> Outcome:
    """A crash, categorised by exception type and the innermost graphfuse frame."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "graphfuse" in f.filename or "/passes/" in f.filename]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    place = f"{where.filename.rsplit('/', 1)[-1]}:{where.name}" if where else "?"
    message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    detail = "".join(traceback.format_exception(error)[-12:])
    category = f"{stage}: {type(error).__name__} in {place}"
    return Outcome(Verdict.CRASH, category, message + "\n" + detail)


def _uses_f16(model: Any) -> bool:
    """Whether any value is f16: then f32 results carry f16 rounding, which onnxruntime,
    NumPy and graphfuse may each place differently by an ulp."""
    from onnx import TensorProto

    f16 = TensorProto.FLOAT16
    typed = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    if any(v.type.tensor_type.elem_type == f16 for v in typed):
        return True
    if any(t.data_type == f16 for t in model.graph.initializer):
        return True
    return any(a.name == "to" and a.i == f16 for n in model.graph.node for a in n.attribute)


def _compare(expected: list[Array], actual: list[Array], f16: bool = False) -> Outcome:
    if len(expected) != len(actual):
        return _mismatch("output count", f"{len(actual)} outputs, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        problem = _difference(want, np.asarray(got), f16)
        if problem is not None:
            kind, detail = problem
            return _mismatch(kind, f"output #{index}: {detail}")
    return Outcome(Verdict.OK)


def _mismatch(kind: str, message: str) -> Outcome:
    return Outcome(Verdict.MISMATCH, kind, message)


def _difference(want: Array, got: Array, f16: bool = False) -> tuple[str, str] | None:
    """(kind, detail) when `got` is not `want` within the dtype's tolerance."""
    if want.shape != got.shape:
        return "shape", f"shape {got.shape}, expected {want.shape}"
    if want.dtype != got.dtype:
        return "dtype", f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind != "f":
        wrong = int(np.count_nonzero(want != got))
        return (f"values {want.dtype}", f"{wrong} of {want.size} differ") if wrong else None
    if not np.array_equal(np.isnan(want), np.isnan(got)):
        return f"nan {want.dtype}", "NaN where onnxruntime has none, or none where it has"
    scale = float(np.nanmax(np.abs(want.astype(np.float64)), initial=0.0))
    error = np.abs(want.astype(np.float64) - got.astype(np.float64))
    worst = float(np.nanmax(error, initial=0.0))
    # Scale at least 0.1: an output that cancels to zero (x - mean(x) of equal values)
    # still carries the rounding of the values it cancelled.
    limit = TOLERANCE["h" if f16 or want.dtype == np.float16 else "f"] * max(scale, 0.1)
    if worst <= limit:
        return None
    return f"values {want.dtype}", f"max error {worst:.3g} over scale {scale:.3g}"


# ---- isolation --------------------------------------------------------------------------


class Worker:
    """A child process that evaluates cases, restarted after a crash or a hang."""

    def __init__(self, timeout: float = 300.0) -> None:
        import multiprocessing

        self.context = multiprocessing.get_context("spawn")
        self.timeout = timeout
        self.process: Any = None
        self.connection: Any = None

    def _start(self) -> None:
        parent, child = self.context.Pipe()
        self.process = self.context.Process(target=_serve, args=(child,))
        self.process.daemon = True
        self.process.start()
        self.connection = parent

    def evaluate(self, case: Case, setting: Setting = Setting()) -> Outcome:
        if self.process is None or not self.process.is_alive():
            self._start()
        self.connection.send((case.model.SerializeToString(), case.feeds, setting))
        if not self.connection.poll(self.timeout):
            self.close()
            return Outcome(Verdict.CRASH, "hang", f"no answer in {self.timeout:.0f} s")
        try:
            return self.connection.recv()
        except EOFError:
            code = self.process.exitcode
            self.close()
            return Outcome(Verdict.CRASH, f"worker died (exit {code})", f"exit code {code}")

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
        self.process = None


def _serve(connection: Any) -> None:
    import onnx

    while True:
        try:
            data, feeds, setting = connection.recv()
        except EOFError:
            return
        case = Case(onnx.load_from_string(data), feeds)
        connection.send(evaluate(case, setting))
