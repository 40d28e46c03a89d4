"""Shared helpers: parse graph-dialect text and run one function in the reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from graphfuse.dialects.graph import interpreter as reference
from graphfuse.parsing import parse_text


def parse(text: str) -> ModuleOp:
    """Parse and verify graph-dialect text (raises GraphfuseError on bad input)."""
    return parse_text(text, "test.mlir")


def run_text(text: str, *arrays: Any, name: str = "main") -> tuple[np.ndarray, ...]:
    """Parse text and run @name on the arrays in the reference interpreter."""
    return reference.run(parse(text), name, *arrays)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def graphfuse_command(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The `graphfuse` command run as a user runs it: a subprocess in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **env},
    )
