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
"""Multiply-adds below which a contraction keeps its dot-product form: the small matmuls of
tiny transformers (MobileViT's, a Llama's per-head attention) run faster tiled from here
on than as dot products (the measurements are in docs/decisions.md)."""


MIN_POINTS, MIN_REDUCTION = 64, 4
"""Below these a contraction is degenerate for a GEMM's register tiles (a 3x3 product of
depth 3000, or an outer product of depth 1 ran 30-40% slower tiled)."""


def worth_tiling(points: int, reduction: int) -> bool:
    """Whether a contraction over `reduction` per output point, at `points` points, is big
    enough to tile: smaller ones keep the dot-product form (packing would cost more than
    it saves)."""
    big_enough = points >= MIN_POINTS and reduction >= MIN_REDUCTION
    return big_enough and points * reduction >= MIN_FLOPS
