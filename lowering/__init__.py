"""Lowerings from the graph dialect down to upstream MLIR; installed as graphfuse.lowering."""
