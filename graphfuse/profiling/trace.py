"""A profile as a Chrome / Perfetto trace (the Trace Event Format's JSON object form).

One complete event (`"ph": "X"`, microseconds) per kernel call and one per whole run, all
on the thread that called the entry, so each run's kernels nest under it in
chrome://tracing and ui.perfetto.dev; `args` hold the kernel's kind, ops, bytes and FLOPs
per call and its call site. Times start at the first recorded run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphfuse.outputs import write_all
from graphfuse.profiling.builds import Site
from graphfuse.profiling.runtime import Event


def trace_events(
    events: Sequence[Event], sites: Sequence[Site], entry: str, title: str
) -> dict[str, Any]:
    pid = os.getpid()
    origin = min((e.start_ns for e in events), default=0)
    listed: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": title}},
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"@{entry}"}},
    ]
    for event in events:
        common: dict[str, Any] = {
            "ph": "X",
            "ts": (event.start_ns - origin) / 1e3,
            "dur": event.duration_ns / 1e3,
            "pid": pid,
            "tid": 0,
        }
        if event.site < 0:
            listed.append({"name": f"@{entry}", "cat": "run", **common, "args": {"run": event.run}})
            continue
        site = sites[event.site]
        args = {
            "kind": site.kind,
            "ops": list(site.ops),
            "bytes": site.bytes_moved,
            "flops": site.flops,
            "site": event.site,
            "run": event.run,
        }
        listed.append({"name": site.kernel, "cat": "kernel", **common, "args": args})
    return {"traceEvents": listed, "displayTimeUnit": "ms"}


def write_trace(path: str | Path, trace: dict[str, Any]) -> None:
    """All or nothing (graphfuse.outputs.write_all)."""
    write_all({path: json.dumps(trace) + "\n"})
