"""The f32 vector width the CPU passes assume when a pipeline does not say.

loop-tile-matmul, scf-interleave-loops and scf-predicate-short-loops must agree on it (the
tiles, the interleaved loops and the masked tails are cut for the same registers), so the
default is defined once here. The compiler passes the build target's width (16 on
AVX-512, see `CpuTarget.vector_lanes`); this default is AVX2's 8.
"""

DEFAULT_LANES = 8
