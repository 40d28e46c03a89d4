"""The refinement steps of graph-fuse, one module each, over a shared `Refinement` (state)."""
