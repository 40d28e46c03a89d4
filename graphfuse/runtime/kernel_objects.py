"""Object files of upstream modules, cached one per module and built in parallel.

Each module (a kernel, or the entry functions: kernel_split.py) becomes an object at
`cache_dir()/<key>.o`, where the key hashes its text, the target, its opt level,
the tools' versions and arguments and FORMAT. A build looks each object up and builds only
the missing ones, so a model with one changed kernel rebuilds one object, and identical
modules share one. Missing objects are built by a thread pool (the work is subprocesses)
in one shard per worker: one mlir-opt and one mlir-translate run over the shard's modules
(their start-up costs more than a small kernel's conversion), then one opt and one llc run
per module. Shards and opt levels were chosen by measurement (docs/decisions.md: one object
per kernel).
"""

from __future__ import annotations

import contextvars
import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from graphfuse.runtime import llvm_lowering
from graphfuse.runtime.cpu_tools import (
    CpuTarget,
    cache_dir,
    run_tool,
    stage_file,
    tool_stage,
    tool_versions,
)
from graphfuse.runtime.progress import Progress
from graphfuse.timing import timed

FORMAT = b"graphfuse-object-2"
"""Changes whenever the way an object is made changes outside the hashed arguments."""

SHARDS_PER_WORKER = 1
"""Shards of missing modules per worker: more pay more tool start-ups (docs/decisions.md)."""


@dataclass(frozen=True)
class ObjectUnit:
    """A module to build into one object: its name (the kernel's), text and opt level."""

    name: str
    text: str
    opt_level: int

    def stages(self, target: CpuTarget) -> list[list[str]]:
        return llvm_lowering.mlir_opt_stages(self.text, target.threads)


def object_key(unit: ObjectUnit, target: CpuTarget) -> str:
    """The cache key of `unit`'s object: everything its bytes depend on."""
    digest = hashlib.sha256()
    for part in (
        unit.text,
        target.triple,
        repr(unit.stages(target)),
        repr(llvm_lowering.opt_args(target, unit.opt_level)),
        repr(llvm_lowering.llc_args(target, unit.opt_level)),
        tool_versions("mlir-opt", "mlir-translate", "opt", "llc"),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(FORMAT)
    return digest.hexdigest()[:32]


def objects_dir() -> Path:
    """Where objects are cached: the cache's own folder, beside the libraries, so that the
    cache stays a folder of files (tests empty it file by file)."""
    return cache_dir()


def build_objects(units: Sequence[ObjectUnit], target: CpuTarget) -> list[Path]:
    """The object of each of `units`, from the cache or built (in parallel) into it."""
    with timed("look up objects"):
        paths = [objects_dir() / f"{object_key(unit, target)}.o" for unit in units]
        missing = {path: unit for path, unit in zip(paths, units, strict=True)}
        missing = {path: unit for path, unit in missing.items() if not path.exists()}
    if missing:
        workers = os.cpu_count() or 1
        name = f"build {len(missing)} of {len(units)} objects ({workers} workers, tools summed)"
        with timed(name):
            _build_missing(missing, target, workers)
    return paths


def _build_missing(missing: dict[Path, ObjectUnit], target: CpuTarget, workers: int) -> None:
    """mlir-opt and mlir-translate per shard; then opt and llc per module, each its own job
    on a second pool as soon as its shard is translated, so that a shard with a slow
    module does not hold the others back (the GEMM tiles at -O3 take longest)."""
    for tool, stage in llvm_lowering.TOOL_STAGES:
        # Made here, not by the workers at once: their runs add up under these stages.
        with timed(tool_stage(tool, stage)):
            pass
    shards = _shards(list(missing.items()), workers * SHARDS_PER_WORKER)
    compiles: list[Future[None]] = []
    with (
        Progress(len(missing), "building kernels") as progress,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphfuse-llc") as pool,
    ):

        def compile_later(path: Path, unit: ObjectUnit, llvm_ir: str) -> None:
            def job() -> None:
                _compile(llvm_ir, unit.opt_level, target, path)
                progress.advance()

            compiles.append(pool.submit(_in_this_context(job)))

        try:
            _run_all(
                [_in_this_context(_build_shard, s, target, compile_later) for s in shards], workers
            )
        finally:
            # The opt/llc jobs already started end before a failure is raised.
            wait(compiles)
        failed = next((f for f in compiles if f.exception() is not None), None)
        if failed is not None:
            failed.result()


def _shards(
    pending: list[tuple[Path, ObjectUnit]], count: int
) -> list[list[tuple[Path, ObjectUnit]]]:
    """`pending` in at most `count` shards of about equal text (largest first, each to the
    lightest shard: LPT scheduling)."""
    shards: list[list[tuple[Path, ObjectUnit]]] = [[] for _ in range(min(count, len(pending)))]
    sizes = [0] * len(shards)
    for item in sorted(pending, key=lambda item: -len(item[1].text)):
        lightest = sizes.index(min(sizes))
        shards[lightest].append(item)
        sizes[lightest] += len(item[1].text)
    return shards


def _in_this_context(job: Callable[..., None], *args: object) -> Callable[[], None]:
    """`job(*args)` to run in a worker with this thread's context (the --timing stage)."""
    context = contextvars.copy_context()
    return lambda: context.run(job, *args)


def _run_all(jobs: Sequence[Callable[[], None]], workers: int) -> None:
    """Run `jobs` on `workers` threads; the first failure cancels the jobs not started
    and is raised once the running ones end."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphfuse-build") as pool:
        futures: list[Future[None]] = [pool.submit(job) for job in jobs]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f in done and f.exception() is not None), None)
        if failed is not None:
            for future in futures:
                future.cancel()
            wait(futures)
            failed.result()


def _build_shard(
    shard: list[tuple[Path, ObjectUnit]],
    target: CpuTarget,
    compile_later: Callable[[Path, ObjectUnit, str], None],
) -> None:
    """One shard: modules that share mlir-opt stages converted together; each module's
    LLVM IR then handed on to be optimised and compiled to its object."""
    groups: dict[str, list[tuple[Path, ObjectUnit]]] = {}
    for item in shard:
        groups.setdefault(repr(item[1].stages(target)), []).append(item)
    for group in groups.values():
        stages = group[0][1].stages(target)
        llvm_irs = llvm_lowering.to_llvm_ir_modules([unit.text for _, unit in group], stages)
        for (path, unit), llvm_ir in zip(group, llvm_irs, strict=True):
            compile_later(path, unit, llvm_ir)


def _compile(llvm_ir: str, level: int, target: CpuTarget, path: Path) -> None:
    optimised = llvm_lowering.optimise(llvm_ir, target, level)
    partial = stage_file(path.parent, suffix=".o")
    try:
        args = [*llvm_lowering.llc_args(target, level), "-o", str(partial)]
        run_tool(llvm_lowering.GENERATING, "llc", args, optimised)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


TILED_MARK = "vector."
"""What loop-tile-matmul's GEMM micro-kernels hold and other kernels do not: vector ops."""
UNTILED_OPT_LEVEL = 2
"""opt and llc level of kernels without GEMM tiles (docs/decisions.md: opt levels)."""
ENTRY_OPT_LEVEL = 0
"""opt and llc level of the entry functions, which only pass buffers to the kernels."""


def opt_level_for(text: str, target: CpuTarget, entry: bool = False) -> int:
    """The opt level of a module: the target's for GEMM tiles, and for every module when
    the user chose the level; ENTRY_OPT_LEVEL and UNTILED_OPT_LEVEL (at most the target's)
    for the entry functions and other kernels."""
    if target.uniform_opt_level:
        return target.opt_level
    if entry:
        return min(target.opt_level, ENTRY_OPT_LEVEL)
    if TILED_MARK in text:
        return target.opt_level
    return min(target.opt_level, UNTILED_OPT_LEVEL)
