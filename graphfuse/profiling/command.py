"""`graphfuse profile` and `graphfuse run --profile`: load, build twice, run, report.

The CLI (graphfuse/cli.py) parses the options and hands them here; everything a user can
get wrong (the trace's path, the target, the file) is refused in one line before any
build, and the trace is written only once the profile is complete.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from graphfuse.compiler import CompileOptions, input_kind, load
from graphfuse.parsing import GraphfuseError
from graphfuse.profiling import origins as tagging
from graphfuse.profiling.builds import build
from graphfuse.profiling.machine import machine
from graphfuse.profiling.measure import Measurement, measure
from graphfuse.profiling.origins import Origin
from graphfuse.profiling.report import (
    kernel_lines,
    kernel_rows,
    machine_line,
    op_lines,
    op_rows,
    percent,
    threads_text,
)
from graphfuse.profiling.trace import trace_events, write_trace

DEFAULT_SECONDS = 1.0


@dataclass(frozen=True)
class Request:
    """What to measure and show."""

    entry: str = "main"
    runs: int | None = None
    seconds: float = DEFAULT_SECONDS
    trace: str | None = None
    by_op: bool = False
    remeasure: bool = False
    title: str = "graphfuse profile"
    origins_are: str = "ONNX nodes"
    """What --by-op rows name: "ONNX nodes" or "ops of the .mlir entry"."""


def check_target(target: str) -> None:
    if target != "cpu":
        raise GraphfuseError(
            f"profiling times the kernels of the CPU build only; --target {target} is not "
            "supported (leave --target out)"
        )


def check_run_profile(target: str, reference: bool) -> None:
    """`graphfuse run --profile` profiles the CPU build, so needs one."""
    check_target(target)
    if reference:
        raise GraphfuseError("--profile times the compiled kernels; it cannot go with --reference")


def profile_command(args: argparse.Namespace, options: CompileOptions) -> int:
    """`graphfuse profile FILE ...`."""
    from graphfuse.dialects.graph.interpreter import find_function, random_inputs
    from graphfuse.frontend.onnx_checks import parse_constants, parse_input_shapes
    from graphfuse.outputs import check_output_file

    check_target(args.target)
    if args.trace is not None:
        check_output_file(args.trace)
    shapes = parse_input_shapes(args.input_shape or [])
    constants = parse_constants(args.constant or [])
    module, origins = _load(args.file, shapes, constants, args.by_op, args.entry)
    onnx = input_kind(args.file) == "onnx"
    inputs = random_inputs(find_function(module, args.entry), args.seed)
    request = Request(
        args.entry,
        args.runs,
        args.seconds if args.seconds is not None else DEFAULT_SECONDS,
        args.trace,
        args.by_op,
        args.remeasure,
        f"graphfuse profile {Path(args.file).name}",
        "ONNX nodes" if onnx else "ops of the .mlir entry",
    )
    for line in profile(module, options, request, inputs, origins):
        print(line)
    return 0


def _load(
    path: str, shapes: Any, constants: Any, by_op: bool, entry: str
) -> tuple[ModuleOp, dict[str, Origin]]:
    """The module, tagged with its ops' origins when `by_op` (origins.py)."""
    if not by_op:
        return load(path, shapes, constants), {}
    if input_kind(path) == "onnx":
        from graphfuse.frontend.onnx_import import from_onnx

        model, origins = tagging.tag_onnx(path)
        module = load(from_onnx(model, shapes, constants=constants))
    else:
        module = load(path, shapes, constants)
        origins = tagging.tag_mlir(module, entry)
    tagging.adopt_users_tokens(module, entry)
    return module, origins


def profile(
    module: ModuleOp,
    options: CompileOptions,
    request: Request,
    inputs: Sequence[Any],
    origins: dict[str, Origin] | None = None,
) -> list[str]:
    """Build `module` (a graph module, changed in place) twice, run it and return the
    report's lines; writes the trace when the request names one."""
    builds = build(module, request.entry, options)
    found, measured_now = machine(options.threads, request.remeasure)
    result = measure(builds, inputs, request.runs, request.seconds)
    counters = result.counters
    whole = counters.run_total_ns
    rows = kernel_rows(builds.sites, counters)
    lines = [
        f"{request.title} @{request.entry}: {len(builds.sites)} kernel calls per run "
        f"({len(rows)} kernel functions), {result.runs} timed runs after {result.warmup} "
        f"warm-up, {threads_text(options.threads)}",
        machine_line(found, measured_now),
        *kernel_lines(rows, found, whole),
        *_footer(result, sum(counters.totals_ns)),
    ]
    if request.by_op:
        table = op_rows(builds.sites, counters, origins or {}, found)
        lines += op_lines(table, whole, counters.runs, request.origins_are)
    if request.trace is not None:
        write_trace(
            request.trace, trace_events(counters.events, builds.sites, request.entry, request.title)
        )
        lines.append(
            f"trace: wrote {request.trace} ({result.recorded_runs} runs of {result.runs}: "
            f"{len(counters.events)} events); open it in ui.perfetto.dev or chrome://tracing"
        )
    return lines


def _footer(result: Measurement, kernels_ns: int) -> list[str]:
    counters = result.counters
    runs = max(counters.runs, 1)
    whole = counters.run_total_ns
    instrumented, normal = result.instrumented_median, result.normal_median
    overhead = (instrumented - normal) / normal if normal > 0 else 0.0
    timers = result.timer_pair_ns * 1e-9 * len(counters.totals_ns)
    lines = [
        f"coverage: kernels {kernels_ns / runs / 1e3:.2f} us of {whole / runs / 1e3:.2f} us per "
        f"run (mean) inside the instrumented entry: {percent(kernels_ns, whole)} (the rest is "
        "the entry's own code between calls, result copies and the timers)",
        f"overhead: whole run timed from Python, median of {result.runs} each, alternating: "
        f"instrumented {instrumented * 1e6:.2f} us, uninstrumented {normal * 1e6:.2f} us "
        f"({100 * overhead:+.1f}%); the timers cost {result.timer_pair_ns:.0f} ns a kernel "
        f"call here, {timers * 1e6:.2f} us a run ({percent(timers, normal)})",
    ]
    if not result.same_results:
        lines.append("warning: the instrumented build's results differ from the normal build's")
    return lines
