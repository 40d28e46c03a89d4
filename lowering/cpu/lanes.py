"""The f32 vector width the CPU passes assume when a pipeline does not say.

loop-tile-matmul, scf-interleave-loops and scf-predicate-short-loops must agree on it (the
tiles, the interleaved loops and the masked tails are cut for the same registers), so the
default and the widths they accept are defined once here. The compiler passes the build
target's width (16 on AVX-512, see `CpuTarget.vector_lanes`); this default is AVX2's 8.
"""

from graphfuse.parsing import check_one_of

DEFAULT_LANES = 8

LANE_CHOICES = (8, 16)
"""The widths the CPU passes cut tiles, interleaved loops and masked tails for: AVX2's
and AVX-512's."""


def check_lanes(pass_name: str, lanes: int) -> None:
    """A pass's `lanes` option is one of LANE_CHOICES (a PassFailedException names it)."""
    check_one_of(pass_name, "lanes", lanes, LANE_CHOICES)
