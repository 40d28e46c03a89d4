"""TOSA input: `graphfuse import model.tosa.mlir`, `from_tosa(text)` and the
`convert-tosa-to-graph` pass (docs/tosa.md)."""

from graphfuse.frontend.tosa.tosa_import import from_tosa, import_tosa_file

__all__ = ["from_tosa", "import_tosa_file"]
