"""The profiling runtime (`profile_runtime.c`): built once, loaded globally, read by ctypes.

It is built by the system C compiler into the build cache, under a name carrying a hash of
its source (as the parallel runtime is, graphfuse.runtime.parallel), and loaded with
RTLD_GLOBAL before an instrumented library: the library's calls to `graphfuse_profile_*`
are left undefined at link time and bind to this copy when it is loaded. So the
instrumented library links exactly like the normal one (graphfuse.runtime.build is not
changed), and no library but an instrumented one ever refers to the runtime.
"""

from __future__ import annotations

import ctypes
import hashlib
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from graphfuse.parsing import GraphfuseError
from graphfuse.runtime.cpu_tools import cache_dir, run_tool, write_atomically

_SOURCE = "profile_runtime.c"
PREFIX = "graphfuse_profile_"
"""The runtime's functions: `graphfuse_profile_enter(i32)` and so on."""


class _Event(ctypes.Structure):
    _fields_ = [
        ("site", ctypes.c_int32),
        ("run", ctypes.c_int32),
        ("start_ns", ctypes.c_int64),
        ("duration_ns", ctypes.c_int64),
    ]


@dataclass(frozen=True)
class Event:
    """One kernel call (`site` >= 0) or one whole run (`site` == -1), in nanoseconds of
    CLOCK_MONOTONIC."""

    site: int
    run: int
    start_ns: int
    duration_ns: int


@dataclass(frozen=True)
class Counters:
    """What the runtime measured since it was set up."""

    totals_ns: list[int]
    """Per call site, the time of all its calls."""
    counts: list[int]
    run_total_ns: int
    """The whole runs' time, measured inside the instrumented entry."""
    runs: int
    events: list[Event]
    dropped: int
    """Events that found the buffer full."""


@cache
def source() -> str:
    try:
        return resources.files("graphfuse.profiling").joinpath(_SOURCE).read_text()
    except OSError:
        raise GraphfuseError(
            f"graphfuse is installed without graphfuse/profiling/{_SOURCE} (its package data)"
        ) from None


def library_path() -> Path:
    """The runtime library in the cache, built on first use."""
    digest = hashlib.sha256(source().encode()).hexdigest()[:16]
    library = cache_dir() / f"libgraphfuse_profile-{digest}.so"
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(prefix="graphfuse-profile-") as work:
        written = Path(work) / _SOURCE
        written.write_text(source())
        built = Path(work) / library.name
        flags = ["-O2", "-fPIC", "-shared", "-pthread"]
        run_tool("building the profiling runtime", "cc", [*flags, "-o", str(built), str(written)])
        write_atomically(library, built.read_bytes())
    return library


@cache
def runtime() -> ctypes.CDLL:
    """The runtime, loaded so that libraries loaded after it resolve its symbols."""
    library = ctypes.CDLL(str(library_path()), mode=ctypes.RTLD_GLOBAL)
    library.graphfuse_profile_setup.argtypes = [ctypes.c_int32, ctypes.c_int64]
    library.graphfuse_profile_setup.restype = ctypes.c_int32
    library.graphfuse_profile_events.argtypes = [ctypes.POINTER(_Event), ctypes.c_int64]
    library.graphfuse_profile_events.restype = ctypes.c_int64
    library.graphfuse_profile_fma_rate.argtypes = [ctypes.c_int32, ctypes.c_int64]
    library.graphfuse_profile_fma_rate.restype = ctypes.c_double
    library.graphfuse_profile_fma_lanes.restype = ctypes.c_int32
    library.graphfuse_profile_pair_ns.argtypes = [ctypes.c_int64]
    library.graphfuse_profile_pair_ns.restype = ctypes.c_double
    return library


def timer_pair_ns(pairs: int = 100_000) -> float:
    """What the timers around one kernel call cost, in ns (best of 3); leaves the counters
    dirty: call `setup` afterwards."""
    setup(1, 0)
    return min(float(runtime().graphfuse_profile_pair_ns(pairs)) for _ in range(3))


def setup(sites: int, event_capacity: int) -> None:
    """Zero the counters for `sites` call sites, with room for `event_capacity` events."""
    if runtime().graphfuse_profile_setup(sites, event_capacity) != 0:
        raise GraphfuseError(
            f"profiling: cannot allocate room for {event_capacity} trace events (use fewer --runs)"
        )


def read(sites: int) -> Counters:
    library = runtime()
    totals = (ctypes.c_int64 * max(sites, 1))()
    counts = (ctypes.c_int64 * max(sites, 1))()
    summary = (ctypes.c_int64 * 4)()
    library.graphfuse_profile_read(totals, counts, summary)
    recorded = summary[2]
    buffer = (_Event * max(recorded, 1))()
    copied = library.graphfuse_profile_events(buffer, recorded)
    events = [Event(e.site, e.run, e.start_ns, e.duration_ns) for e in buffer[:copied]]
    return Counters(
        list(totals[:sites]), list(counts[:sites]), summary[0], summary[1], events, summary[3]
    )


def fma_rate(threads: int, steps: int) -> float:
    """FLOP/s of the runtime's FMA loop on `threads` threads (`steps` steps each)."""
    return float(runtime().graphfuse_profile_fma_rate(threads, steps))


def fma_lanes() -> int:
    """f32 lanes of the vectors the FMA loop uses on this CPU (16: AVX-512, 8: AVX2)."""
    return int(runtime().graphfuse_profile_fma_lanes())
