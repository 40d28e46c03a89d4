"""Running the venv's commands as a user runs them, for tests of the CLI and of plain
xdsl-opt: the venv's bin/ first on PATH, text in and out, a timeout so a hang fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def run_as_user(
    command: list[str] | str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` (argv, or a shell line run by bash) with the venv's bin/ first on PATH."""
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = ["bash", "-c", command] if isinstance(command, str) else command
    return subprocess.run(
        argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300
    )


def xdsl_opt(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The venv's plain xdsl-opt with `args`."""
    return run_as_user([str(VENV_BIN / "xdsl-opt"), *args], cwd=cwd, stdin=stdin)
