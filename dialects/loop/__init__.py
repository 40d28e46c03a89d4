"""The loop dialect: one `loop.kernel` per fused group, with index maps and a scalar body.

`ops` holds the ops and the `Loop` dialect (re-exported here, so
`from graphfuse.dialects import loop; loop.KernelOp` reads as the dialect's namespace);
`emitter` the builders the lowerings emit ops with.
"""

from graphfuse.dialects.loop.ops import *  # noqa: F403
