"""`graphfuse.compile`: a graph in, a callable on NumPy arrays out.

The pipeline is the one the README draws: the pass pipelines of graphfuse.pipelines, run
stage by stage (fusion: graph, to_loop: loop, cpu_lowering or gpu_lowering: upstream), then
mlir-opt / mlir-translate / opt (llvm) and llc + the C compiler (a shared library), or PTX.
`lower_to` stops at any stage, for `graphfuse compile --emit` and for tests. CompileOptions
take their defaults from the passes that use them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.hints import isa

from graphfuse import compile_cache, pipelines
from graphfuse import options as options_module
from graphfuse.dialects import loop
from graphfuse.dialects.loop import abi
from graphfuse.graph_inputs import check_calls, check_graph_module
from graphfuse.lowering.gpu.convert_loop_to_gpu import check_block_size
from graphfuse.options import CompileOptions
from graphfuse.outputs import check_output_file
from graphfuse.parsing import GraphfuseError, parse_file, verify
from graphfuse.runtime.build import build_module_library, to_llvm_ir
from graphfuse.runtime.c_api.describe import scratch_offsets
from graphfuse.runtime.compiled import CompiledFunction
from graphfuse.runtime.cuda_function import CudaFunction, HostPlan
from graphfuse.runtime.nvptx import build_ptx
from graphfuse.timing import timed
from graphfuse.weights import module_text


class Stage(Enum):
    """Where `lower_to` stops."""

    GRAPH = "graph"
    LOOP = "loop"
    UPSTREAM = "upstream"
    LLVM = "llvm"
    GPU = "gpu"
    """The GPU build's upstream module: gpu.module kernels and a host function of
    gpu.launch_func, before mlir-opt."""
    PTX = "ptx"


AT_LEAST = options_module.AT_LEAST
"""The least value of each count option (graphfuse.options)."""


TARGETS = ("cpu", "cuda")


def load(
    module_or_path: ModuleOp | str | Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> ModuleOp:
    """A verified graph module, checked as graphfuse input: parsed from a path (.mlir, or
    .onnx imported with `input_shapes` binding its dynamic dimensions and `constants` its
    inputs that must be known), or a copy of the given module; anything else is refused in
    one line."""
    with timed("load"):
        if isinstance(module_or_path, ModuleOp):
            module = module_or_path.clone()
            verify(module)
        else:
            module = _load_path(module_or_path, input_shapes or {}, constants or {})
        check_graph_module(module)
    return module


def _load_path(
    path: object, input_shapes: Mapping[str, Sequence[int]], constants: Mapping[str, Any]
) -> ModuleOp:
    if not isinstance(path, str | Path):
        raise GraphfuseError(
            f"expected an xDSL ModuleOp or the path of a .mlir or .onnx file, "
            f"got {type(path).__name__}"
        )
    if _looks_like_mlir_text(str(path)):
        raise GraphfuseError(
            "got MLIR text where a path is expected: parse it first with "
            "graphfuse.parsing.parse_text(text) and pass the module"
        )
    kind = input_kind(path)
    if kind == "onnx":
        from graphfuse.frontend.onnx_import import from_onnx

        module = from_onnx(path, input_shapes, constants=constants)
        _return_freed_memory()
        return module
    if input_shapes or constants:
        option = "--input-shape" if input_shapes else "--constant"
        raise GraphfuseError(f"{path}: {option} applies to .onnx models only")
    if kind == "tosa":
        from graphfuse.frontend.tosa import import_tosa_file

        return import_tosa_file(path)
    if kind == "stablehlo":
        # Imported lazily: the StableHLO front end needs jaxlib's MLIR bindings.
        from graphfuse.frontend.stablehlo import import_stablehlo_file

        return import_stablehlo_file(path)
    return parse_file(path)


def _return_freed_memory() -> None:
    """Give the heap the ONNX import freed back to the system. The model's protobuf and the
    initializers' arrays are freed once the module holds the weights, but glibc keeps the
    freed heap: BERT-base stayed at 1.2 GB instead of 0.5 GB through the build, and the
    linker's 0.9 GB came on top of it."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except OSError:
        trim = None
    if trim is not None:  # glibc only
        trim(0)


def _looks_like_mlir_text(path: str) -> bool:
    """Text where a path was meant: several lines, or an op with its body and no such file
    (`module_net.mlir` is a file name)."""
    if "\n" in path:
        return True
    return bool(_MLIR_START.match(path)) and not Path(path).exists()


_MLIR_START = re.compile(r"\s*(func\.func\s+@|builtin\.module\s*\{|module\s*\{)")

INPUT_KINDS = {
    ".tosa.mlir": "tosa",
    ".stablehlo.mlir": "stablehlo",
    ".mlir": "mlir",
    ".onnx": "onnx",
}
"""The front end each input suffix picks (the longest suffix that fits): 'mlir' is the
graph dialect, unless the file's ops are TOSA or StableHLO (`sniff_mlir`)."""


def input_kind(path: str | Path) -> str:
    """'mlir', 'onnx', 'tosa' or 'stablehlo' by the file's suffix (and, for a plain .mlir,
    the dialect of its first ops); any other suffix is refused rather than guessed, so a
    binary model is never read as MLIR text nor the reverse."""
    name = Path(path).name.lower()
    kind = next((k for suffix, k in INPUT_KINDS.items() if name.endswith(suffix)), None)
    if kind is None:
        raise GraphfuseError(
            f"{path}: not a .mlir or .onnx file: graphfuse picks the reader by the suffix "
            "(.mlir: graph dialect, .tosa.mlir: TOSA, .stablehlo.mlir: StableHLO, .onnx: "
            "ONNX model)"
        )
    return sniff_mlir(path) if kind == "mlir" else kind


_SNIFF_BYTES = 1 << 16
_FOREIGN_OP = re.compile(r'^\s*(?:%[^=\n]*=\s*)?"?(tosa|stablehlo)\.[a-z_]', re.MULTILINE)


def sniff_mlir(path: str | Path) -> str:
    """'tosa' or 'stablehlo' when an op of that dialect starts a line within the file's
    first 64 KiB, else 'mlir' (graph dialect; an unreadable file is reported by the
    parser)."""
    try:
        with open(path, "rb") as file:
            head = file.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return "mlir"
    found = _FOREIGN_OP.search(head)
    return found.group(1) if found else "mlir"


def check_options(options: CompileOptions, target: str = "cpu") -> None:
    """What can only be checked against the tools (the CPU name llc knows)."""
    if target == "cpu" and options.cpu != "native":
        from graphfuse.toolchain import check_cpu

        check_cpu(options.cpu, options.target.triple)


def fuse(module: ModuleOp, options: CompileOptions, cpu: bool = True) -> None:
    """The fusion pipeline in place (idempotent: fusing a fused module changes nothing).
    For the CPU build, grouped convolutions that tile are first split per group."""
    pipelines.run(pipelines.fusion(cpu, **options.fusion()), module)
    verify(module)


MODULE_STAGES = frozenset({Stage.GRAPH, Stage.LOOP, Stage.UPSTREAM, Stage.GPU})
"""The stages whose text is an MLIR module."""


def lower(module: ModuleOp, stage: Stage, options: CompileOptions = CompileOptions()) -> None:
    """Change the module in place up to `stage` (for LLVM and PTX: up to the module the
    tools take), printing nothing."""
    fuse(module, options, cpu=stage not in (Stage.GPU, Stage.PTX))
    if stage is Stage.GRAPH:
        return
    if stage in (Stage.GPU, Stage.PTX):
        to_gpu(module, options)
        return
    _to_loop(module)
    if stage is not Stage.LOOP:
        pipelines.run(options.cpu_lowering(), module)


def lower_to(
    module: ModuleOp,
    stage: Stage,
    options: CompileOptions = CompileOptions(),
    inline_weights: bool = True,
) -> str:
    """The module's text at `stage` (the module is changed in place up to that stage).
    Stage.PTX gives every kernel's PTX, each after a `// kernel @name` line. Without
    `inline_weights`, the MLIR stages print large weights as named `dense_resource`
    handles (shape and name, no bytes; see graphfuse.weights)."""
    if stage is Stage.LLVM:
        check_options(options)
    lower(module, stage, options)
    if stage is Stage.PTX:
        kernels = build_ptx(str(module), options.nvptx)
        return "".join(f"// kernel @{name}\n{ptx}" for name, ptx in kernels.items())
    if stage is Stage.LLVM:
        return to_llvm_ir(str(module), options.target)
    with timed("print"):
        return module_text(module, inline=inline_weights)


def _to_loop(module: ModuleOp, cpu: bool = True) -> None:
    pipelines.run(pipelines.to_loop(cpu), module)
    verify(module)


def to_gpu(module: ModuleOp, options: CompileOptions, entry: str | None = None) -> Signature | None:
    """A fused module, in place, to the GPU build's upstream form (print it for mlir-opt):
    a gpu.module of kernels per loop kernel, host functions of launches. With `entry`,
    returns that function's signature as its callers see it (taken before the GPU build
    stores i1 as bytes). The chip and block size are checked first, before any work."""
    options.nvptx.check()
    check_block_size(options.block_size)
    _to_loop(module, cpu=False)
    signature = caller_signature(module, entry) if entry is not None else None
    pipelines.run(pipelines.gpu_lowering(options.block_size), module)
    return signature


def _entry(module: ModuleOp, entry: str) -> func.FuncOp:
    from graphfuse.dialects.graph.interpreter import find_function

    return find_function(module, entry)


@dataclass(frozen=True)
class Signature:
    """The buffers a loop-stage function takes from and gives to its callers (inputs,
    then one per result), as the graph types them; scratch buffers follow."""

    inputs: list[MemRefType[Attribute]]
    outputs: list[MemRefType[Attribute]]

    def scratch(self, function: func.FuncOp) -> list[MemRefType[Attribute]]:
        """The scratch buffers `function` (this entry, lowered further) takes now: later
        passes may add some (loop-tile-matmul's packed operands)."""
        return _memrefs(function.function_type.inputs.data[len(self.inputs) + len(self.outputs) :])


def caller_signature(module: ModuleOp, entry: str) -> Signature:
    """`entry`'s inputs and outputs after convert-graph-to-loop."""
    function = _entry(module, entry)
    types = _memrefs(function.function_type.inputs.data)
    n_out = _count_attribute(function, abi.OUTPUTS)
    n_in = len(types) - n_out - _count_attribute(function, abi.SCRATCH)
    return Signature(types[:n_in], types[n_in : n_in + n_out])


def _count_attribute(function: func.FuncOp, name: str) -> int:
    """A buffer count convert-graph-to-loop records on the function as an integer attribute."""
    attr = function.attributes[name]
    assert isinstance(attr, IntegerAttr), f"{name} on @{function.sym_name.data} is not an integer"
    return attr.value.data


def _memrefs(types: tuple[Attribute, ...] | list[Attribute]) -> list[MemRefType[Attribute]]:
    result: list[MemRefType[Attribute]] = []
    for typ in types:
        assert isa(typ, MemRefType[Attribute])
        result.append(typ)
    return result


def _check_options_type(options: object) -> None:
    """Refuse, in one line, options that are no CompileOptions (from an untyped caller)."""
    if not isinstance(options, CompileOptions):
        raise GraphfuseError(f"options must be a CompileOptions, got {type(options).__name__}")


def compile(  # noqa: A001 - the name users expect, as torch.compile
    module_or_path: ModuleOp | str | Path,
    entry: str = "main",
    target: str = "cpu",
    *,
    options: CompileOptions = CompileOptions(),
    output: str | Path | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, Any] | None = None,
    reuse: bool = False,
) -> CompiledFunction | CudaFunction:
    """Compile a graph-dialect module (or .mlir / .onnx file, `input_shapes` binding an
    ONNX model's dynamic dimensions, `constants` its inputs that must be known) and return
    `entry` as a callable taking and returning NumPy arrays: for the CPU (`output` also
    writes the shared library there) or, with
    target 'cuda', for the NVIDIA GPU the CUDA driver finds. A model file compiled to
    `output` before, unchanged, is found whole in the cache (graphfuse.compile_cache).
    With `reuse`, so is a compile for this process (no `output`) of a module or file seen
    before, by its text and weights: what torch.compile's backend asks, as every new
    process hands it the same graphs. (Not the default: a compile is then keyed by
    graphfuse's source files, which a test that patches a pass in memory does not change.)"""
    _check_options_type(options)
    if target not in TARGETS:
        raise GraphfuseError(f"unknown target '{target}'; valid targets: {', '.join(TARGETS)}")
    if target == "cuda":
        return _compile_cuda(module_or_path, entry, options, input_shapes, constants)
    check_options(options, target)
    if output is not None:
        output = check_output_file(output)
    # Only libraries written out are kept whole (they stand alone); without `output`
    # the build reuses objects.
    key = (
        None
        if output is None or not _is_model_file(module_or_path)
        else compile_cache.key_for(Path(module_or_path), entry, options, input_shapes, constants)
    )
    if key is not None and output is not None:
        found = compile_cache.lookup(key, Path(output).name)
        if found is not None:
            return _from_cache(found, entry, output)
    loaded_key = None
    if output is None and reuse:
        loaded_key = _loaded_key(module_or_path, entry, options, input_shapes, constants)
        hit = compile_cache.lookup_loaded(loaded_key) if loaded_key is not None else None
        if hit is not None:
            return _from_loaded(hit, entry)
    # xDSL's IR is cyclic: full collections would walk the growing module again and again.
    with pipelines.fewer_full_collections():
        module = load(module_or_path, input_shapes, constants)
        lowered = lower_for_cpu(module, entry, options)
        signature, scratch, offsets = lowered.signature, lowered.scratch, lowered.offsets
        kernels, detached = lowered.kernels, lowered.detached
        cpu = options.build_target
        with timed("build"):
            library = build_module_library(
                module,
                cpu,
                Path(output) if output is not None else None,
                detached,
                caller_types={entry: (signature.inputs, signature.outputs)},
            )
    compiled = CompiledFunction(
        library,
        entry,
        signature.inputs,
        signature.outputs,
        scratch,
        kernels,
        detached if output is None else {},
        offsets,
    )
    if loaded_key is not None:
        with timed("keep in the module cache"):
            compile_cache.store_loaded(
                loaded_key, library, _signature_record(compiled, offsets), detached
            )
    if key is not None:
        threaded = options.threads > 1 and any(op.name == "scf.parallel" for op in module.walk())
        with timed("keep in the model cache"):
            record = {**_signature_record(compiled, offsets), "threaded": threaded}
            compile_cache.store(key, library, record)
    return compiled


@dataclass(frozen=True)
class CpuLowered:
    """What the CPU build of an entry needs besides its module (lowered in place): how
    callers see it and the buffers and constants its runtime supplies."""

    signature: Signature
    scratch: list[MemRefType[Attribute]]
    offsets: tuple[int, ...] | None
    """The scratch buffers' planned byte offsets (loop-plan-scratch)."""
    kernels: int
    """Kernel calls the entry makes."""
    detached: dict[str, bytes]
    """Large constants that reach the build as bytes, not text (detached_constants.py)."""


def lower_for_cpu(
    module: ModuleOp,
    entry: str,
    options: CompileOptions,
    fused: Callable[[ModuleOp], None] | None = None,
) -> CpuLowered:
    """Fuses `module` and lowers it in place to the upstream MLIR the CPU build takes: the
    sequence `compile` and the profiler's builds share. `fused` sees the module between
    fusion and the loop conversion."""
    from graphfuse.lowering.graph_to_loop.detached_constants import large_constants

    check_calls(_entry(module, entry))
    with timed("graph to loop"):
        fuse(module, options)
        if fused is not None:
            fused(module)
        _to_loop(module)
    signature = caller_signature(module, entry)
    kernels = sum(1 for op in _entry(module, entry).walk() if isinstance(op, loop.CallOp))
    with timed("cpu lowering"):
        pipelines.run(options.cpu_lowering(), module)
    function = _entry(module, entry)
    # Large constants (and zeros of both signs, which xDSL would print as one splat) never
    # reach the tools as text: a library written to `output` links their bytes in; one used
    # here reserves their space and they are copied in on loading.
    return CpuLowered(
        signature,
        signature.scratch(function),
        scratch_offsets(function),
        kernels,
        large_constants(module),
    )


def _from_cache(found: compile_cache.CachedModel, entry: str, output: Path) -> CompiledFunction:
    """The cached library, put at `output` (compile_cache.install)."""
    from graphfuse.parsing import parse_type

    described = compile_cache.install(found, output)

    def types(key: str) -> list[MemRefType[Attribute]]:
        return _memrefs([parse_type(text) for text in described[key]])

    return CompiledFunction(
        Path(output).absolute(),
        entry,
        types("inputs"),
        types("outputs"),
        types("scratch"),
        int(described["kernels"]),
        scratch_offsets=described.get("scratch_offsets"),
    )


def _signature_record(compiled: CompiledFunction, offsets: Sequence[int] | None) -> dict[str, Any]:
    """What the caches keep to call a library again without its module."""
    return {
        "inputs": [str(t) for t in compiled.inputs],
        "outputs": [str(t) for t in compiled.outputs],
        "scratch": [str(t) for t in compiled.scratch],
        "scratch_offsets": list(offsets) if offsets is not None else None,
        "kernels": compiled.kernel_count,
        "called": compiled.described(),
    }


def _loaded_key(
    module_or_path: ModuleOp | str | Path,
    entry: str,
    options: CompileOptions,
    input_shapes: Mapping[str, Sequence[int]] | None,
    constants: Mapping[str, Any] | None,
) -> str | None:
    """The key of a compile for this process: a model file's, or a module's text and
    weights (printed with its weights as handles, their bytes hashed), as torch.compile
    hands graphfuse a module per graph it meets again. None for text or a bad path."""
    if _is_model_file(module_or_path):
        return compile_cache.key_for(Path(module_or_path), entry, options, input_shapes, constants)  # type: ignore[arg-type]
    if not isinstance(module_or_path, ModuleOp):
        return None
    from graphfuse.weights import outlined

    with timed("look up the module cache"):
        digest = hashlib.sha256()
        with outlined(module_or_path) as found:
            digest.update(str(module_or_path).encode())
        for name, value in sorted(found.weights.items()):
            digest.update(name.encode() + b"\0")
            digest.update(value.data.data)
        settings = compile_cache.settings_of(options)
        return compile_cache.content_key([digest.hexdigest()], entry, settings)


def _from_loaded(hit: compile_cache.Loaded, entry: str) -> CompiledFunction:
    """A compile for this process found whole: its library, its constants copied in."""
    from graphfuse.parsing import parse_type

    def types(key: str) -> list[MemRefType[Attribute]]:
        return _memrefs([parse_type(text) for text in hit.signature[key]])

    with timed("load the kept library"):
        return CompiledFunction(
            hit.library,
            entry,
            types("inputs"),
            types("outputs"),
            types("scratch"),
            int(hit.signature["kernels"]),
            hit.detached,
            hit.signature.get("scratch_offsets"),
        )


def _is_model_file(module_or_path: ModuleOp | str | Path) -> bool:
    """A path of a model file (what the model cache keys): not a module in memory, nor
    text, nor a path load() refuses (it says what is wrong)."""
    if not isinstance(module_or_path, str | Path) or _looks_like_mlir_text(str(module_or_path)):
        return False
    path = Path(module_or_path)
    return path.is_file() and any(path.name.lower().endswith(s) for s in INPUT_KINDS)


def _compile_cuda(
    module_or_path: ModuleOp | str | Path,
    entry: str,
    options: CompileOptions,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> CudaFunction:
    """The GPU build: PTX per kernel for the GPU present (its chip unless options name
    one), loaded through the CUDA driver. Without a driver or GPU this fails first."""
    from graphfuse.runtime.cuda_driver import driver

    gpu = driver()
    if options.chip is None:
        options = replace(options, chip=gpu.info().chip)
    module = load(module_or_path, input_shapes, constants)
    check_calls(_entry(module, entry))
    fuse(module, options, cpu=False)
    signature = to_gpu(module, options, entry)
    assert signature is not None
    kernels = build_ptx(str(module), options.nvptx)
    plan = HostPlan(module, _entry(module, entry))
    return CudaFunction(gpu, entry, kernels, plan, signature.inputs, signature.outputs)
