"""The ONNX differential fuzzer's driver: generate, check, reduce, save, report.

`python -m graphfuse.testing.fuzz.onnx_fuzz --minutes 30 --out build/fuzz` (or `make fuzz`)
generates models from consecutive seeds, runs each through the oracle in a worker
process at a setting drawn from the seed (`setting_for`), and shrinks the first few cases
of each failure (verdict and blanked message) to a few nodes, saved as
`<out>/<verdict>-<n>.onnx` with its inputs (`.npz`) and a one-line description (`.txt`).
`<out>/report.txt`, rewritten after every case, counts cases by verdict and lists each
distinct failure with its reduced repro. A case is reproduced from its seed:
`generate(seed, ...)` with the sizes in the report, evaluated at the setting it names.

Vector widths alternate across seeds rather than both running on every case: the oracle
is onnxruntime at either width, so one build per case checks each width against it on
half the cases at half the cost, and twice the graphs are seen in a given time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import Case, generate
from graphfuse.testing.fuzz.onnx_oracle import BUGS, Outcome, Setting, Verdict, Worker
from graphfuse.testing.fuzz.onnx_reduce import Reducer, node_list

REDUCTIONS_PER_KEY = {Verdict.MISMATCH: 4, Verdict.CRASH: 2}
"""How many cases of one failure key to reduce: wrong numbers share a key ('values
float32') across unrelated defects, so several are reduced and told apart by their nodes."""
TEXT_EVERY = 4
"""One seed in this many also runs the text stage (plain xdsl-opt on the imported file;
onnx_text), whose process start would otherwise cost more than a small case's build."""


def node_budget(rng: np.random.Generator, max_nodes: int) -> int:
    """Mostly small graphs (where reduction is fast), some large ones up to `max_nodes`."""
    roll = rng.random()
    if roll < 0.7:
        return int(rng.integers(5, min(40, max_nodes) + 1))
    if roll < 0.9:
        return int(rng.integers(5, min(150, max_nodes) + 1))
    return int(rng.integers(5, max_nodes + 1))


@dataclass
class Finding:
    """One distinct failure: its outcome, how often it was seen, and its saved repro."""

    outcome: Outcome
    path: str
    nodes: str
    seed: int
    setting: Setting
    count: int = 1


@dataclass
class Fuzzer:
    out: Path
    worker: Worker
    max_nodes: int = 60
    threads: Sequence[int] = (1,)
    """Threads per kernel, taken in turn by consecutive seeds (1: serial loops; more:
    the OpenMP-lowered parallel loops and graphfuse's runtime)."""
    lanes: Sequence[int | None] = (None,)
    """Vector widths ($GRAPHFUSE_LANES; None: unset), taken in turn by seeds, each one
    with every thread count."""
    text_every: int = TEXT_EVERY
    """Seeds per text-stage run (0: never)."""
    reduce_tests: int = 150
    reduce_seconds: float = 240.0
    counts: Counter[str] = field(default_factory=lambda: Counter[str]())
    findings: dict[tuple[str, ...], Finding] = field(default_factory=lambda: {})
    reduced: Counter[tuple[str, str]] = field(default_factory=lambda: Counter[tuple[str, str]]())
    unsupported: Counter[str] = field(default_factory=lambda: Counter[str]())

    def run_seed(self, seed: int) -> Outcome | None:
        """Generate, check and (for a new failure) reduce and save the case of `seed`."""
        nodes = node_budget(np.random.default_rng(seed + 7_777_777), self.max_nodes)
        case = generate(seed, min(5, nodes), nodes)
        if case is None:
            self.counts["not generated"] += 1
            return None
        setting = self.setting_for(seed)
        outcome = self.worker.evaluate(case, setting)
        self.counts[outcome.verdict.value] += 1
        if outcome.verdict is Verdict.UNSUPPORTED:
            self.unsupported[outcome.category] += 1
        if outcome.verdict in BUGS:
            self._record(case, outcome, setting)
        return outcome

    def setting_for(self, seed: int) -> Setting:
        """Threads in turn by seed; lanes in turn by each run of the thread counts, so
        every pair is met; the text stage on every `text_every`-th seed."""
        threads = self.threads[seed % len(self.threads)]
        lanes = self.lanes[seed // len(self.threads) % len(self.lanes)]
        text = self.text_every > 0 and seed % self.text_every == 0
        return Setting(threads, lanes, text)

    def _record(self, case: Case, outcome: Outcome, setting: Setting) -> None:
        limit = REDUCTIONS_PER_KEY.get(outcome.verdict, 1)
        if self.reduced[outcome.key] >= limit:
            self._count_known(outcome)
            return
        self.reduced[outcome.key] += 1
        small = self.reduce(case, outcome, setting)
        if small is not case:
            outcome = self.worker.evaluate(small, setting)  # the reduced case's own message
        identity = (*outcome.key, node_signature(small))
        if identity in self.findings:
            self.findings[identity].count += 1
            return
        path = self.save(small, outcome, setting)
        self.findings[identity] = Finding(outcome, path, node_list(small), case.seed, setting)

    def _count_known(self, outcome: Outcome) -> None:
        for identity, finding in self.findings.items():
            if identity[:2] == outcome.key:
                finding.count += 1
                return

    def reduce(self, case: Case, outcome: Outcome, setting: Setting) -> Case:
        def still_fails(candidate: Case) -> bool:
            return self.worker.evaluate(candidate, setting).key == outcome.key

        try:
            reducer = Reducer(case, still_fails, self.reduce_tests, self.reduce_seconds)
        except Exception:  # noqa: BLE001 - a case whose intermediates cannot be listed
            return case
        return reducer.run()

    def save(self, case: Case, outcome: Outcome, setting: Setting) -> str:
        """`<verdict>-<n>.onnx`, `.npz` and `.txt` under the output folder."""
        import onnx

        n = 1 + sum(1 for f in self.findings.values() if f.outcome.verdict is outcome.verdict)
        stem = self.out / f"{outcome.verdict.value}-{n}"
        onnx.save(case.model, str(stem.with_suffix(".onnx")))
        np.savez(str(stem.with_suffix(".npz")), **case.feeds)
        first = outcome.message.splitlines()[0] if outcome.message else outcome.category
        line = (
            f"{outcome.verdict.value}: {first} | seed {case.seed}, {setting.describe()} | "
            f"nodes: {node_list(case)}"
        )
        stem.with_suffix(".txt").write_text(line + "\n" + outcome.message + "\n")
        return str(stem.with_suffix(".onnx"))

    def report(self, header: str) -> str:
        lines = [header, "", "cases by verdict:"]
        lines += [f"  {name:16} {count}" for name, count in sorted(self.counts.items())]
        lines += ["", f"distinct failures: {len(self.findings)}"]
        for finding in self.findings.values():
            o = finding.outcome
            first = o.message.splitlines()[0][:200] if o.message else ""
            lines.append(
                f"  {o.verdict.value} x{finding.count}: {o.category} | {first} | "
                f"{finding.path} | nodes: {finding.nodes} | seed {finding.seed}, "
                f"{finding.setting.describe()}"
            )
        lines += ["", "unsupported (expected diagnostics):"]
        lines += [f"  x{count}: {category}" for category, count in self.unsupported.most_common()]
        return "\n".join(lines) + "\n"


def node_signature(case: Case) -> str:
    """The op types of a reduced case, sorted: two reductions of one defect usually agree."""
    return " ".join(sorted({n.op_type for n in case.model.graph.node}))


def fuzz(args: argparse.Namespace) -> Fuzzer:
    """Run seeds from `args.seed` until `args.minutes` are spent or `args.cases` are done."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("GRAPHFUSE_CACHE_DIR", str(out / "cache"))
    fuzzer = Fuzzer(out, Worker(), args.max_nodes, args.threads, args.lanes, args.text_every)
    deadline = time.monotonic() + 60 * args.minutes
    seed, start = args.seed, time.monotonic()
    while time.monotonic() < deadline and (args.cases is None or seed < args.seed + args.cases):
        outcome = fuzzer.run_seed(seed)
        if args.verbose and outcome is not None:
            print(f"seed {seed}: {outcome.verdict.value} {outcome.category}", flush=True)
        seed += 1
        _write_report(fuzzer, args, seed, start)
    _write_report(fuzzer, args, seed, start)  # also when no seed ran (--minutes 0)
    fuzzer.worker.close()
    return fuzzer


def _write_report(fuzzer: Fuzzer, args: argparse.Namespace, seed: int, start: float) -> None:
    elapsed = time.monotonic() - start
    header = (
        f"graphfuse ONNX fuzzer: seeds {args.seed}..{seed - 1}, {elapsed / 60:.1f} min, "
        f"max {args.max_nodes} nodes, threads {','.join(map(str, args.threads))}, "
        f"lanes {','.join(str(n or 'native') for n in args.lanes)}, text stage every "
        f"{args.text_every or 'no'} seeds"
    )
    # Written aside and renamed: a run stopped mid-write keeps its last whole report.
    out = Path(fuzzer.out)
    (out / "report.txt.new").write_text(fuzzer.report(header))
    (out / "report.txt.new").replace(out / "report.txt")


def reduce_saved(path: str, setting: Setting) -> str:
    """Reduce a saved repro (`x.onnx` beside `x.npz`) again, as `x-reduced.onnx`: for
    cases found by an older reducer, or written by hand."""
    import onnx

    stem = Path(path).with_suffix("")
    case = Case(onnx.load(path), dict(np.load(str(stem.with_suffix(".npz")))))
    fuzzer = Fuzzer(stem.parent, Worker())
    outcome = fuzzer.worker.evaluate(case, setting)
    if outcome.verdict not in BUGS:
        fuzzer.worker.close()
        return f"{path}: {outcome.verdict.value}, nothing to reduce"
    small = fuzzer.reduce(case, outcome, setting)
    outcome = fuzzer.worker.evaluate(small, setting)
    fuzzer.worker.close()
    fuzzer.out = stem.parent / f"{stem.name}-reduced"
    fuzzer.out.mkdir(exist_ok=True)
    return f"{outcome.verdict.value}: {node_list(small)}: {fuzzer.save(small, outcome, setting)}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run")
    parser.add_argument("--cases", type=int, default=None, help="stop after this many seeds")
    parser.add_argument("--out", default="build/fuzz", help="where repros and report go")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: clock)")
    parser.add_argument("--max-nodes", type=int, default=400, help="largest graph")
    parser.add_argument(
        "--threads", default="1", help="threads per kernel, in turn by seed (e.g. 1,2)"
    )
    parser.add_argument(
        "--lanes",
        default="auto",
        help="vector widths ($GRAPHFUSE_LANES), in turn by seed: 'auto' (every width this "
        "machine runs), 'native' (unset), or e.g. 8,16",
    )
    parser.add_argument(
        "--text-every",
        type=int,
        default=TEXT_EVERY,
        help="run the text stage (graphfuse import, plain xdsl-opt) on one seed in this "
        "many (0: never)",
    )
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    parser.add_argument("--reduce", metavar="ONNX", help="reduce a saved repro and stop")
    args = parser.parse_args(argv)
    args.threads = [int(t) for t in str(args.threads).split(",")]
    args.lanes = _lanes(str(args.lanes))
    if args.seed is None:
        args.seed = int(time.time()) % 1_000_000 * 1000
    return args


def _lanes(value: str) -> list[int | None]:
    from graphfuse.runtime.cpu_tools import runnable_lanes

    if value == "auto":
        return list(runnable_lanes())
    if value == "native":
        return [None]
    return [int(n) for n in value.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.reduce:
        setting = Setting(args.threads[0], args.lanes[0], args.text_every > 0)
        print(reduce_saved(args.reduce, setting))
        return 0
    fuzzer = fuzz(args)
    print((Path(fuzzer.out) / "report.txt").read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
