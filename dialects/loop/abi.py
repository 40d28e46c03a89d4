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

SCRATCH_OFFSETS = "graphfuse.scratch_offsets"
"""array<i64>: each scratch buffer's byte offset in the one block the caller allocates for
them all (loop-plan-scratch). Buffers never in use at the same time share bytes, as
onnxruntime's and TFLite's memory planners share them. Without it the buffers follow one
another, each on a SCRATCH_ALIGNMENT boundary."""

SCRATCH_ALIGNMENT = 64
"""Each scratch buffer starts on a cache line."""

PERSISTENT = "graphfuse.persistent"
"""array<i64> on a loop.kernel: its argument positions whose contents must outlive a call
(loop-tile-matmul's operands packed on the first call only, and their flag): their scratch
is never shared."""
