"""The profile as text: a row per kernel function, a row per original op, a footer.

A kernel function may serve several call sites (identical kernels are built once); its
row adds their times and calls. Bytes and FLOPs per call are the cost model's (the fused
graph's kernel: inputs read once, results written once); achieved rates divide the
totals by the measured time, and `roofline` is the share of the machine's roofline the
kernel reached: the time the roofline allows, max(bytes / bandwidth, FLOPs / peak),
over the time measured.

`--by-op` splits each call site's time among the kernel's ops in proportion to their
roofline cost alone, max(FLOPs / peak, bytes / bandwidth), bytes being what the op reads
from or writes to memory (a matmul weighs its FLOPs, a layout op its bytes, an epilogue
its FLOPs), and adds the pieces by original op (origins.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graphfuse.profiling.builds import Site
from graphfuse.profiling.machine import Machine
from graphfuse.profiling.origins import UNATTRIBUTED, Origin
from graphfuse.profiling.runtime import Counters


@dataclass
class KernelRow:
    name: str
    kind: str
    ops: int
    calls: int = 0
    total_ns: int = 0
    bytes_moved: int = 0
    """In all calls."""
    flops: int = 0
    durations: list[int] = field(default_factory=list[int])
    """Of each recorded call, ns."""


@dataclass
class OpRow:
    label: str
    op_type: str
    total_ns: float = 0.0
    kernels: list[str] = field(default_factory=list[str])


def kernel_rows(sites: Sequence[Site], counters: Counters) -> list[KernelRow]:
    """A row per kernel function, slowest first."""
    rows: dict[str, KernelRow] = {}
    for index, site in enumerate(sites):
        row = rows.setdefault(site.kernel, KernelRow(site.kernel, site.kind, len(site.ops)))
        calls = counters.counts[index]
        row.calls += calls
        row.total_ns += counters.totals_ns[index]
        row.bytes_moved += site.bytes_moved * calls
        row.flops += site.flops * calls
    for event in counters.events:
        if event.site >= 0:
            rows[sites[event.site].kernel].durations.append(event.duration_ns)
    return sorted(rows.values(), key=lambda r: (-r.total_ns, r.name))


def op_rows(
    sites: Sequence[Site], counters: Counters, origins: Mapping[str, Origin], machine: Machine
) -> list[OpRow]:
    """A row per original op (and one for what no origin names), slowest first."""
    rows: dict[str, OpRow] = {}
    for index, site in enumerate(sites):
        costs = [machine.attainable_seconds(c.bytes_moved, c.flops) for c in site.op_costs]
        whole = sum(costs)
        for cost, op in zip(costs, site.op_costs, strict=True):
            share = cost / whole if whole > 0 else 1 / len(costs)
            origin = origins.get(op.token or "")
            key = origin.label if origin is not None else UNATTRIBUTED
            row = rows.setdefault(key, OpRow(key, origin.op_type if origin else ""))
            row.total_ns += share * counters.totals_ns[index]
            if site.kernel not in row.kernels:
                row.kernels.append(site.kernel)
    return sorted(rows.values(), key=lambda r: (-r.total_ns, r.label))


def si(value: float, unit: str = "") -> str:
    """`value` with an SI prefix: 1.23 k, 45.6 M."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".rstrip()


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


KERNEL_HEADER = (
    f"{'share':>6} {'total ms':>9} {'mean us':>9} {'median':>9} {'calls':>6} {'ops':>4} "
    f"{'kind':20} {'bytes/call':>10} {'FLOPs/call':>10} {'GB/s':>7} {'GFLOP/s':>8} "
    f"{'roofline':>8}  kernel"
)


def kernel_lines(rows: Sequence[KernelRow], machine: Machine, whole_ns: int) -> list[str]:
    lines = [KERNEL_HEADER]
    for row in rows:
        seconds = row.total_ns * 1e-9
        calls = max(row.calls, 1)
        ideal = machine.attainable_seconds(row.bytes_moved, row.flops)
        lines.append(
            f"{percent(row.total_ns, whole_ns):>6} {seconds * 1e3:9.3f} "
            f"{seconds * 1e6 / calls:9.2f} {_median_us(row.durations):>9} {row.calls:6} "
            f"{row.ops:4} {row.kind:20} "
            f"{si(row.bytes_moved / calls, 'B'):>10} {si(row.flops / calls):>10} "
            f"{_rate(row.bytes_moved, seconds):>7} {_rate(row.flops, seconds):>8} "
            f"{percent(ideal, seconds):>8}  {row.name}"
        )
    above = [r.name for r in rows if r.total_ns and _flop_rate(r) > ROOF_SLACK * machine.peak_flops]
    if above:
        lines.append(
            f"note: {len(above)} kernel(s) faster than the measured peak FLOP rate: the cached "
            "machine figures are low (measured while the machine was busy?); --remeasure "
            "takes them again"
        )
    return lines


ROOF_SLACK = 1.1
"""No kernel computes faster than the machine's peak: one more than 10% above the measured
peak shows the measurement was off. (Above the bandwidth is normal: a kernel whose data
stay in cache moves them faster than the large copy that measures it.)"""


def _flop_rate(row: KernelRow) -> float:
    return row.flops / (row.total_ns * 1e-9)


def _median_us(durations: list[int]) -> str:
    return f"{statistics.median(durations) / 1e3:.2f}" if durations else "-"


def _rate(amount: float, seconds: float) -> str:
    """Giga-units per second."""
    return f"{amount / seconds / 1e9:.2f}" if seconds > 0 else "-"


def op_lines(rows: Sequence[OpRow], whole_ns: int, runs: int, what: str) -> list[str]:
    lines = [
        "by op: each kernel call's time split among its ops in proportion to their roofline "
        f"cost, max(FLOPs / peak, memory bytes / bandwidth); rows are {what}",
        f"{'share':>6} {'total ms':>9} {'us/run':>9} {'type':16} {'op':40} kernels",
    ]
    for row in rows:
        kernels = ", ".join(row.kernels[:3])
        if len(row.kernels) > 3:
            kernels += f" and {len(row.kernels) - 3} more"
        lines.append(
            f"{percent(row.total_ns, whole_ns):>6} {row.total_ns * 1e-6:9.3f} "
            f"{row.total_ns * 1e-3 / max(runs, 1):9.2f} {row.op_type:16} {row.label:40} {kernels}"
        )
    return lines


def machine_line(machine: Machine, measured_now: bool) -> str:
    when = "measured now" if measured_now else f"measured {machine.measured}, cached"
    return (
        f"machine: {machine.cpu}, {threads_text(machine.threads)}: memory bandwidth "
        f"{si(machine.bandwidth, 'B/s')} ({machine.bandwidth_method}), peak "
        f"{si(machine.peak_flops, 'FLOP/s')} f32 ({machine.peak_method}); {when}"
    )


def threads_text(count: int) -> str:
    return f"{count} thread" if count == 1 else f"{count} threads"
