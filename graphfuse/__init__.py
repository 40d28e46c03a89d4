"""graphfuse: an operator-fusion compiler for neural-network graphs, on xDSL and MLIR."""

__version__ = "0.1.0"
