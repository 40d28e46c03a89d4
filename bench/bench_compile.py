"""Benchmark: what `graphfuse compile` costs its user on real models, beside onnxruntime.

Run: `.venv/bin/python bench/bench_compile.py [--only tiny ...] [--models-dir DIR] [--timing]
[--torch]`.

Models (graphfuse/testing/model_zoo.py, random weights, exported once into --models-dir and
reused): BERT-base (weights as ONNX external data), the tests' 2-layer tiny BERT, ResNet-50,
and two more ImageNet CNNs of the Hugging Face library (MobileNetV2, ConvNeXt-tiny). Each is
compiled by the `graphfuse` command in a subprocess, as a user runs it: cold (an empty
GRAPHFUSE_CACHE_DIR), warm (same cache, same command) and warm to another file name (same
cache, another `-o`). Beside them: the construction of onnxruntime's InferenceSession on the
same file (ORT_ENABLE_ALL, best of 3 in one subprocess after its import); peak memory
(process tree's summed RSS sampled from /proc, and the largest single process's ru_maxrss);
the weights (initializer bytes); `graphfuse import -o`'s module text and weights file; the
library; `graphfuse --help` (best of 5). The compile-time targets follow, each ok or over.
`--timing` prints graphfuse's stage tree of each cold compile. `--torch` adds
torch.compile's first call on the models of graphfuse/testing/torch_models.py (bench sizes),
graphfuse's backend beside inductor, each in a new process: cold (empty caches), then warm
(the same caches, a new process: what a user's second run pays).
"""

from __future__ import annotations

from graphfuse.testing.extras import require

require(__file__, "onnxruntime", "onnx", "torch", "transformers")

import argparse
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MODELS: dict[str, tuple[str, bool]] = {
    "bert-base": ("bert", False),
    "bert-tiny": ("bert", True),
    "resnet-50": ("resnet", False),
    "mobilenet-v2": ("mobilenet_v2", False),
    "convnext-tiny": ("convnext", False),
}
"""Bench name -> (graphfuse.testing.model_zoo name, tiny)."""

MB = 1e6
GB = 1e9
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_SECONDS = 0.05
"""How often the process tree's memory is sampled: often enough for a compile's stages,
rarely enough that the sampling takes no core away from the compile."""

EXPORT = (
    "import sys; from pathlib import Path; from graphfuse.testing.model_zoo import export; "
    "export(sys.argv[1], Path(sys.argv[2]), tiny=sys.argv[3] == 'tiny')"
)

ORT_SESSION = """
import sys, time
import onnxruntime as ort
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
    best = min(best, time.perf_counter() - start)
    del session
print(best)
"""


TORCH_FIRST_CALL = """
import sys, time
import torch
from graphfuse.testing.torch_models import SAMPLES
name, backend = sys.argv[1], sys.argv[2]
sample = SAMPLES[name](True)
with torch.no_grad():
    if backend == "graphfuse":
        from graphfuse.compiler import CompileOptions
        from graphfuse.torch_backend import GraphfuseBackend
        compiled = torch.compile(sample.model, backend=GraphfuseBackend(CompileOptions()))
    else:
        compiled = torch.compile(sample.model)
    start = time.perf_counter()
    got = compiled(sample.input)
    seconds = time.perf_counter() - start
    torch.testing.assert_close(got, sample.model(sample.input), rtol=1e-4, atol=1e-4)
print(seconds)
"""
"""torch.compile's first call (the compile) of one model with one backend, checked."""


def tree_rss(root: int) -> int:
    """Summed RSS (bytes) of `root` and its descendants now, read from /proc/<pid>/stat
    (a scan of every process: this kernel may not list /proc/<pid>/task/*/children)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as file:
                stat = file.read()
        except OSError:  # it ended while we looked
            continue
        # The fields after "(command) ": state, ppid, ..., rss (in pages) the 22nd.
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        rss[int(entry.name)] = int(fields[21]) * PAGE
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class TreePeak:
    """The largest summed RSS of a process tree while it runs, sampled in a thread. Pages
    two processes share (a weights file both map) count in each, as RSS does."""

    def __init__(self, root: int):
        self.peak = 0
        self._root = root
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss(self._root))
            if self._done.wait(SAMPLE_SECONDS):
                return

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


@dataclass(frozen=True)
class Run:
    """One measured subprocess: wall time (spawn to exit), peak memory, output."""

    returncode: int
    seconds: float
    tree_peak: int
    """Bytes: the largest summed RSS of the process and its descendants (sampled)."""
    process_peak: int
    """Bytes: ru_maxrss of the process and its waited-for descendants, i.e. the largest
    single process; a spawned child starts from its parent's high-water mark."""
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def peak(self) -> int:
        """The larger peak: sampling can miss a short spike that ru_maxrss keeps."""
        return max(self.tree_peak, self.process_peak)

    def failure(self) -> str:
        lines = (self.stderr or self.stdout).strip().splitlines()
        return f"exit status {self.returncode}: {lines[-1] if lines else '(no output)'}"


def measured(command: Sequence[str], env: dict[str, str] | None = None) -> Run:
    """Runs `command` to the end: its wall time and peak memory."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        sampler = TreePeak(process.pid)
        # wait4, not wait: the rusage of this child alone (RUSAGE_CHILDREN only grows).
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        tree_peak = sampler.stop()
        out.seek(0)
        err.seek(0)
        return Run(
            process.returncode,
            seconds,
            tree_peak,
            usage.ru_maxrss * 1024,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def graphfuse_command() -> list[str]:
    """The `graphfuse` script installed beside this Python, as a user runs it."""
    script = Path(sys.executable).parent / "graphfuse"
    return [str(script)] if script.exists() else [sys.executable, "-m", "graphfuse.cli"]


def exported(name: str, models_dir: Path) -> Path:
    """models_dir/<name>/<model>.onnx, exported on first use and reused after. The export
    (torch) runs in a subprocess, so that this process stays small: a spawned child's
    ru_maxrss starts at its parent's."""
    model, tiny = MODELS[name]
    folder = models_dir / name
    path = folder / f"{model}.onnx"
    if path.exists():
        return path
    partial = models_dir / f"{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    print(f"exporting {name} into {folder} (once; later runs reuse it)", flush=True)
    run = measured([sys.executable, "-c", EXPORT, model, str(partial), "tiny" if tiny else "full"])
    if not run.ok:
        raise SystemExit(f"export of {name} failed:\n{run.stderr}")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return path


def initializer_bytes(path: Path) -> int:
    """The model's weights: each initializer's shape times its element size (external data
    is not read)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return sum(
        onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize * math.prod(t.dims)
        for t in model.graph.initializer
    )


def module_sizes(module: Path) -> tuple[int, int]:
    """Bytes of a module written by `graphfuse import -o` and of the weights file its
    graphfuse.weights attribute names (0 when the weights are in the text)."""
    if not module.exists():
        return 0, 0
    with open(module, errors="replace") as file:
        head = file.read(1 << 16)
    named = re.search(r'graphfuse\.weights = "([^"]+)"', head)
    weights = module.parent / named.group(1) if named else None
    return module.stat().st_size, weights.stat().st_size if weights and weights.exists() else 0


@dataclass(frozen=True)
class Result:
    """One model's figures."""

    name: str
    weights: int
    imported: Run
    module: int
    module_weights: int
    cold: Run
    warm: Run
    renamed: Run
    """Warm, written to another file name."""
    library: int
    ort: Run

    @property
    def ort_seconds(self) -> float | None:
        return float(self.ort.stdout.split()[-1]) if self.ort.ok else None


def measure(name: str, model: Path, graphfuse: list[str], timing: bool) -> Result:
    """Import, compile cold and warm, and onnxruntime's session, each in a subprocess."""
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        imported = measured([*graphfuse, "import", str(model), "-o", str(folder / "model.mlir")])
        module, module_weights = module_sizes(folder / "model.mlir")
        cache = folder / "cache"
        cache.mkdir()
        env = {**os.environ, "GRAPHFUSE_CACHE_DIR": str(cache)}
        library = folder / "model.so"
        command = [*graphfuse, "compile", str(model), "-o", str(library)]
        cold = measured([*command, "--timing"] if timing else command, env)
        warm = measured(command, env)
        renamed = measured([*command[:-1], str(folder / "other_name.so")], env)
        library_bytes = library.stat().st_size if library.exists() else 0
        ort = measured([sys.executable, "-c", ORT_SESSION, str(model)])
    weights = initializer_bytes(model)
    return Result(
        name, weights, imported, module, module_weights, cold, warm, renamed, library_bytes, ort
    )


@dataclass(frozen=True)
class TorchResult:
    """torch.compile's first call of one model: cold and warm, per backend (None: failed)."""

    name: str
    seconds: dict[str, tuple[float | None, float | None]]


def measure_torch(name: str) -> TorchResult:
    """The first call with empty caches, then again in a new process with the same caches
    (graphfuse's and inductor's own)."""
    found: dict[str, tuple[float | None, float | None]] = {}
    for backend in ("graphfuse", "inductor"):
        with tempfile.TemporaryDirectory() as work:
            env = {
                **os.environ,
                "GRAPHFUSE_CACHE_DIR": str(Path(work) / "graphfuse"),
                "TORCHINDUCTOR_CACHE_DIR": str(Path(work) / "inductor"),
                "TRITON_CACHE_DIR": str(Path(work) / "triton"),
            }
            runs = [
                measured([sys.executable, "-c", TORCH_FIRST_CALL, name, backend], env)
                for _ in range(2)
            ]
        cold, warm = (float(r.stdout.split()[-1]) if r.ok else None for r in runs)
        found[backend] = (cold, warm)
        for label, run in zip(("cold", "warm"), runs, strict=True):
            if not run.ok:
                print(f"torch.compile {name} {backend} {label} failed, {run.failure()}")
    return TorchResult(name, found)


def print_torch(results: Sequence[TorchResult]) -> None:
    def shown(value: float | None) -> str:
        return f"{value:.2f} s" if value is not None else "failed"

    print(
        f"\n{'torch.compile':18} {'graphfuse cold':>15} {'warm':>8} "
        f"{'inductor cold':>14} {'warm':>8}"
    )
    for r in results:
        (g_cold, g_warm), (i_cold, i_warm) = r.seconds["graphfuse"], r.seconds["inductor"]
        print(
            f"{r.name:18} {shown(g_cold):>15} {shown(g_warm):>8} "
            f"{shown(i_cold):>14} {shown(i_warm):>8}"
        )


def help_seconds(graphfuse: list[str]) -> float:
    """Best wall time of five `graphfuse --help` subprocesses."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([*graphfuse, "--help"], capture_output=True, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def size(count: int) -> str:
    if count >= GB:
        return f"{count / GB:.2f} GB"
    if count >= MB:
        return f"{count / MB:.1f} MB"
    return f"{count / 1e3:.0f} kB"


def seconds(run: Run) -> str:
    return f"{run.seconds:.2f} s" if run.ok else "failed"


def peaks(run: Run) -> str:
    return f"{size(run.tree_peak)} / {size(run.process_peak)}" if run.ok else "failed"


def print_tables(results: Sequence[Result]) -> None:
    print(
        f"\n{'model':13} {'weights':>9} {'import':>8} {'cold':>8} {'warm':>8} {'new name':>8} "
        f"{'ORT session':>12} {'cold/ORT':>8}"
    )
    for r in results:
        ort = f"{r.ort_seconds:.2f} s" if r.ort_seconds is not None else "failed"
        ratio = f"{r.cold.seconds / r.ort_seconds:.1f}x" if r.cold.ok and r.ort_seconds else "-"
        print(
            f"{r.name:13} {size(r.weights):>9} {seconds(r.imported):>8} {seconds(r.cold):>8} "
            f"{seconds(r.warm):>8} {seconds(r.renamed):>8} {ort:>12} {ratio:>8}"
        )
    print(
        f"\n{'model':13} {'peak cold':>21} {'peak warm':>21} {'peak ORT':>21} "
        f"{'module':>9} {'its weights':>11} {'library':>9}"
    )
    for r in results:
        print(
            f"{r.name:13} {peaks(r.cold):>21} {peaks(r.warm):>21} {peaks(r.ort):>21} "
            f"{size(r.module):>9} {size(r.module_weights):>11} {size(r.library):>9}"
        )


@dataclass(frozen=True)
class Target:
    """One compile-time target: the figure (None: its run failed) and its limit."""

    what: str
    value: float | None
    limit: float
    unit: str

    def line(self) -> str:
        limit = f"<= {self.limit:.3g} {self.unit}"
        if self.value is None:
            return f"  {self.what:40} {'failed':>10}   {limit}"
        verdict = "ok" if self.value <= self.limit else "OVER"
        return f"  {self.what:40} {self.value:8.2f} {self.unit:2} {limit:>12}: {verdict}"


def _time(run: Run) -> float | None:
    return run.seconds if run.ok else None


COLD_LIMITS = {"bert-base": 5.0, "resnet-50": 5.0, "bert-tiny": 1.0}
"""Seconds a cold compile may take on 2 cores; any other ImageNet CNN: CNN_LIMIT."""
CNN_LIMIT = 8.0
WARM_LIMIT = 0.5
"""Seconds a warm compile may take, to the same file name or another."""


def targets(results: dict[str, Result], help_time: float) -> list[Target]:
    """The targets whose models were measured in this run."""
    found = [Target("graphfuse --help", help_time, 0.5, "s")]
    for name, r in results.items():
        found += [
            Target(f"{name} cold compile", _time(r.cold), COLD_LIMITS.get(name, CNN_LIMIT), "s"),
            Target(f"{name} warm compile", _time(r.warm), WARM_LIMIT, "s"),
            Target(f"{name} warm, another name", _time(r.renamed), WARM_LIMIT, "s"),
        ]
        if r.weights >= 10 * MB:
            peak = r.cold.peak / GB if r.cold.ok else None
            found.append(Target(f"{name} cold peak (2x weights)", peak, 2 * r.weights / GB, "GB"))
    base = results.get("bert-base")
    if base is not None:
        module = base.module / MB if base.imported.ok else None
        found.append(Target("bert-base module text", module, 20, "MB"))
    return found


def print_notes(results: Sequence[Result], help_time: float) -> None:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"\ngraphfuse --help: {help_time:.3f} s (best of 5 subprocesses)\n"
        f"peak: summed RSS of the process tree, sampled every {SAMPLE_SECONDS * 1e3:.0f} ms "
        "from /proc (shared pages count in each process)\n"
        "      / the largest single process (ru_maxrss: a child starts from its parent's, "
        f"this script's is {size(own)})\n"
        "ORT session: best of 3 in one subprocess after importing onnxruntime (its peak "
        "includes the import); MB = 10^6 bytes"
    )
    for r in results:
        runs = (("import", r.imported), ("cold compile", r.cold), ("warm", r.warm))
        for what, run in (*runs, ("warm to another name", r.renamed)):
            if not run.ok:
                print(f"{r.name} {what} failed, {run.failure()}")
        if not r.ort.ok:
            print(f"{r.name} onnxruntime failed, {r.ort.failure()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", nargs="*", help=f"substrings of model names ({', '.join(MODELS)})"
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=Path.home() / ".cache" / "graphfuse-bench" / "models",
        help="where the exported models are kept (default: %(default)s); delete to re-export",
    )
    parser.add_argument(
        "--timing", action="store_true", help="print graphfuse's stage tree of each cold compile"
    )
    parser.add_argument(
        "--torch",
        action="store_true",
        help="also torch.compile's first call, cold and warm, graphfuse beside inductor",
    )
    args = parser.parse_args()
    names = [n for n in MODELS if not args.only or any(s in n for s in args.only)]
    graphfuse = graphfuse_command()
    print(f"{' '.join(graphfuse)}; {os.cpu_count()} cores; models in {args.models_dir}")
    results: dict[str, Result] = {}
    for name in names:
        model = exported(name, args.models_dir)
        results[name] = measure(name, model, graphfuse, args.timing)
        if args.timing:
            print(f"\ngraphfuse compile --timing, {name}, cold:\n{results[name].cold.stderr}")
    help_time = help_seconds(graphfuse)
    print_tables(list(results.values()))
    print_notes(list(results.values()), help_time)
    torch_results = []
    if args.torch:
        from graphfuse.testing.torch_models import SAMPLES

        torch_results = [measure_torch(name) for name in SAMPLES]
        print_torch(torch_results)
    print("\ntargets:")
    found = targets(results, help_time)
    for r in torch_results:
        warm = r.seconds["graphfuse"][1]
        found.append(Target(f"torch.compile {r.name} recompile", warm, WARM_LIMIT, "s"))
    for target in found:
        print(target.line())
    runs = [run for r in results.values() for run in (r.imported, r.cold, r.warm, r.renamed, r.ort)]
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
