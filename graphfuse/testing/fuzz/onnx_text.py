"""The fuzzer's text stage: a case taken through files and plain xdsl-opt, as a user would.

`graphfuse import model.onnx -o model.mlir` writes the module, large weights as
`dense_resource` handles whose bytes are in model.safetensors beside it; the venv's plain
`xdsl-opt -p graph-fuse` fuses that file in a process of its own; the fused text is parsed
back (its weights read from the file it names) and run by the reference interpreter. So
the printer, the weights file, xdsl-opt's registration of graphfuse's dialects and pass,
and the parser are checked against onnxruntime apart from the in-memory path the compiled
run takes. Starting xdsl-opt is the dearest part of a small case, so the driver runs this
stage on a share of the cases only (onnx_fuzz.TEXT_EVERY).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from graphfuse.parsing import GraphfuseError

XDSL_OPT_SECONDS = 300
"""Longest an xdsl-opt run may take before the case counts as hung."""


def import_command(model: Any, folder: Path) -> Path:
    """`graphfuse import model.onnx -o model.mlir` in `folder` (run in this process: its
    start-up is the worker's); the .mlir path, or its one-line error as a diagnostic."""
    import onnx

    from graphfuse.cli import main

    source, written = folder / "model.onnx", folder / "model.mlir"
    onnx.save(model, str(source))
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        code = main(["import", str(source), "-o", str(written)])
    if code != 0:
        raise GraphfuseError(f"graphfuse import exited {code}: {errors.getvalue().strip()}")
    return written


def xdsl_opt_path() -> str:
    """The xdsl-opt beside this Python (the venv's, with graphfuse registered), else the
    one on PATH."""
    beside = Path(sys.executable).with_name("xdsl-opt")
    found = str(beside) if beside.exists() else shutil.which("xdsl-opt")
    if found is None:
        raise GraphfuseError("xdsl-opt: not found beside this Python nor on PATH")
    return found


def xdsl_opt_fuse(module: Path) -> Path:
    """`xdsl-opt -p graph-fuse module.mlir -o fused.mlir`; the fused file, or the last
    line xdsl-opt wrote (its exception) as a diagnostic."""
    fused = module.with_name("fused.mlir")
    command = [xdsl_opt_path(), "-p", "graph-fuse", str(module), "-o", str(fused)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=XDSL_OPT_SECONDS)
    except subprocess.TimeoutExpired:
        raise GraphfuseError(f"xdsl-opt: no result in {XDSL_OPT_SECONDS} s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise GraphfuseError(f"xdsl-opt -p graph-fuse failed: {lines[-1]}")
    return fused


def parse_fused(fused: Path) -> ModuleOp:
    """The fused file parsed back, its weights read from the file it names."""
    from graphfuse.parsing import parse_file

    return parse_file(fused)
