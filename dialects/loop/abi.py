"""The kernel ABI: attributes on a converted function that its callers read.

convert-graph-to-loop writes them, loop-tile-matmul updates SCRATCH when it adds buffers,
convert-loop-to-upstream finds kernel functions by OUTPUTS, and the compiler
(`caller_signature`) splits a function's memref arguments into inputs, results and
scratch with them for the runtime. A function's
arguments are its inputs, then OUTPUTS result buffers, then SCRATCH scratch buffers.
"""

OUTPUTS = "graphfuse.outputs"
"""i64: how many trailing arguments (before the scratch ones) are result buffers."""

SCRATCH = "graphfuse.scratch"
"""i64: how many trailing arguments are scratch buffers the caller allocates."""
