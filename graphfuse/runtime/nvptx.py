"""Building PTX: the GPU-dialect module through mlir-opt's NVVM pipeline, one PTX text per
kernel.

`convert-loop-to-gpu` makes one `gpu.module` per kernel. mlir-opt's
`gpu-lower-to-nvvm-pipeline` lowers each to NVVM, links libdevice (for exp, erf, tanh...)
and serialises it with LLVM's NVPTX back end (`cubin-format=isa`: PTX text, no CUDA
toolkit needed) into a `gpu.binary` whose `assembly` string is the PTX. Kernels take bare
device pointers (`kernel-bare-ptr-calling-convention`): one 64-bit parameter per buffer,
which the CUDA runtime passes without building memref descriptors.

mlir-opt only warns about a chip or PTX version it does not know and emits PTX anyway, so
graphfuse checks both against the lists below first and names the valid ones.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from graphfuse.runtime.build import cache_dir, run_tool, write_atomically
from graphfuse.toolchain import ToolchainError, require_tool, tool_version

CHIP_MIN_PTX: dict[str, str] = {
    "sm_70": "6.0",
    "sm_72": "6.1",
    "sm_75": "6.3",
    "sm_80": "7.0",
    "sm_86": "7.1",
    "sm_87": "7.4",
    "sm_89": "7.8",
    "sm_90": "7.8",
    "sm_90a": "8.0",
    "sm_100": "8.6",
    "sm_100a": "8.6",
    "sm_101": "8.6",
    "sm_101a": "8.6",
    "sm_120": "8.7",
    "sm_120a": "8.7",
}
"""Chips graphfuse builds for (Volta and newer, as LLVM 22's NVPTX back end names them),
each with the first PTX ISA version that can target it (NVIDIA's PTX ISA release notes)."""

PTX_ISAS = ("8.0", "8.1", "8.2", "8.3", "8.4", "8.5", "8.6", "8.7", "8.8")
"""PTX ISA versions graphfuse emits: 8.0 (CUDA 12.0) and newer, as far as LLVM 22 goes."""


class NvptxTargetError(ToolchainError):
    """An unknown chip or PTX ISA version, or a pair that does not go together."""


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


DEFAULT_CHIP = "sm_90"


@dataclass(frozen=True)
class NvptxTarget:
    """What the PTX is built for."""

    chip: str = DEFAULT_CHIP
    ptx_isa: str = "8.0"

    def check(self) -> None:
        """Raise `NvptxTargetError` naming the valid values when either is unknown."""
        if self.chip not in CHIP_MIN_PTX:
            raise NvptxTargetError(
                f"unknown GPU chip '{self.chip}'; valid chips: {', '.join(CHIP_MIN_PTX)}"
            )
        if self.ptx_isa not in PTX_ISAS:
            raise NvptxTargetError(
                f"unsupported PTX ISA version '{self.ptx_isa}'; valid versions: "
                f"{', '.join(PTX_ISAS)}"
            )
        needed = CHIP_MIN_PTX[self.chip]
        if _version(self.ptx_isa) < _version(needed):
            newer = [v for v in PTX_ISAS if _version(v) >= _version(needed)]
            raise NvptxTargetError(
                f"{self.chip} needs PTX ISA {needed} or newer, got {self.ptx_isa}; valid "
                f"versions for {self.chip}: {', '.join(newer)}"
            )

    @property
    def feature(self) -> str:
        """The LLVM feature naming the PTX version: 8.0 -> +ptx80."""
        return "+ptx" + self.ptx_isa.replace(".", "")

    def pipeline(self) -> str:
        return (
            f"--gpu-lower-to-nvvm-pipeline=cubin-chip={self.chip} "
            f"cubin-features={self.feature} cubin-format=isa opt-level=3 "
            "kernel-bare-ptr-calling-convention=true"
        )


_BINARY = re.compile(r'gpu\.binary @([\w$.-]+)\s*\[#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2})|\\(.)")


def _unescape(text: str) -> str:
    """An MLIR string literal's contents: `\\XX` is a byte in hex, `\\c` is c."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], text)


def ptx_of_binaries(lowered: str) -> dict[str, str]:
    """The PTX of each `gpu.binary` in mlir-opt's output, by gpu.module name."""
    return {name: _unescape(body) for name, body in _BINARY.findall(lowered)}


def _fingerprint(gpu_text: str, target: NvptxTarget) -> str:
    digest = hashlib.sha256()
    digest.update(gpu_text.encode())
    digest.update(target.pipeline().encode())
    digest.update(tool_version(require_tool("mlir-opt")).encode())
    digest.update(b"graphfuse-ptx-1")
    return digest.hexdigest()[:32]


def build_ptx(gpu_text: str, target: NvptxTarget = NvptxTarget()) -> dict[str, str]:
    """PTX text per kernel (gpu.module) of a module `convert-loop-to-gpu` produced, built
    by mlir-opt or found in the cache."""
    target.check()
    cached = cache_dir() / f"{_fingerprint(gpu_text, target)}.ptx.json"
    if cached.exists():
        return {str(k): str(v) for k, v in json.loads(cached.read_text()).items()}
    lowered = run_tool("building PTX", "mlir-opt", [target.pipeline()], gpu_text).decode()
    kernels = ptx_of_binaries(lowered)
    expected = re.findall(r'"gpu\.module"\(\) <\{sym_name = "([^"]+)"\}>', gpu_text)
    missing = [name for name in expected if name not in kernels]
    if missing:
        raise ToolchainError(f"building PTX: mlir-opt produced no PTX for kernel @{missing[0]}")
    write_atomically(cached, json.dumps(kernels).encode())
    return kernels
