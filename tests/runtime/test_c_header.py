"""The C interface of a library written out: its header, what it exports, and C programs
built against it with the system C compiler (examples/c/main.c among them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import graphfuse
from graphfuse.compiler import CompileOptions
from graphfuse.dialects.graph import interpreter as reference
from graphfuse.dialects.loop import abi
from graphfuse.parsing import parse_file
from graphfuse.runtime import build
from graphfuse.runtime.c_api import describe
from graphfuse.runtime.c_api.link import read_interface
from graphfuse.runtime.c_api.naming import header_path, symbol_prefix
from graphfuse.toolchain import ToolchainError
from tests.conftest import graphfuse_command, parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "resnet_block.mlir"
C_COMPILER = shutil.which("cc") or shutil.which("gcc")
CXX_COMPILER = shutil.which("c++") or shutil.which("g++")
needs_cc = pytest.mark.skipif(C_COMPILER is None, reason="no C compiler (cc or gcc) on PATH")

MATMUL_RELU = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %y = graph.matmul %x, %w : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = graph.relu %y : tensor<{m}x{n}xf32>
  func.return %r : tensor<{m}x{n}xf32>
}}
"""
"""Two of these with other shapes hold a kernel of the same name, `fused_matmul_relu`."""


def _cc(*args: str | Path, cxx: bool = False) -> None:
    compiler = CXX_COMPILER if cxx else C_COMPILER
    assert compiler is not None
    done = subprocess.run([compiler, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _exported(library: Path) -> set[str]:
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in listing.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/resnet_block.mlir compiled for 2 threads (a threaded library)."""
    folder = tmp_path_factory.mktemp("resnet")
    library = folder / "libresnet_block.so"
    graphfuse.compile(parse_file(EXAMPLE), output=library, options=CompileOptions(threads=2))
    return library


def test_c_header_written_beside_the_library(resnet: Path) -> None:
    header = resnet.with_suffix(".h")
    text = header.read_text()
    assert "int resnet_block_main(" in text
    assert "float[1][64][56][56]" in text and "built for 2 threads" in text
    assert "#define GRAPHFUSE_ABI_VERSION 1" in text


@needs_cc
def test_c_example_program_matches_the_reference(resnet: Path, tmp_path: Path) -> None:
    """examples/c/main.c, built as its README says, checks itself against C and saves
    its buffers, which the reference interpreter must agree with."""
    program = resnet.parent / "resnet_block"
    _cc(
        "-std=c99",
        "-O2",
        f"-I{resnet.parent}",
        ROOT / "examples" / "c" / "main.c",
        f"-L{resnet.parent}",
        "-l:libresnet_block.so",
        "-Wl,-rpath,$ORIGIN",
        "-lm",
        "-o",
        program,
    )
    run = subprocess.run([program, tmp_path], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.match(r"main: 7 inputs, output 1x64x56x56, threads 2, largest difference", run.stdout)
    interface = read_interface(resnet)
    entry = interface.entry("main") if interface is not None else None
    assert entry is not None
    names = [buffer.name for buffer in entry.inputs]  # what main.c saves them as
    module = parse_file(EXAMPLE)
    shapes = [a.type.get_shape() for a in reference.find_function(module, "main").args]
    inputs = [
        np.fromfile(tmp_path / f"{name}.bin", np.float32).reshape(shape)
        for name, shape in zip(names, shapes, strict=True)
    ]
    (expected,) = reference.run(module, "main", *inputs)
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_c_library_exports_only_its_interface(resnet: Path) -> None:
    """No kernel, no `main`, no `_mlir_ciface_`: exactly what the header declares."""
    interface = read_interface(resnet)
    assert interface is not None
    exported = _exported(resnet)
    assert exported == set(describe.library_symbols(interface))
    declared = set(re.findall(r"\b(resnet_block_\w+)\(", resnet.with_suffix(".h").read_text()))
    assert exported == declared


@needs_cc
@pytest.mark.parametrize("language", ["c99", "c++"])
def test_c_header_compiles_cleanly(resnet: Path, tmp_path: Path, language: str) -> None:
    if language == "c++" and CXX_COMPILER is None:
        pytest.skip("no C++ compiler (c++ or g++) on PATH")
    source = tmp_path / ("use.cpp" if language == "c++" else "use.c")
    source.write_text(
        '#include "libresnet_block.h"\n'
        '#include "libresnet_block.h"\n'  # guarded: twice is harmless
        "int main(void) {\n"
        "  const graphfuse_entry_info *info = resnet_block_main_info();\n"
        "  return resnet_block_abi_version() == GRAPHFUSE_ABI_VERSION && info->num_inputs == 7"
        " ? 0 : 1;\n}\n"
    )
    flags = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
    flags += ["-std=c++11"] if language == "c++" else ["-std=c99"]
    program = tmp_path / "use"
    _cc(*flags, f"-I{resnet.parent}", source, f"-L{resnet.parent}", "-l:libresnet_block.so",
        f"-Wl,-rpath,{resnet.parent}", "-o", program, cxx=language == "c++")  # fmt: skip
    assert subprocess.run([program], timeout=60).returncode == 0


THREADS = r"""
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include "libresnet_block.h"

/* The threads of this process, once a call has run (the pool's workers included). */
int main(int argc, char **argv) {
  if (argc > 1)
    printf("cap %d\n", resnet_block_set_threads(atoi(argv[1])));
  const graphfuse_entry_info *info = resnet_block_main_info();
  void *buffers[8];
  for (int i = 0; i < 8; i++)
    buffers[i] = calloc(1, (size_t)(i < 7 ? info->inputs[i].bytes : info->outputs[0].bytes));
  if (resnet_block_main_run_packed(NULL, buffers) != GRAPHFUSE_OK)
    return 1;
  DIR *tasks = opendir("/proc/self/task");
  int count = 0;
  for (struct dirent *entry; (entry = readdir(tasks)) != NULL;)
    count += entry->d_name[0] != '.';
  printf("threads %d\n", count);
  return 0;
}
"""


@needs_cc
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize(
    ("environment", "argument", "printed"),
    [
        ({}, None, "threads 2"),
        ({"GRAPHFUSE_NUM_THREADS": "1"}, None, "threads 1"),
        ({}, "1", "cap 1\nthreads 1"),
        ({"GRAPHFUSE_NUM_THREADS": "1"}, "0", "cap 2\nthreads 2"),
    ],
)
def test_c_threads_capped_by_environment_or_setter(
    resnet: Path, tmp_path: Path, environment: dict[str, str], argument: str | None, printed: str
) -> None:
    """A library built for 2 threads starts one worker, none when capped at 1 (by
    GRAPHFUSE_NUM_THREADS or `<prefix>_set_threads`, which overrides the variable)."""
    (tmp_path / "threads.c").write_text(THREADS)
    program = tmp_path / "threads"
    _cc(f"-I{resnet.parent}", tmp_path / "threads.c", f"-L{resnet.parent}",
        "-l:libresnet_block.so", f"-Wl,-rpath,{resnet.parent}", "-o", program)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GRAPHFUSE_NUM_THREADS"} | environment
    command = [str(program), *([argument] if argument is not None else [])]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == printed


TWO_MODELS = r"""
#include <math.h>
#include <stdio.h>
#include "liba.h"
#include "libb.h"

/* relu(x @ w) for row-major x (m x k) and w (k x n). */
static double check(const float *x, const float *w, const float *out, int m, int k, int n) {
  double worst = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int p = 0; p < k; p++) s += (double)x[i * k + p] * w[p * n + j];
      s = s > 0 ? s : 0;
      worst = fmax(worst, fabs(s - out[i * n + j]));
    }
  return worst;
}

int main(void) {
  float xa[A_MAIN_IN0_ELEMENTS], wa[A_MAIN_IN1_ELEMENTS], oa[A_MAIN_OUT0_ELEMENTS];
  float xb[B_MAIN_IN0_ELEMENTS], wb[B_MAIN_IN1_ELEMENTS], ob[B_MAIN_OUT0_ELEMENTS];
  for (int i = 0; i < A_MAIN_IN0_ELEMENTS; i++) xa[i] = (float)(i % 7) - 3;
  for (int i = 0; i < A_MAIN_IN1_ELEMENTS; i++) wa[i] = (float)(i % 5) - 2;
  for (int i = 0; i < B_MAIN_IN0_ELEMENTS; i++) xb[i] = (float)(i % 3) - 1;
  for (int i = 0; i < B_MAIN_IN1_ELEMENTS; i++) wb[i] = (float)(i % 4) - 1.5f;
  a_main_context *context = a_main_create();
  int status = a_main_run(context, xa, wa, oa) | b_main(xb, wb, ob);
  a_main_destroy(context);
  void *packed[] = {xb, wb, ob};
  status |= b_main_run_packed(NULL, packed);
  int refused = b_main(xb, NULL, ob);
  printf("%d %d %g %g %d %d\n", status, refused, check(xa, wa, oa, 4, 8, 3),
         check(xb, wb, ob, 5, 6, 7), a_set_threads(1), b_set_threads(0));
  return 0;
}
"""


@needs_cc
def test_c_two_models_link_into_one_program(tmp_path: Path) -> None:
    """Two libraries whose entries are both @main and whose kernels share a name run
    side by side in one program, each computing its own model."""
    for name, (m, k, n) in {"a": (4, 8, 3), "b": (5, 6, 7)}.items():
        graphfuse.compile(
            parse(MATMUL_RELU.format(m=m, k=k, n=n)),
            output=tmp_path / f"lib{name}.so",
            options=CompileOptions(threads=1),
        )
    assert _exported(tmp_path / "liba.so").isdisjoint(_exported(tmp_path / "libb.so"))
    (tmp_path / "two.c").write_text(TWO_MODELS)
    program = tmp_path / "two"
    _cc("-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", tmp_path / "two.c", f"-L{tmp_path}",
        "-la", "-lb", f"-Wl,-rpath,{tmp_path}", "-lm", "-o", program)  # fmt: skip
    run = subprocess.run([program], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    status, refused, error_a, error_b, threads_a, threads_b = run.stdout.split()
    assert (status, refused, threads_a, threads_b) == ("0", "1", "1", "1")
    assert float(error_a) < 1e-4 and float(error_b) < 1e-4


def test_c_symbols_follow_the_name_even_through_the_model_cache(tmp_path: Path) -> None:
    """The prefix is part of the model cache's key: a model compiled again to another
    name is built with that name's symbols; compiled again to the same name in another
    folder, it is copied from the cache with the symbols it has."""
    model = tmp_path / "mm.mlir"
    model.write_text(MATMUL_RELU.format(m=2, k=3, n=4))
    options = CompileOptions(threads=1)
    graphfuse.compile(model, output=tmp_path / "first.so", options=options)
    second = graphfuse.compile(model, output=tmp_path / "second.so", options=options)
    assert "int second_main(" in (tmp_path / "second.h").read_text()
    assert "second_main" in _exported(tmp_path / "second.so")
    assert "first_main" not in _exported(tmp_path / "second.so")
    (tmp_path / "again").mkdir()
    copy = graphfuse.compile(model, output=tmp_path / "again" / "first.so", options=options)
    assert "first_main" in _exported(tmp_path / "again" / "first.so")
    assert "int first_main(" in (tmp_path / "again" / "first.h").read_text()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    w = np.ones((3, 4), np.float32)
    for compiled in (second, copy):
        np.testing.assert_allclose(compiled(x, w), np.maximum(x @ w, 0))


def test_c_bad_output_folder_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "in.mlir").write_text(MATMUL_RELU.format(m=2, k=3, n=4))
    run = graphfuse_command(["compile", "in.mlir", "-o", "missing/x.so"], tmp_path)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mlir"]


def test_c_failed_link_leaves_neither_library_nor_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise ToolchainError("linking failed (cc): no")

    monkeypatch.setattr(build, "_link", failing)
    with pytest.raises(ToolchainError, match="linking failed"):
        graphfuse.compile(
            parse(MATMUL_RELU.format(m=2, k=3, n=5)),
            output=tmp_path / "x.so",
            options=CompileOptions(threads=1),
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("library", "prefix", "header"),
    [
        ("libresnet.so", "resnet", "libresnet.h"),
        ("model.v2.so", "model", "model.v2.h"),
        ("lib.so", "lib", "lib.h"),
        ("3d-net.so", "gf_3d_net", "3d-net.h"),
        ("weird.h", "weird", "weird.h.h"),
    ],
)
def test_c_names_from_the_library_file(library: str, prefix: str, header: str) -> None:
    assert symbol_prefix(Path(library)) == prefix
    assert header_path(Path(library)) == Path(header)


def test_c_interface_reads_the_kernel_abi_attributes() -> None:
    """describe.py restates the ABI attribute names (the runtime imports no dialect)."""
    assert (describe.OUTPUTS, describe.SCRATCH, describe.SCRATCH_OFFSETS) == (
        abi.OUTPUTS,
        abi.SCRATCH,
        abi.SCRATCH_OFFSETS,
    )
    assert describe.SCRATCH_ALIGNMENT == abi.SCRATCH_ALIGNMENT


def test_c_exported_names_must_not_clash(tmp_path: Path) -> None:
    module = parse(
        MATMUL_RELU.format(m=2, k=3, n=4)
        + MATMUL_RELU.format(m=2, k=3, n=4).replace("@main", "@main_run")
    )
    with pytest.raises(ToolchainError, match=r"@main_run and @main both give the C symbol"):
        graphfuse.compile(module, entry="main", output=tmp_path / "x.so")
    assert list(tmp_path.iterdir()) == []
