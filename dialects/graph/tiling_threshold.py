"""The size from which a contraction is computed as a tiled GEMM rather than as one dot
product per output point.

It lives with the graph dialect because two layers read it: loop-tile-matmul (lowering),
which tiles exactly the contractions `worth_tiling` accepts, and graph-fuse's legality
(passes), which lets a matmul read a reshape that merges dims in place only when the
matmul is tiled: packing evaluates the reshape's div/mod once per operand element, where a
dot-product nest would evaluate it for every multiply-add.
"""

from __future__ import annotations

MIN_FLOPS = 1 << 13
"""Multiply-adds below which a contraction keeps its dot-product form. It was 1 << 16 until
issue 25's profiles showed the small matmuls of tiny transformers (MobileViT's, a Llama's
per-head attention) at 4-6 GFLOP/s as dot products; tiled from 8,192 multiply-adds the tiny
models ran 15-30% faster (ViT 0.092 -> 0.058 ms, Llama 0.142 -> 0.105 ms, MobileViT 0.89 ->
0.63 ms, 2 threads, side by side with onnxruntime in one process)."""


MIN_POINTS, MIN_REDUCTION = 64, 4
"""Below these a contraction is degenerate for a GEMM's register tiles (a 3x3 product of
depth 3000, or an outer product of depth 1 ran 30-40% slower tiled)."""


def worth_tiling(points: int, reduction: int) -> bool:
    """Whether a contraction over `reduction` per output point, at `points` points, is big
    enough to tile: smaller ones keep the dot-product form (packing would cost more than
    it saves)."""
    big_enough = points >= MIN_POINTS and reduction >= MIN_REDUCTION
    return big_enough and points * reduction >= MIN_FLOPS
