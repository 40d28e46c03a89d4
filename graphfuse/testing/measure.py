"""Timing helpers the benchmarks share: best-of-N wall time and a compile with a cold cache.

One definition, imported by every bench script, so the scripts measure the same way.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import graphfuse
from graphfuse.compiler import CompileOptions


def best_time(run: Callable[[], Any], seconds: float, most: int = 20) -> float:
    """Best of repeated runs after a warm-up, until `seconds` are spent (at least 2 runs)."""
    run()
    times: list[float] = []
    spent = 0.0
    while len(times) < 2 or (spent < seconds and len(times) < most):
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        spent += elapsed
    return min(times)


def cold_compile(module: Any, options: CompileOptions | None = None) -> tuple[Any, float]:
    """Compile with an empty build cache; the compiled function and the seconds it took."""
    with tempfile.TemporaryDirectory() as cold:
        os.environ["GRAPHFUSE_CACHE_DIR"] = cold
        try:
            start = time.perf_counter()
            compiled = graphfuse.compile(module, options=options or CompileOptions())
            return compiled, time.perf_counter() - start
        finally:
            del os.environ["GRAPHFUSE_CACHE_DIR"]
