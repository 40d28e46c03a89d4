"""graphfuse: an operator-fusion compiler for neural-network graphs, on xDSL and MLIR."""

__version__ = "0.1.0"


def __getattr__(name: str):  # noqa: ANN202 - lazy, so `import graphfuse` stays cheap
    if name == "compile":
        from graphfuse.compiler import compile

        return compile
    if name == "from_onnx":
        from graphfuse.frontend.onnx_import import from_onnx

        return from_onnx
    if name in ("from_stablehlo", "from_jax"):
        from graphfuse.frontend import stablehlo

        return getattr(stablehlo, name)
    if name == "reference":
        # Moved beside its dialect (graphfuse.dialects.graph.interpreter); the old import
        # `from graphfuse import reference` keeps working, with a warning.
        import warnings

        from graphfuse.dialects.graph import interpreter

        warnings.warn(
            "graphfuse.reference moved to graphfuse.dialects.graph.interpreter",
            DeprecationWarning,
            stacklevel=2,
        )
        return interpreter
    raise AttributeError(f"module 'graphfuse' has no attribute {name!r}")
