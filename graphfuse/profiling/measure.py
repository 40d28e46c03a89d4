"""Running the two builds: warm-up, then alternating rounds of timed runs.

Per-kernel and whole-run times come from the instrumented build's own timers (runtime.py).
The overhead of those timers is the instrumented build's whole-run time against the
normal build's, both timed per call from Python in alternating rounds (so a shared
machine's noise falls on both alike) and compared by their medians. Both builds first run
once on the same inputs and their results are compared: the timers must not change them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphfuse.profiling import runtime
from graphfuse.profiling.builds import Builds
from graphfuse.profiling.runtime import Counters
from graphfuse.runtime.memref_abi import Array

WARMUP_RUNS = 3
ROUNDS = 5
MIN_RUNS = 3
MAX_RUNS = 100_000
MAX_EVENTS = 200_000
"""Events recorded (a whole number of runs: the first ones), for the medians and the trace:
4.8 MB in the runtime, about 40 MB of trace JSON."""


@dataclass(frozen=True)
class Measurement:
    counters: Counters
    runs: int
    warmup: int
    instrumented_median: float
    """Seconds per call of the instrumented build, timed from Python."""
    normal_median: float
    same_results: bool
    recorded_runs: int
    """Runs whose every call was recorded as an event (medians, trace)."""
    timer_pair_ns: float
    """What the timers around one kernel call cost."""


def plan_runs(per_run: float, runs: int | None, seconds: float) -> int:
    """How many timed runs: `runs` when given, else as many as fit in `seconds` (both
    builds run each time), within [MIN_RUNS, MAX_RUNS]."""
    if runs is not None:
        return runs
    fitting = int(seconds / max(per_run, 1e-9))
    return max(MIN_RUNS, min(MAX_RUNS, fitting))


def measure(builds: Builds, inputs: Sequence[Any], runs: int | None, seconds: float) -> Measurement:
    sites = len(builds.sites)
    pair_ns = runtime.timer_pair_ns()
    runtime.setup(sites, 0)
    normal, instrumented = builds.normal, builds.instrumented
    same = _same(normal(*inputs), instrumented(*inputs))
    start = time.perf_counter()
    for _ in range(WARMUP_RUNS):
        normal(*inputs)
        instrumented(*inputs)
    total = plan_runs((time.perf_counter() - start) / WARMUP_RUNS, runs, seconds)
    recorded = min(total, MAX_EVENTS // (sites + 1))
    runtime.setup(sites, recorded * (sites + 1))  # whole runs only: sites + 1 events each
    rounds = min(ROUNDS, total)
    normal_times: list[float] = []
    instrumented_times: list[float] = []
    for index in range(rounds):
        count = total // rounds + (1 if index < total % rounds else 0)
        if index % 2:  # each build goes first in every other round: no order bias
            instrumented_times += _timed_calls(lambda: instrumented(*inputs), count)
        normal_times += _timed_calls(lambda: normal(*inputs), count)
        if not index % 2:
            instrumented_times += _timed_calls(lambda: instrumented(*inputs), count)
    return Measurement(
        counters=runtime.read(sites),
        runs=total,
        warmup=WARMUP_RUNS + 1,
        instrumented_median=statistics.median(instrumented_times),
        normal_median=statistics.median(normal_times),
        same_results=same,
        recorded_runs=recorded,
        timer_pair_ns=pair_ns,
    )


def _timed_calls(call: Callable[[], object], count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _same(a: Array | tuple[Array, ...], b: Array | tuple[Array, ...]) -> bool:
    first = a if isinstance(a, tuple) else (a,)
    second = b if isinstance(b, tuple) else (b,)
    return len(first) == len(second) and all(
        np.array_equal(x, y, equal_nan=True) for x, y in zip(first, second, strict=True)
    )
