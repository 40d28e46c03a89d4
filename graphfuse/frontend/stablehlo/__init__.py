"""StableHLO input: JAX programs (and other StableHLO producers) as graph-dialect modules.

`from_stablehlo(text)` reads what `jax.jit(f).lower(*args).as_text()` prints,
`from_jax(f, *example_args)` lowers and reads in one step, `import_stablehlo_file(path)`
reads a `.stablehlo.mlir` file. The text is parsed by jaxlib's own MLIR bindings (the
`jax` extra); docs/stablehlo.md lists the ops read and the limits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from graphfuse.parsing import GraphfuseError

__all__ = ["from_jax", "from_stablehlo", "import_stablehlo_file"]


def _require_jaxlib() -> None:
    import importlib.util

    if importlib.util.find_spec("jaxlib") is None:
        raise GraphfuseError(
            "reading StableHLO needs jaxlib; install graphfuse's jax extra "
            "(pip install 'graphfuse[jax]')"
        )


def from_stablehlo(text: str, name: str = "main") -> ModuleOp:
    """The StableHLO module in `text` (its public @main) as a verified graph-dialect
    module whose function is `name`. Bad input raises a GraphfuseError naming the op."""
    _require_jaxlib()
    from graphfuse.frontend.stablehlo.importer import import_text

    return import_text(text, name)


def from_jax(f: Callable[..., Any], *example_args: Any, name: str = "main") -> ModuleOp:
    """`jax.jit(f)` lowered for `example_args` (arrays or jax.ShapeDtypeStruct) and read as
    a graph-dialect module; the lowering keeps source locations, so a message names the
    line of `f` that made the op graphfuse cannot import."""
    _require_jaxlib()
    import jax

    api: Any = jax  # jax's annotations leave parts of jit's type unknown
    text: str = api.jit(f).lower(*example_args).as_text(debug_info=True)
    return from_stablehlo(text, name)


def import_stablehlo_file(path: str | Path) -> ModuleOp:
    """The StableHLO module in the text file at `path` (`graphfuse import f.stablehlo.mlir`)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise GraphfuseError(f"{path}: cannot read StableHLO text: {reason}") from None
    try:
        return from_stablehlo(text)
    except GraphfuseError as error:
        raise type(error)(f"{path}: {error}") from None
