"""What CPU code is built for, where builds are cached, and how a build tool is run.

Every tool (mlir-opt, mlir-translate, opt, llc, cc) runs as a subprocess whose failure is
reported as one line naming the stage and the tool's first diagnostic, never a traceback.
Files in the cache are written under a temporary name and renamed into place, so a reader
(another build, another test worker) never sees half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from graphfuse.timing import timed
from graphfuse.toolchain import (
    FoundTool,
    ToolchainError,
    require_tool,
    tool_named,
    tool_version,
)


@dataclass(frozen=True)
class CpuTarget:
    """What the CPU code is built for. `cpu="native"` means this machine's CPU; `threads`
    above 1 runs each kernel's parallel loops on that many workers (MLIR's OpenMP lowering
    and graphfuse's parallel runtime, `parallel.py`). `opt_level` is the level of kernels
    that need it most (GEMM tiles); `uniform_opt_level` applies it to every kernel, as an
    opt level the user chose does (see kernel_objects.opt_level_for)."""

    cpu: str = "native"
    triple: str = "x86_64-unknown-linux-gnu"
    opt_level: int = 3
    threads: int = 1
    uniform_opt_level: bool = False

    def resolved_cpu(self) -> str:
        return host_cpu() if self.cpu == "native" else self.cpu

    def vector_lanes(self) -> int:
        """f32 lanes of the widest vectors the CPU has: 16 with AVX-512, else 8 (AVX2);
        for this machine's CPU, $GRAPHFUSE_LANES when it is set (`lanes_override`)."""
        if self.cpu == "native":
            forced = lanes_override()
            if forced is not None:
                return forced
            return 16 if _host_has_avx512() else 8
        return 16 if self.cpu in AVX512_CPUS else 8

    def features(self) -> str | None:
        """llc -mattr for the code: this machine's CPU built at 8 lanes by
        $GRAPHFUSE_LANES=8 has its AVX-512 turned off (-avx512f takes every AVX-512
        extension with it), so the code is what an AVX2 machine of its family runs."""
        if self.cpu == "native" and lanes_override() == 8 and _host_has_avx512():
            return "-avx512f"
        return None


LANES_VARIABLE = "GRAPHFUSE_LANES"
"""The switch that builds for this machine at another vector width: 8 makes every build
that targets this CPU (the default `cpu="native"`) AVX2 code, as an AVX2 machine would
build it, which an AVX-512 machine runs too; 16 is this CPU's own width where it has
AVX-512. Unset or empty: the widest the CPU has. Options that name their lanes or their
CPU are not changed by it."""


def lanes_override() -> int | None:
    """$GRAPHFUSE_LANES as f32 lanes (None when unset), refused in one line when it is
    not 8 or 16, or 16 on a CPU without AVX-512 (its code would not run here)."""
    value = os.environ.get(LANES_VARIABLE, "").strip()
    if not value:
        return None
    if value not in ("8", "16"):
        raise ToolchainError(f"{LANES_VARIABLE}={value!r}: must be 8 (AVX2) or 16 (AVX-512)")
    if value == "16" and not _host_has_avx512():
        raise ToolchainError(
            f"{LANES_VARIABLE}=16: this CPU has no AVX-512, so 16-lane code would not run "
            "here (use 8, or unset it)"
        )
    return int(value)


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


def runnable_lanes() -> tuple[int, ...]:
    """The vector widths whose code this machine runs: 8 everywhere, 16 with AVX-512
    (tests that run code run at each)."""
    return (8, 16) if _host_has_avx512() else (8,)


@cache
def _host_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("flags") and "avx512f" in line.split() for line in info)
    except OSError:
        return False


@cache
def host_cpu() -> str:
    """The CPU llc detects on this machine (e.g. znver3), for -mcpu; remembered per llc
    and per CPU (its /proc/cpuinfo model and flags: a cache folder may be shared)."""
    found = require_tool("llc")
    return _remembered(f"host cpu\0{_tool_identity(found)}\0{_cpu_identity()}", _llc_host_cpu)


def _llc_host_cpu() -> str:
    found = require_tool("llc")
    out = subprocess.run([found.path, "--version"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Host CPU:" in line:
            return line.split(":", 1)[1].strip()
    return "generic"


@cache
def _cpu_identity() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info if line.startswith(("model name", "flags"))]
    except OSError:
        return "unknown"
    return "".join(sorted(set(lines)))


def tool_versions(*tools: str) -> str:
    """The version lines of `tools`, for cache keys: a new toolchain builds afresh."""
    return "\n".join(_version(require_tool(tool)) for tool in tools)


@cache
def _version(found: FoundTool) -> str:
    # Asked once per process, and remembered per tool file: starting mlir-opt or opt
    # just to read its version costs a warm compile more than the rest of it.
    return _remembered(f"version\0{_tool_identity(found)}", lambda: tool_version(found))


def _tool_identity(found: FoundTool) -> str:
    """The tool's file as the cache knows it (path, size, modification time, inode): a
    reinstalled or rebuilt tool is asked again."""
    path = shutil.which(found.path) or found.path
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}\0missing"
    return f"{os.path.realpath(path)}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}"


def _remembered(identity: str, work: Callable[[], str]) -> str:
    """`work()`, remembered in the cache under `identity` (not when the tool did not
    run: that may pass)."""
    # A file of the cache folder itself, as the objects are (tests empty it file by file).
    memo = cache_dir() / f"tool-{hashlib.sha256(identity.encode()).hexdigest()[:32]}"
    try:
        return memo.read_text()
    except OSError:
        pass
    value = work()
    if not value.startswith("does not run"):
        # A cache that cannot be written costs the next run its speed only.
        with contextlib.suppress(OSError):
            write_atomically(memo, value.encode())
    return value


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


def tool_stage(tool: str, stage: str) -> str:
    """The --timing stage a tool's runs add up under."""
    return f"{tool} ({stage})"


def run_tool(stage: str, tool: str, args: list[str], stdin: str | bytes | None = None) -> bytes:
    """Run `tool` with `args` on `stdin`; its stdout, or a one-line ToolchainError naming
    `stage`, the tool and its first diagnostic."""
    found = require_tool(tool)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        with timed(tool_stage(tool, stage)):
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


def write_atomically(destination: Path, data: bytes) -> None:
    """Write `data` to `destination` through a temporary file in the same folder, so a
    reader (another test worker, another build) never sees a partial file."""
    partial = stage_file(destination.parent, data)
    try:
        os.replace(partial, destination)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def stage_file(folder: Path, data: bytes = b"", suffix: str = "") -> Path:
    """`data` in a new executable file of `folder` under a temporary name."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix=".partial-", suffix=suffix)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o755)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial
