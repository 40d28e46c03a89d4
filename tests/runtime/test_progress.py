"""The build's progress line: on a terminal after a delay, erased at the end, never on a
pipe; and the --timing stages of a build."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from graphfuse.runtime.progress import Progress

ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_on_a_terminal_and_erases_itself() -> None:
    stream = Terminal()
    with Progress(3, "building kernels", stream, delay=0) as progress:
        progress.advance()
        progress.advance()
    written = stream.getvalue()
    assert "\r[2/3] building kernels" in written
    assert written.endswith("\r\033[K")


def test_progress_is_silent_for_a_fast_build() -> None:
    stream = Terminal()
    with Progress(3, "building kernels", stream, delay=60) as progress:
        progress.advance()
    assert stream.getvalue() == ""


def test_progress_is_silent_on_a_pipe() -> None:
    stream = io.StringIO()
    with Progress(3, "building kernels", stream, delay=0) as progress:
        progress.advance()
    assert stream.getvalue() == ""


def test_compile_timing_shows_the_build_stages_and_no_progress(tmp_path: Path) -> None:
    weight = "0x" + "3F800000" * (128 * 256)  # 128 KiB of 1.0: a weights object
    source = tmp_path / "m.mlir"
    source.write_text(
        "func.func @main(%x: tensor<8x128xf32>) -> tensor<8x256xf32> {\n"
        f'  %w = graph.constant dense<"{weight}"> : tensor<128x256xf32>\n'
        "  %y = graph.matmul %x, %w : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>\n"
        "  func.return %y : tensor<8x256xf32>\n}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "graphfuse.cli", "compile", str(source), "-o", "m.so", "--timing"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"GRAPHFUSE_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr
    stages = re.findall(r"^ +\d+\.\d{3} +\d+%  (?:  )*(\S.*)$", run.stderr, re.M)
    for stage in ("split into kernels", "print kernels", "weights object", "link"):
        assert stage in stages, run.stderr
    assert any(re.fullmatch(r"build 2 of 2 objects .*", s) for s in stages), run.stderr
    assert any(s.startswith("llc ") for s in stages), run.stderr
