"""The graph dialect: tensor ops with TVM-style fusion kinds.

`ops` holds the attributes, ops and the `Graph` dialect (re-exported here, so
`from graphfuse.dialects import graph; graph.AddOp` reads as the dialect's namespace);
`shape_rules` the shape arithmetic the ops, the interpreter and the lowering share;
`interpreter` the NumPy reference semantics every pass is checked against.
"""

from graphfuse.dialects.graph.ops import *  # noqa: F403
