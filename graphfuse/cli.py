"""The `graphfuse` command: doctor, stats, run, profile, compile, fuse, import.

Every failure the user can cause (unreadable or invalid file, wrong arguments, missing
tool) ends as one `graphfuse: error: ...` line and exit status 1, never a traceback.

Every command, `--help` included, first builds the whole parser, so whatever this module
imports at its top each one pays for: the parser takes its defaults from graphfuse.options
and each command imports xDSL, NumPy and the compiler when it runs (tests/test_cli.py checks
that start-up loads neither xDSL nor NumPy).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from graphfuse import timing
from graphfuse.options import AT_LEAST, BLOCK_SIZE, GPU_CHIP, PTX_ISA

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import ModuleOp

    from graphfuse.compiler import CompileOptions
    from graphfuse.dialects.graph import FusionKind
    from graphfuse.passes.analysis.kernel_stats import Summary
    from graphfuse.runtime.compiled import CompiledFunction
    from graphfuse.runtime.cuda_function import CudaFunction


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print each external tool, where it was found and its version, or how to install it."""
    from graphfuse import toolchain

    missing_required = False
    for tool in toolchain.TOOLS:
        found = toolchain.find_tool(tool)
        if found is None:
            optional = tool.name == "ptxas"
            missing_required |= not optional
            status = "optional, " if optional else ""
            print(f"{tool.name:15} MISSING ({status}{tool.purpose}); install: {tool.install_hint}")
            continue
        print(f"{tool.name:15} {found.path} [{found.source}] {toolchain.tool_version(found)}")
        if tool.name == "llc":
            nvptx = "yes" if toolchain.llc_has_nvptx(found) else "NO"
            print(f"{'':15} NVPTX target: {nvptx}")
    return 1 if missing_required else 0


def _load(args: argparse.Namespace) -> ModuleOp:
    """`compiler.load` of the file named on the command line (shapes from --input-shape,
    known inputs from --constant)."""
    from graphfuse.compiler import load
    from graphfuse.frontend.onnx_checks import parse_constants, parse_input_shapes

    return load(
        args.file, parse_input_shapes(args.input_shape or []), parse_constants(args.constant or [])
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Import an ONNX model, or TOSA or StableHLO MLIR, as a graph-dialect module."""
    from graphfuse.frontend.onnx_import import from_onnx, parse_constants, parse_input_shapes
    from graphfuse.outputs import check_output_file

    if args.output is not None:
        check_output_file(args.output)
    shapes = parse_input_shapes(args.input_shape or [])
    constants = parse_constants(args.constant or [])
    kind = _import_kind(args.file)
    if kind == "onnx":
        module = from_onnx(args.file, shapes, constants=constants)
    else:
        from graphfuse.compiler import load
        from graphfuse.parsing import GraphfuseError

        if kind == "mlir":
            raise GraphfuseError(
                f"{args.file}: holds no TOSA or StableHLO ops: a graph-dialect file needs no "
                "import (graphfuse import reads .onnx, .tosa.mlir and .stablehlo.mlir)"
            )
        module = load(args.file, shapes, constants)
    _write_module(module, args.output, args.inline_weights)
    return 0


def _import_kind(path: str) -> str:
    """The reader `import` uses: by suffix as `compiler.input_kind` says; a file of any
    other suffix goes to the ONNX reader, which says what is wrong with it, as before."""
    from graphfuse.compiler import input_kind
    from graphfuse.parsing import GraphfuseError

    try:
        return input_kind(path)
    except GraphfuseError:
        return "onnx"


def _write_module(module: ModuleOp, output: str | None, inline: bool) -> None:
    """A module to `output` with its large weights in a safetensors file beside it
    (graphfuse.weights), or, with `inline`, in the text's dialect_resources section; to
    stdout always whole, so that it can be read back."""
    from graphfuse.weights import module_text, write_module

    with timing.timed("print"):
        if output:
            write_module(module, output, inline)
        else:
            sys.stdout.write(module_text(module, inline=True) + "\n")


def op_counts(module: ModuleOp) -> tuple[Counter[FusionKind], Counter[str]]:
    """Ops inside functions, counted by fusion kind and by name (terminators left out)."""
    from xdsl.dialects import func

    from graphfuse.dialects.graph import fusion_kind

    by_kind: Counter[FusionKind] = Counter()
    by_name: Counter[str] = Counter()
    for function in module.ops:
        if not isinstance(function, func.FuncOp):
            continue
        for op in function.body.walk():
            if isinstance(op, func.ReturnOp) or op.name == "graph.yield":
                continue
            by_kind[fusion_kind(op)] += 1
            by_name[op.name] += 1
    return by_kind, by_name


def cmd_stats(args: argparse.Namespace) -> int:
    """Print op counts by fusion kind and by op for a graph file."""
    module = _load(args)
    by_kind, by_name = op_counts(module)
    print(f"{args.file}: {sum(by_kind.values())} ops")
    print("by fusion kind:")
    for kind in sorted(by_kind, key=lambda k: k.rank):
        print(f"  {kind.value:22} {by_kind[kind]:5}")
    print("by op:")
    for name, count in sorted(by_name.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {name:22} {count:5}")
    return 0


def _describe(array: np.ndarray) -> str:
    import numpy as np

    shape = "x".join(str(d) for d in array.shape) or "scalar"
    flat = array.reshape(-1)
    head = ", ".join(f"{v:.4g}" if array.dtype.kind == "f" else str(v) for v in flat[:4])
    stats = ""
    if flat.size and array.dtype.kind in "fiu":
        values = flat.astype(np.float64)
        stats = f" mean={values.mean():.6g} min={values.min():.6g} max={values.max():.6g}"
    return f"{shape} {array.dtype}{stats} [{head}{', ...' if flat.size > 4 else ''}]"


def cmd_run(args: argparse.Namespace) -> int:
    """Run a function on random inputs, compiled for the CPU (or in the reference
    interpreter with --reference); --check compares the two and prints the max error."""
    from graphfuse.dialects.graph import interpreter as reference
    from graphfuse.runtime.compiled import CompiledFunction

    if args.profile:
        from graphfuse.profiling.command import check_run_profile

        check_run_profile(args.target, args.reference)
    module = _load(args)
    function = reference.find_function(module, args.entry)
    inputs = reference.random_inputs(function, args.seed)
    expected = reference.run(module, args.entry, *inputs) if args.reference or args.check else ()
    how = "reference interpreter"
    results = expected
    compiled: CompiledFunction | CudaFunction | None = None
    if not args.reference:
        compiled = _compile(module, args)
        how = (
            f"compiled for the CPU ({compiled.library_path.name})"
            if isinstance(compiled, CompiledFunction)
            else f"compiled for the GPU ({compiled.driver.info().name})"
        )
        got = compiled(*inputs)
        results = got if isinstance(got, tuple) else (got,)
    print(f"@{args.entry} on {len(inputs)} random inputs (seed {args.seed}), {how}:")
    if args.show_inputs:
        for index, array in enumerate(inputs):
            print(f"  arg #{index}:    {_describe(array)}")
    for index, array in enumerate(results):
        print(f"  result #{index}: {_describe(array)}")
    status = 0
    if args.check and not args.reference:
        status = _check_against_reference(results, expected)
    if args.time and compiled is not None:
        _print_timing(module, args, compiled, inputs)
    if args.profile and not args.reference:
        from graphfuse.profiling.command import Request, profile

        title = f"graphfuse run --profile {Path(args.file).name}"
        for line in profile(module, _options(args), Request(args.entry, title=title), inputs):
            print(line)
    return status


def cmd_profile(args: argparse.Namespace) -> int:
    """Time every kernel of the CPU build (graphfuse/profiling)."""
    from graphfuse.profiling.command import profile_command

    return profile_command(args, _options(args))


TIMING_ROUNDS = 4


def _best_seconds(run: Callable[[], object], budget: float = 1.0) -> float:
    run()
    times: list[float] = []
    while len(times) < 3 or (sum(times) < budget and len(times) < 50):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def _print_timing(
    module: ModuleOp,
    args: argparse.Namespace,
    fused: CompiledFunction | CudaFunction,
    inputs: list[np.ndarray],
) -> None:
    """Time the compiled function against the same graph with every op its own kernel."""
    from graphfuse.compiler import compile as compile_module
    from graphfuse.runtime.cuda_function import CudaFunction

    options = replace(_options(args), fuse=False)
    unfused = compile_module(module, args.entry, args.target, options=options)
    if isinstance(fused, CudaFunction) and isinstance(unfused, CudaFunction):
        fused.upload(*inputs)
        unfused.upload(*inputs)
        fused_ms, unfused_ms = fused.time_ms(), unfused.time_ms()
        print(
            f"time on the GPU: fused {fused_ms:.4f} ms ({fused.kernel_count} kernels), unfused "
            f"{unfused_ms:.4f} ms ({unfused.kernel_count} kernels): "
            f"{unfused_ms / fused_ms:.2f}x faster fused (device time, best of 20 runs)"
        )
        return
    # Alternating rounds: a shared machine's noise then falls on both builds alike.
    fused_s = unfused_s = float("inf")
    for _ in range(TIMING_ROUNDS):
        fused_s = min(fused_s, _best_seconds(lambda: fused(*inputs), 1.0 / TIMING_ROUNDS))
        unfused_s = min(unfused_s, _best_seconds(lambda: unfused(*inputs), 1.0 / TIMING_ROUNDS))
    print(
        f"time: fused {fused_s * 1e3:.3f} ms ({fused.kernel_count} kernels), unfused "
        f"{unfused_s * 1e3:.3f} ms ({unfused.kernel_count} kernels): "
        f"{unfused_s / fused_s:.2f}x faster fused (best of {TIMING_ROUNDS} alternating rounds)"
    )


def _check_against_reference(results: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> int:
    import numpy as np

    error = max(
        (_relative_error(a, b) for a, b in zip(results, expected, strict=True)), default=0.0
    )
    worst = max(
        (
            float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
            for a, b in zip(results, expected, strict=True)
        ),
        default=0.0,
    )
    verdict = "ok" if error <= RUN_TOLERANCE else "MISMATCH"
    print(
        f"check: max abs error {worst:.3g}, max error relative to the largest value "
        f"{error:.3g} (tolerance {RUN_TOLERANCE:g}): {verdict}"
    )
    return 0 if verdict == "ok" else 1


RUN_TOLERANCE = 1e-5
"""Compiled vs reference: max |difference| / max |reference|, per result."""


def _options(args: argparse.Namespace) -> CompileOptions:
    """The CompileOptions the command line gives (its options are named as their fields);
    an option not given takes the field's default."""
    from graphfuse.options import CompileOptions

    given = {f.name: getattr(args, f.name, None) for f in fields(CompileOptions)}
    return CompileOptions(**{name: value for name, value in given.items() if value is not None})


def _compile(module: ModuleOp, args: argparse.Namespace, output: str | None = None):  # noqa: ANN202
    from graphfuse.compiler import compile as compile_module

    target = getattr(args, "target", "cpu")
    return compile_module(module, args.entry, target, options=_options(args), output=output)


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile a graph file into a shared library, or print one stage with --emit."""
    from graphfuse.errors import GraphfuseError

    if args.target == "nvptx" and args.emit not in (None, "gpu", "ptx"):
        raise GraphfuseError(f"--target nvptx emits gpu or ptx, not {args.emit}")
    _check_outputs(args)
    if args.target == "cpu" and args.emit is None:
        return _compile_library(args)  # imports the compiler only on a cache miss
    from graphfuse.compiler import MODULE_STAGES, Stage, lower, lower_to
    from graphfuse.outputs import write_all

    module = _load(args)
    if args.target == "nvptx" and args.emit is None:
        return _compile_nvptx(module, args)
    stage = Stage(args.emit)
    if args.output and stage in MODULE_STAGES:
        lower(module, stage, _options(args))
        _write_module(module, args.output, args.inline_weights)
    else:
        text = lower_to(module, stage, _options(args), inline_weights=args.inline_weights)
        if args.output:
            write_all({args.output: text if text.endswith("\n") else text + "\n"})
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _compile_library(args: argparse.Namespace) -> int:
    """The CPU library, compiled from the file itself (not a module loaded here), so an
    unchanged model is found whole in the compile cache: then nothing but the cache is
    imported (compile_cache.compile_cached), the compiler only on a miss."""
    from graphfuse import compile_cache

    output = _default_output(args)
    input_shapes, constants = {}, {}
    if args.input_shape or args.constant:
        from graphfuse.frontend.onnx_checks import parse_constants, parse_input_shapes

        input_shapes = parse_input_shapes(args.input_shape or [])
        constants = parse_constants(args.constant or [])
    options = _options(args)
    called = compile_cache.compile_cached(
        args.file, args.entry, options, Path(output), input_shapes, constants
    )
    if called is None:
        from graphfuse.compiler import compile as compile_module
        from graphfuse.runtime.compiled import CompiledFunction

        compiled = compile_module(
            args.file,
            args.entry,
            "cpu",
            options=options,
            output=output,
            input_shapes=input_shapes,
            constants=constants,
        )
        assert isinstance(compiled, CompiledFunction)
        called = compiled.described()
    print(f"wrote {output}: <compiled {called} from {output}>")
    from graphfuse.runtime.c_api.naming import header_path

    header = header_path(Path(output))
    if header.is_file():
        print(f"wrote {header}: the C interface (docs/c-api.md)")
    return 0


def _default_output(args: argparse.Namespace) -> str:
    """`-o`, else `<file>.so` (`<file>.nvptx` for PTX) in the current folder."""
    if args.output is not None:
        return args.output
    return Path(args.file).with_suffix(".nvptx" if args.target == "nvptx" else ".so").name


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output that could never be written before any work is done."""
    from graphfuse.outputs import check_output_file, check_output_folder

    if args.target == "nvptx" and args.emit is None:
        check_output_folder(_default_output(args))
    elif args.emit is None or args.output is not None:
        check_output_file(_default_output(args))


def _compile_nvptx(module: ModuleOp, args: argparse.Namespace) -> int:
    """PTX per kernel into a folder (--emit gpu / ptx print those stages instead, through
    lower_to like every other stage) (`<kernel>.ptx`), with the GPU-dialect module whose
    host function says how each kernel is launched (`module.mlir`)."""
    from graphfuse.compiler import fuse, to_gpu
    from graphfuse.outputs import check_output_folder, write_all
    from graphfuse.parsing import GraphfuseError
    from graphfuse.runtime.nvptx import build_ptx

    options = _options(args)
    fuse(module, options, cpu=False)
    to_gpu(module, options)
    gpu_text = str(module)
    kernels = build_ptx(gpu_text, options.nvptx)
    folder = check_output_folder(_default_output(args))
    created = not folder.exists()
    try:
        folder.mkdir(exist_ok=True)
    except OSError as error:
        raise GraphfuseError(f"{folder}: cannot create: {error.strerror}") from None
    files: dict[str | Path, str] = {folder / f"{name}.ptx": ptx for name, ptx in kernels.items()}
    files[folder / "module.mlir"] = gpu_text + "\n"
    try:
        write_all(files)
    except GraphfuseError:
        if created:
            folder.rmdir()
        raise
    chip = options.nvptx
    print(
        f"wrote {folder}/: {len(kernels)} kernels as PTX {chip.ptx_isa} for {chip.chip}, and "
        "module.mlir (their launches)"
    )
    return 0


def _reference_results(module: ModuleOp) -> tuple[list[np.ndarray], tuple[np.ndarray, ...]]:
    from graphfuse.dialects.graph import interpreter as reference

    inputs = reference.random_inputs(reference.find_function(module, "main"), seed=0)
    return inputs, reference.run(module, "main", *inputs)


def _compare_with_reference(
    module: ModuleOp, inputs: list[np.ndarray], expected: tuple[np.ndarray, ...]
) -> str:
    """Run the fused @main on the same inputs and compare with the unfused results.

    Partitioning alone never changes a bit; opening compound ops into primitives and
    folding constants round differently, so they may differ within CHECK_TOLERANCE.
    """
    import numpy as np

    from graphfuse.dialects.graph import interpreter as reference
    from graphfuse.parsing import GraphfuseError

    actual = reference.run(module, "main", *inputs)
    if all(np.array_equal(a, b, equal_nan=True) for a, b in zip(actual, expected, strict=True)):
        return f"check: @main gives bit-identical results before and after ({len(actual)} results)"
    error = max(_relative_error(a, b) for a, b in zip(actual, expected, strict=True))
    if not error <= CHECK_TOLERANCE:
        raise GraphfuseError(
            f"fused @main differs from the unfused one: relative error {error:.3g} "
            f"> {CHECK_TOLERANCE:g}"
        )
    return f"check: @main matches the unfused results, relative error {error:.3g}"


CHECK_TOLERANCE = 1e-4


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    import numpy as np

    scale = float(np.max(np.abs(expected.astype(np.float64)), initial=0.0)) or 1.0
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    return float(np.max(diff, initial=0.0)) / scale


def _report_lines(module: ModuleOp, before: dict[str, Summary]) -> list[str]:
    """Each kernel of the fused module, then each function's totals before and after."""
    from graphfuse.dialects.graph import functions
    from graphfuse.passes.analysis.kernel_stats import Summary, kernel_stats
    from graphfuse.passes.fusion.graph_report_fusion import kernel_line, summary_line

    lines: list[str] = []
    for function in functions(module):
        name = function.sym_name.data
        stats = kernel_stats(function)
        lines.extend(kernel_line(k) for k in stats)
        lines.append("before: " + summary_line(name, before[name]))
        lines.append("after:  " + summary_line(name, Summary.of(stats)))
    return lines


def _check_files(*paths: str | None) -> None:
    from graphfuse.outputs import check_output_file

    for path in paths:
        if path is not None:
            check_output_file(path)


def cmd_fuse(args: argparse.Namespace) -> int:
    """Fuse a graph file: print or write the fused module, optionally a Graphviz picture."""
    from graphfuse import pipelines
    from graphfuse.dialects.graph import functions
    from graphfuse.outputs import write_all
    from graphfuse.parsing import verify
    from graphfuse.passes.analysis.kernel_picture import function_to_dot
    from graphfuse.passes.analysis.kernel_stats import Summary, kernel_stats
    from graphfuse.passes.fusion.graph_fuse import GraphFusePass

    _check_files(args.output, args.dot)
    module = _load(args)
    before = {f.sym_name.data: Summary.of(kernel_stats(f)) for f in functions(module)}
    reference_run = _reference_results(module) if args.check else None
    notes: list[str] = []
    # The command's options are graph-fuse's, named as its fields.
    options = {f.name: getattr(args, f.name, None) for f in fields(GraphFusePass)}
    decisions = pipelines.run_explained(pipelines.graph_fuse(**options), module)
    if args.explain:
        notes.extend(f"graph-fuse: {line}" for line in decisions)
    verify(module)
    if args.report:
        notes.extend(_report_lines(module, before))
    if reference_run is not None:
        notes.append(_compare_with_reference(module, *reference_run))
    if args.dot:
        write_all({args.dot: "".join(function_to_dot(f) for f in functions(module))})
    for note in notes:
        print(f"// {note}")
    _write_module(module, args.output, args.inline_weights)
    return 0


_FILE_HELP = (
    "graph-dialect .mlir file, .onnx model, or TOSA (.tosa.mlir) or StableHLO "
    "(.stablehlo.mlir) MLIR"
)


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (the option and what it allows), like every
    other graphfuse diagnostic; `--help` still prints the whole usage. Subcommand parsers
    are made of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")


def _at_least(least: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `least` (usage errors name the option)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got '{text}'")
        return value

    return parse


_natural = _at_least(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graphfuse", description="Operator-fusion compiler for neural-network graphs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="list the external tools and their versions")
    doctor.set_defaults(handler=cmd_doctor)
    stats = commands.add_parser("stats", help="op counts by fusion kind")
    stats.add_argument("file", help=_FILE_HELP)
    _input_shape_argument(stats)
    stats.set_defaults(handler=cmd_stats)
    run = commands.add_parser("run", help="compile and run a function on random inputs")
    run.add_argument("file", help=_FILE_HELP)
    _input_shape_argument(run)
    run.add_argument("--seed", type=_natural, default=0, help="seed of the random inputs")
    run.add_argument(
        "--random-inputs", action="store_true", help="random inputs (the default and only source)"
    )
    run.add_argument("--show-inputs", action="store_true", help="summarise the inputs too")
    run.add_argument("--check", action="store_true", help="compare with the reference interpreter")
    run.add_argument(
        "--reference", action="store_true", help="run in the reference interpreter only"
    )
    run.add_argument("--time", action="store_true", help="time it against every op its own kernel")
    run.add_argument(
        "--profile", action="store_true", help="then time each kernel (as graphfuse profile)"
    )
    run.add_argument(
        "--target",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cpu, or cuda: the NVIDIA GPU the CUDA driver finds",
    )
    _compile_arguments(run)
    run.set_defaults(handler=cmd_run)
    _profile_arguments(commands.add_parser("profile", help="time each kernel of the CPU build"))
    compile_ = commands.add_parser("compile", help="compile a graph into a shared library")
    compile_.add_argument("file", help=_FILE_HELP)
    _input_shape_argument(compile_)
    compile_.add_argument(
        "-o",
        "--output",
        help="the library (default: <file>.so here); with --target nvptx a folder of PTX "
        "files (default: <file>.nvptx)",
    )
    compile_.add_argument(
        "--target",
        choices=["cpu", "nvptx"],
        default="cpu",
        help="cpu: a shared library; nvptx: PTX per kernel for NVIDIA GPUs",
    )
    compile_.add_argument(
        "--emit",
        choices=["graph", "loop", "upstream", "llvm", "gpu", "ptx"],
        help="print this stage instead of building: fused graph, loop kernels, upstream "
        "MLIR, optimised LLVM IR; with --target nvptx: the GPU-dialect module, the PTX",
    )
    _compile_arguments(compile_)
    compile_.set_defaults(handler=cmd_compile)
    fuse = commands.add_parser("fuse", help="fuse a graph into kernels (the graph-fuse pass)")
    fuse.add_argument("file", help=_FILE_HELP)
    _input_shape_argument(fuse)
    fuse.add_argument("-o", "--output", help="write the fused module here (default: stdout)")
    fuse.add_argument("--dot", help="write a Graphviz picture, one cluster per kernel")
    fuse.add_argument("--explain", action="store_true", help="print every fusion decision")
    fuse.add_argument("--report", action="store_true", help="print kernels and bytes moved")
    _max_depth_argument(fuse)
    fuse.add_argument("--rules", help="a PDL file of extra rewrite rules (graph-simplify)")
    fuse.add_argument(
        "--check", action="store_true", help="run @main before and after in the reference"
    )
    for part, what in (
        ("decompose", "opening compound ops"),
        ("simplify", "simplification and constant folding"),
        ("patterns", "pre-formed pattern kernels"),
        ("refine", "cost-model refinement (TVM's rules alone)"),
    ):
        fuse.add_argument(f"--no-{part}", dest=part, action="store_false", help=f"skip {what}")
    fuse.set_defaults(handler=cmd_fuse)
    import_ = commands.add_parser(
        "import", help="import an ONNX model or TOSA/StableHLO MLIR as a graph-dialect module"
    )
    import_.add_argument(
        "file",
        help=".onnx model, .tosa.mlir or .stablehlo.mlir file (a .mlir of tosa.* or "
        "stablehlo.* ops is recognised too)",
    )
    import_.add_argument("-o", "--output", help="write the module here (default: stdout)")
    _input_shape_argument(import_)
    import_.set_defaults(handler=cmd_import)
    for command in commands.choices.values():
        command.add_argument(
            "--timing", action="store_true", help="print a time tree of the stages to stderr"
        )
    for command in (import_, fuse, compile_):
        command.add_argument(
            "--inline-weights",
            action="store_true",
            help="weights over 4 KiB as bytes in the text, in MLIR's dialect_resources "
            "section (default: with -o, in a <output>.safetensors file beside it; --emit "
            "shows their names and shapes)",
        )
    return parser


def _profile_arguments(profile: argparse.ArgumentParser) -> None:
    profile.add_argument("file", help=_FILE_HELP)
    _input_shape_argument(profile)
    profile.add_argument("--seed", type=_natural, default=0, help="seed of the random inputs")
    profile.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace")
    profile.add_argument("--by-op", action="store_true", help="time per op of the model too")
    budget = profile.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=_at_least(1), help="timed runs (default: --seconds 1)")
    budget.add_argument("--seconds", type=_positive, help="time to spend on timed runs")
    profile.add_argument(
        "--remeasure", action="store_true", help="measure the machine's roofline again"
    )
    profile.add_argument("--target", default="cpu", help="cpu (the only target profiled)")
    _compile_arguments(profile)
    profile.set_defaults(handler=cmd_profile)


def _positive(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got '{text}'")
    return value


def _input_shape_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=D0xD1...",
        help="bind an ONNX input's dynamic dims (repeatable), e.g. input_ids=2x16",
    )
    parser.add_argument(
        "--constant",
        action="append",
        metavar="NAME=V0,V1,...",
        help="bind an ONNX input to known values (repeatable; a list, a number or a .npy "
        "file), for inputs graphfuse needs at import such as axes, pads or a trip count",
    )


def _compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entry", default="main", help="the function (default: main)")
    _max_depth_argument(parser)
    parser.add_argument(
        "--no-fuse", dest="fuse", action="store_false", help="every op its own kernel"
    )
    parser.add_argument(
        "--no-refine",
        dest="refine",
        action="store_false",
        help="TVM's fusion rules alone, without the cost-model refinement",
    )
    parser.add_argument("--cpu", help="llc -mcpu (default: this machine)")
    parser.add_argument(
        "--threads",
        type=_at_least(AT_LEAST["threads"]),
        help="workers per parallel loop (default: this machine's cores)",
    )
    parser.add_argument(
        "--lanes",
        type=int,
        choices=(8, 16),
        help="f32 lanes of the matmul and convolution kernels' vectors (default: 16 where "
        "the CPU has AVX-512, else 8)",
    )
    parser.add_argument(
        "--chip",
        help=f"GPU chip for PTX, e.g. sm_80 (default: {GPU_CHIP}, or the GPU's own)",
    )
    parser.add_argument("--ptx-isa", help=f"PTX ISA version (default: {PTX_ISA})")
    parser.add_argument(
        "--block-size",
        type=int,
        help=f"GPU threads per block (default: {BLOCK_SIZE})",
    )


def _max_depth_argument(parser: argparse.ArgumentParser) -> None:
    """--max-depth; left out, graph-fuse's default."""
    parser.add_argument(
        "--max-depth", type=_at_least(AT_LEAST["max_depth"]), help="most ops per kernel"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `graphfuse` command."""
    args = build_parser().parse_args(argv)
    if not args.timing:
        return _dispatch(args)
    with timing.collect(f"graphfuse {args.command}") as root:
        code = _dispatch(args)
    print(timing.render(root), file=sys.stderr)
    return code


def _dispatch(args: argparse.Namespace) -> int:
    """Runs the command; a diagnostic becomes one line and exit status 1."""
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: not an error of ours.
        sys.stderr.close()
        return 0
    except Exception as error:
        # xDSL's exception classes are imported once something failed, not at start-up.
        from xdsl.utils.exceptions import DiagnosticException

        if not isinstance(error, DiagnosticException):
            raise
        print(f"graphfuse: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
