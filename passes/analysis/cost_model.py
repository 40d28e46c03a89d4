"""A roofline cost model of kernels: bytes moved, flops and a launch cost per kernel.

The refinement steps of graph-fuse (priority fusion, recomputation, multi-output,
horizontal fusion, merger, rollback) compare plans by the estimated time of their kernels,
as XLA's GPU priority fusion does: a kernel takes

    launch + max(bytes moved / memory bandwidth, flops / peak flops)

so fusing saves the bytes of every value kept out of memory and the launches of the
kernels merged, and recomputing a cheap producer in several consumers costs flops that are
free while a kernel is memory-bound. A target is three numbers (`Target`); `CPU_HOST` was
measured once on the development machine, `H100` is NVIDIA's data sheet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation

from graphfuse.dialects import graph
from graphfuse.dialects.graph import FusionKind, fusion_kind, tensor_type_of
from graphfuse.passes.analysis.kernel_stats import elements


@dataclass(frozen=True)
class Target:
    """What a kernel costs on one machine."""

    name: str
    bandwidth: float
    """Memory bandwidth, bytes per second (read + written)."""
    peak_flops: float
    """Arithmetic throughput, floating-point operations per second."""
    launch: float
    """Fixed cost of starting one kernel, seconds."""


CPU_HOST = Target("cpu", bandwidth=21e9, peak_flops=98e9, launch=5e-6)
"""The development VM: NumPy copy bandwidth, NumPy sgemm throughput, and one compiled
kernel call with its loop set-up (measurements: docs/decisions.md)."""

H100 = Target("h100", bandwidth=3.35e12, peak_flops=67e12, launch=4e-6)
"""H100 SXM: 3.35 TB/s HBM3, 67 TFLOP/s FP32 (non-tensor-core), ~4 us per launch."""

TARGETS = {target.name: target for target in (CPU_HOST, H100)}


@dataclass(frozen=True)
class KernelCost:
    """What one kernel moves and computes."""

    bytes_read: int
    bytes_written: int
    flops: int

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    def time(self, target: Target) -> float:
        """Roofline estimate in seconds."""
        memory = self.bytes_moved / target.bandwidth
        compute = self.flops / target.peak_flops
        return target.launch + max(memory, compute)


_TRANSCENDENTAL = (
    graph.ExpOp,
    graph.LogOp,
    graph.TanhOp,
    graph.SigmoidOp,
    graph.ErfOp,
    graph.PowOp,
    graph.SinOp,
    graph.CosOp,
    graph.TanOp,
    graph.AsinOp,
    graph.AcosOp,
    graph.AtanOp,
    graph.SinhOp,
    graph.CoshOp,
    graph.AsinhOp,
    graph.AcoshOp,
    graph.AtanhOp,
)
_DIVIDING = (graph.DivOp, graph.ModOp, graph.SqrtOp, graph.RsqrtOp)

TRANSCENDENTAL_FLOPS = 10
"""Flops charged per element of exp, log, tanh, sigmoid, erf, pow and the trigonometric
and hyperbolic functions (a polynomial or a libm call)."""
DIVISION_FLOPS = 4


def elementwise_flops(op: Operation) -> int:
    if isinstance(op, _TRANSCENDENTAL):
        return TRANSCENDENTAL_FLOPS
    if isinstance(op, _DIVIDING):
        return DIVISION_FLOPS
    return 1


def op_flops(op: Operation) -> int:
    """Floating-point operations of one graph op (a pre-formed kernel: of its ops)."""
    if isinstance(op, graph.FusedOp):
        return sum(op_flops(inner) for inner in op.body.block.ops)
    if isinstance(op, graph.MatmulOp):
        return 2 * elements(op.result) * tensor_type_of(op.lhs).get_shape()[-1]
    if isinstance(op, graph.Conv2dOp):
        taps = math.prod(tensor_type_of(op.weight).get_shape()[1:])
        return 2 * elements(op.result) * taps
    if isinstance(op, graph.Pool2dOp):
        return elements(op.result) * math.prod(op.kernel.get_values())
    if isinstance(op, graph.ReduceOp):
        return elements(op.input)
    kind = fusion_kind(op)
    if kind is FusionKind.ELEMWISE or kind is FusionKind.BROADCAST:
        return sum(elements(r) for r in op.results) * elementwise_flops(op)
    return 0
