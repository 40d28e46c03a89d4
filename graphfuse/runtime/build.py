"""Building upstream MLIR text into a shared library with mlir-opt, mlir-translate, opt, llc
and the system C compiler.

Each stage is a subprocess whose failure is reported as one line naming the stage and the
tool's first diagnostic. Builds are cached by a hash of the MLIR text, the options and the
tool versions, so compiling the same graph twice costs one file lookup. The library is
written under a temporary name and renamed into place (a copy written out only once it
loads there): a failed build leaves nothing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from graphfuse.runtime import parallel
from graphfuse.timing import timed
from graphfuse.toolchain import ToolchainError, require_tool, tool_named, tool_version

MLIR_TO_LLVM_DIALECT = (
    "--canonicalize",
    "--cse",
    "--loop-invariant-code-motion",
    "--convert-scf-to-cf",
    "--convert-math-to-funcs=convert-ctlz=false",
    "--expand-strided-metadata",
    "--convert-vector-to-llvm",
    "--finalize-memref-to-llvm",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
)
"""mlir-opt passes from scf/memref/arith/math/func to the LLVM dialect."""

SCOPES_TO_LLVM = ("--expand-strided-metadata", "--finalize-memref-to-llvm")
"""Lowers memref ops, `memref.alloca_scope` among them, before `scf` becomes `cf`."""


@dataclass(frozen=True)
class CpuTarget:
    """What the CPU code is built for. `cpu="native"` means this machine's CPU; `threads`
    above 1 runs each kernel's parallel loops on that many workers (MLIR's OpenMP lowering
    and graphfuse's parallel runtime, `parallel.py`)."""

    cpu: str = "native"
    triple: str = "x86_64-unknown-linux-gnu"
    opt_level: int = 3
    threads: int = 1

    def resolved_cpu(self) -> str:
        return host_cpu() if self.cpu == "native" else self.cpu

    def vector_lanes(self) -> int:
        """f32 lanes of the widest vectors the CPU has: 16 with AVX-512, else 8 (AVX2)."""
        if self.cpu == "native":
            return 16 if _host_has_avx512() else 8
        return 16 if self.cpu in AVX512_CPUS else 8


AVX512_CPUS = frozenset(
    {
        "skylake-avx512",
        "cascadelake",
        "cooperlake",
        "cannonlake",
        "icelake-client",
        "icelake-server",
        "tigerlake",
        "rocketlake",
        "sapphirerapids",
        "emeraldrapids",
        "graniterapids",
        "graniterapids-d",
        "diamondrapids",
        "znver4",
        "znver5",
        "x86-64-v4",
    }
)
"""llc -mcpu names of x86 CPUs with AVX-512F (Xeon Phi's knl/knm left out: their AVX-512 is
another story)."""


@cache
def _host_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("flags") and "avx512f" in line.split() for line in info)
    except OSError:
        return False


@cache
def host_cpu() -> str:
    """The CPU llc detects on this machine (e.g. znver3), for -mcpu."""
    found = require_tool("llc")
    out = subprocess.run([found.path, "--version"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Host CPU:" in line:
            return line.split(":", 1)[1].strip()
    return "generic"


def cache_dir() -> Path:
    """$GRAPHFUSE_CACHE_DIR, else ~/.cache/graphfuse."""
    root = os.environ.get("GRAPHFUSE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "graphfuse"
    )
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        what = "exists and is not a folder" if path.exists() else error.strerror
        raise ToolchainError(
            f"{path}: cannot use it as graphfuse's build cache: {what} "
            "(set GRAPHFUSE_CACHE_DIR to a folder)"
        ) from None
    return path


def run_tool(stage: str, tool: str, args: list[str], stdin: str | bytes | None = None) -> bytes:
    found = require_tool(tool)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        with timed(f"{tool} ({stage})"):
            done = subprocess.run([found.path, *args], input=data, capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ToolchainError(f"{stage}: {tool} did not run: {error}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        first = next((line for line in message if "error" in line.lower()), None)
        first = first or (message[0] if message else f"exit status {done.returncode}")
        raise ToolchainError(f"{stage} failed ({tool}): {first.strip()}")
    if not done.stdout.strip() and "-o" not in args:
        # Every tool run without -o prints what the next stage reads.
        raise ToolchainError(
            f"{stage} failed ({tool}): {found.path} exited 0 but printed nothing; "
            f"is it a working {tool}? ({tool_named(tool).env_var} overrides it)"
        )
    return done.stdout


BF16_EXPANSION = "--arith-expand=include-bf16=true"
"""bf16 conversions as integer ops (the C runtime may lack __truncsfbf2). Only for modules
that use bf16: arith-expand also turns maximumf into compare+select, which LLVM will not
vectorise as a reduction."""


BF16_TRUNCATION_HELPER = """
define weak hidden bfloat @__truncsfbf2(float %a) {
  %bits = bitcast float %a to i32
  %upper = lshr i32 %bits, 16
  %lsb = and i32 %upper, 1
  %bias = add i32 %lsb, 32767
  %rounded = add i32 %bits, %bias
  %nearest = lshr i32 %rounded, 16
  %nan = fcmp uno float %a, %a
  %quiet = or i32 %upper, 64
  %chosen = select i1 %nan, i32 %quiet, i32 %nearest
  %half = trunc i32 %chosen to i16
  %result = bitcast i16 %half to bfloat
  ret bfloat %result
}
"""
"""f32 -> bf16, rounding to nearest even (NaNs stay quiet NaNs). arith-expand writes the
conversions as integer ops, but `opt` may fold them back into bfloat selects and phis,
which llc (without AVX512-BF16) legalises with calls to `__truncsfbf2`: compiler-rt and
libgcc from GCC 13 have it, older libgcc does not, and the library would not load. So a
module that still holds bfloat after `opt` carries its own (weak, hidden) copy."""


def mlir_opt_stages(upstream: str, threads: int = 1) -> list[list[str]]:
    """The mlir-opt runs from upstream MLIR to the LLVM dialect: one, or with threads two,
    between which `parallel.schedule_dynamically` rewrites the OpenMP loops' schedule."""
    passes: list[str] = list(MLIR_TO_LLVM_DIALECT)
    if "bf16" in upstream:
        passes.insert(passes.index("--expand-strided-metadata"), BF16_EXPANSION)
    if not _parallel(upstream, threads):
        # Alloca scopes that outlive canonicalisation are lowered to stack save/restore
        # while they still hold one block: `scf-to-cf` would give them several.
        at = passes.index("--convert-scf-to-cf")
        return [[*passes[:at], *SCOPES_TO_LLVM, *passes[at:]]]
    at = passes.index("--convert-scf-to-cf")
    return [
        [*passes[:at], *parallel.openmp_conversion(threads)],
        [*parallel.after_openmp_conversion(), *passes[at:]],
    ]


def _parallel(upstream: str, threads: int) -> bool:
    return threads > 1 and "scf.parallel" in upstream


def parallel_runtime() -> Path:
    """graphfuse's parallel runtime, built into the cache on first use."""
    library = cache_dir() / parallel.runtime_name()
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(prefix="graphfuse-runtime-") as work:
        source = Path(work) / "parallel_runtime.c"
        source.write_text(parallel.runtime_source())
        built = Path(work) / library.name
        flags = ["-O2", "-fPIC", "-shared", "-pthread", f"-Wl,-soname,{library.name}"]
        run_tool("building the parallel runtime", "cc", [*flags, "-o", str(built), str(source)])
        write_atomically(library, built.read_bytes())
    return library


def to_llvm_dialect(upstream: str, threads: int = 1) -> str:
    """Upstream MLIR text -> LLVM dialect text."""
    text = upstream
    for n, passes in enumerate(mlir_opt_stages(upstream, threads)):
        if n > 0:
            text = parallel.schedule_dynamically(text)
        text = run_tool("lowering to the LLVM dialect", "mlir-opt", passes, text).decode()
    return text


def to_llvm_ir(upstream: str, target: CpuTarget) -> str:
    """Upstream MLIR text -> optimised LLVM IR (what `--emit llvm` prints)."""
    llvm_dialect = to_llvm_dialect(upstream, target.threads)
    raw = run_tool("translating to LLVM IR", "mlir-translate", ["--mlir-to-llvmir"], llvm_dialect)
    raw = parallel.rename_runtime_calls(raw.decode()).encode()
    return run_tool(
        "optimising LLVM IR",
        "opt",
        [
            f"-O{target.opt_level}",
            f"-mtriple={target.triple}",
            f"-mcpu={target.resolved_cpu()}",
            "-vector-library=LIBMVEC",
            "-S",
        ],
        raw,
    ).decode()


def _fingerprint(upstream: str, target: CpuTarget) -> str:
    digest = hashlib.sha256()
    digest.update(upstream.encode())
    digest.update(repr((target.triple, target.resolved_cpu(), target.opt_level)).encode())
    for tool in ("mlir-opt", "opt", "llc"):
        digest.update(tool_version(require_tool(tool)).encode())
    for passes in mlir_opt_stages(upstream, target.threads):
        digest.update(" ".join(passes).encode())
    digest.update(b"graphfuse-build-4")
    return digest.hexdigest()[:32]


def build_shared_library(
    upstream: str, target: CpuTarget = CpuTarget(), output: Path | None = None
) -> Path:
    """Build (or find in the cache) a shared library for `upstream`; copy it to `output`.
    Returns an absolute path: ctypes given a bare name (`in.so`) searches the library path,
    not the current folder."""
    key = _fingerprint(upstream, target)
    cached = cache_dir() / f"{key}.so"
    if not cached.exists():
        _build_into(upstream, target, cached)
    if output is None:
        return cached
    destination = Path(output).absolute()
    _install(cached, destination, _parallel(upstream, target.threads))
    return destination


def _install(library: Path, destination: Path, threaded: bool) -> None:
    """Copy `library` to `destination`, with the parallel runtime beside it when
    `threaded`. The copy is loaded under a temporary name in the destination's folder and
    renamed only once it loads there (its runtime found through $ORIGIN), so a failure
    leaves neither a library nor a runtime this call wrote."""
    written: list[Path] = []
    try:
        if threaded:
            runtime = parallel_runtime()
            beside = destination.parent / runtime.name
            if not beside.exists():
                written.append(beside)
            _atomic_copy(runtime, beside)
        staged = _stage(destination.parent, library.read_bytes())
        written.append(staged)
        _check_loads(staged, destination)
        os.replace(staged, destination)
    except BaseException as error:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ToolchainError(f"{destination}: cannot write: {error.strerror}") from None
        raise


def _check_loads(staged: Path, destination: Path) -> None:
    # The loaded copy stays: loading `destination` after the rename finds the same file
    # (the dynamic loader matches device and inode) and reuses it.
    try:
        ctypes.CDLL(str(staged))
    except OSError as error:
        raise ToolchainError(f"{destination}: the built library does not load: {error}") from None


def _build_into(upstream: str, target: CpuTarget, destination: Path) -> None:
    llvm_ir = to_llvm_ir(upstream, target)
    if "bfloat" in llvm_ir and "@__truncsfbf2(" not in llvm_ir:
        llvm_ir += BF16_TRUNCATION_HELPER
    with tempfile.TemporaryDirectory(prefix="graphfuse-build-") as work:
        obj = Path(work) / "kernels.o"
        run_tool(
            "generating machine code",
            "llc",
            [
                f"-O{target.opt_level}",
                f"-mtriple={target.triple}",
                f"-mcpu={target.resolved_cpu()}",
                "-relocation-model=pic",
                "-filetype=obj",
                "-o",
                str(obj),
            ],
            llvm_ir,
        )
        library = Path(work) / "kernels.so"
        libraries = ["-lmvec", "-lm"]
        if parallel.uses_runtime(llvm_ir):
            runtime = parallel_runtime()
            # The runtime lives in the cache beside the cached library, and is copied beside
            # a library written out (build_shared_library): either way, in $ORIGIN.
            libraries = [str(runtime), "-Wl,-rpath,$ORIGIN", *libraries]
        run_tool("linking", "cc", ["-shared", "-o", str(library), str(obj), *libraries])
        _atomic_copy(library, destination)


def _atomic_copy(source: Path, destination: Path) -> None:
    write_atomically(destination, source.read_bytes())


def write_atomically(destination: Path, data: bytes) -> None:
    """Write `data` to `destination` through a temporary file in the same folder, so a
    reader (another test worker, another build) never sees a partial file."""
    partial = _stage(destination.parent, data)
    try:
        os.replace(partial, destination)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _stage(folder: Path, data: bytes) -> Path:
    """`data` in a new executable file of `folder` under a temporary name."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=".partial-")
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o755)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial
