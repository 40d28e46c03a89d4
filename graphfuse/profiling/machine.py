"""This machine's roofline: memory bandwidth and peak f32 FLOP rate, measured once, cached.

- Bandwidth: a NumPy copy of 128 MiB (four times a large L3) into another array, split
  over the profile's threads (NumPy releases the GIL while it copies), best of 10: bytes
  read plus bytes written per second, the way the cost model counts a kernel's bytes.
- Peak: the profiling runtime's FMA loop (profile_runtime.c): 12 independent FMA chains on
  the widest vectors the CPU has, one thread per profile thread, best of 20. It is the f32
  rate the arithmetic units reach when nothing waits on memory; a GEMM reaches a fraction.
- Both are never below one thread's figure: a try with a descheduled worker is discarded.

The figures are kept in the build cache under the CPU's model name and the thread count:
a cache shared with another kind of machine, or a profile with other threads, measures
afresh. On a loaded machine both figures come out low; `--remeasure` takes them again.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from graphfuse.profiling import runtime
from graphfuse.runtime.cpu_tools import cache_dir, write_atomically

COPY_BYTES = 128 * 1024 * 1024
COPY_TRIES = 10
FMA_TRIES = 20
"""Short tries, many: on a shared machine the best of them is the one nobody interrupted."""
FMA_STEPS = 4_000_000
"""Steps of the FMA chains per thread and try: ~0.02 s on a 3 GHz AVX-512 core."""
FORMAT = 2
"""Bumped when the measurement changes, so figures taken the old way are taken again."""


@dataclass(frozen=True)
class Machine:
    """The two numbers of this machine's roofline and how they were found."""

    cpu: str
    threads: int
    bandwidth: float
    """Bytes per second, read plus written."""
    peak_flops: float
    """f32 floating-point operations per second."""
    bandwidth_method: str
    peak_method: str
    measured: str

    def attainable_seconds(self, bytes_moved: float, flops: float) -> float:
        """The roofline's time for this much traffic and arithmetic: the slower of the two."""
        return max(bytes_moved / self.bandwidth, flops / self.peak_flops)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or 'unknown cpu'."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown cpu"


def _cache_file(cpu: str, threads: int) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", cpu).strip("-").lower() or "cpu"
    return cache_dir() / "machine" / f"{slug}-{threads}t.json"


def machine(threads: int, remeasure: bool = False) -> tuple[Machine, bool]:
    """This machine's figures for `threads` threads, and whether they were measured now."""
    cpu = cpu_model()
    path = _cache_file(cpu, threads)
    if not remeasure:
        found = _read(path, cpu, threads)
        if found is not None:
            return found, False
    measured = measure(cpu, threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"format": FORMAT, **asdict(measured)}
    write_atomically(path, json.dumps(record, indent=1).encode())
    return measured, True


def _read(path: Path, cpu: str, threads: int) -> Machine | None:
    try:
        record = json.loads(path.read_text())
        if record.pop("format") != FORMAT:
            return None
        found = Machine(**record)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.cpu == cpu and found.threads == threads else None


def measure(cpu: str, threads: int) -> Machine:
    lanes = runtime.fma_lanes()
    # More threads never lower the machine's rates: the best over every thread count up to
    # `threads` keeps a try whose extra thread was descheduled (or shares one core with the
    # first, as a VM's two vCPUs may) from setting a roof the kernels then run above.
    counts = sorted({1, threads})
    peak = max(runtime.fma_rate(n, FMA_STEPS) for n in counts for _ in range(FMA_TRIES))
    return Machine(
        cpu=cpu,
        threads=threads,
        bandwidth=max(copy_bandwidth(n) for n in counts),
        peak_flops=peak,
        bandwidth_method=f"NumPy copy of {COPY_BYTES >> 20} MiB",
        peak_method=f"compiled FMA loop, {lanes} f32 lanes",
        measured=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def copy_bandwidth(threads: int) -> float:
    """Bytes read plus written per second by a large NumPy copy on `threads` threads."""
    import numpy as np

    count = COPY_BYTES // 4
    source = np.ones(count, np.float32)
    target = np.zeros_like(source)  # touched now: no page faults in the timed copies
    bounds = [count * t // threads for t in range(threads + 1)]

    def copy(part: int) -> None:
        low, high = bounds[part], bounds[part + 1]
        np.copyto(target[low:high], source[low:high])

    best = float("inf")
    for _ in range(COPY_TRIES):
        workers = [threading.Thread(target=copy, args=(t,)) for t in range(1, threads)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        copy(0)
        for worker in workers:
            worker.join()
        best = min(best, time.perf_counter() - start)
    return 2 * COPY_BYTES / best
