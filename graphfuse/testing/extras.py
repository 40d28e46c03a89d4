"""The benchmarks' check for what the `test` extra installs.

The scripts in bench/ compare graphfuse with onnxruntime, XLA and PyTorch and export models
with transformers: packages of the `test` extra, not of the core install `make demo` makes.
Run in a core-only venv, a script would stop at its first import with a traceback; it
calls `require` first instead, which names what is missing and how to install it in one
line and exits with status 2.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

INSTALL = ".venv/bin/pip install -e '.[test]' (make test installs it)"


def require(script: str, *modules: str) -> None:
    """Exit with one line unless every one of `modules` imports."""
    missing: list[str] = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        print(
            f"{Path(script).name}: needs {', '.join(missing)} from the test extra: {INSTALL}",
            file=sys.stderr,
        )
        raise SystemExit(2)
