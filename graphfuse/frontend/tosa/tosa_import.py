"""TOSA text in the form torch-mlir and TFLite print it, to graph-dialect modules.

xDSL holds only part of the TOSA dialect, and none of its custom syntax for the ops it
lacks, so the bundled mlir-opt (graphfuse.toolchain) reads the text, verifies it as MLIR's
own TOSA and prints it in the generic form, keeping each op's source location. xDSL
parses that with TOSA ops left unregistered, and `conversion.convert_module` rewrites the
functions into graph ops (docs/tosa.md says why the ops stay unregistered).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.utils.exceptions import DiagnosticException, ParseError

from graphfuse.frontend.tosa.conversion import convert_module
from graphfuse.parsing import GraphfuseError, LocatedParser, verify

GENERIC_FLAGS = (
    "--mlir-print-op-generic",
    "--mlir-print-debuginfo",
    "--mlir-print-local-scope",
)
"""mlir-opt's flags for text xDSL reads: generic ops, each with its location inline."""

_STDIN = "<stdin>"


def import_tosa_file(path: str | Path) -> ModuleOp:
    """The graph-dialect module of a TOSA file (pretty or generic form)."""
    if not Path(path).is_file():
        raise GraphfuseError(f"{path}: cannot read: no such file")
    generic = _print_generic([str(path)], None, str(path))
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        raise GraphfuseError(f"{path}: cannot read: {error.strerror}") from None
    return _to_graph(generic + resource_sections(text), str(path))


def from_tosa(text: str, name: str = "<tosa>") -> ModuleOp:
    """The graph-dialect module of TOSA text; diagnostics name it `name`."""
    generic = _print_generic(["-"], text, name)
    generic = generic.replace(f'loc("{_STDIN}"', f'loc("{name}"')
    return _to_graph(generic + resource_sections(text), name)


_SECTION = re.compile(r"^\{-#.*?#-\}", re.M | re.S)


def resource_sections(text: str) -> str:
    """The `{-# dialect_resources ... #-}` sections of MLIR text (torch-mlir writes
    weights there). mlir-opt prints none with `--mlir-print-local-scope`, which keeps
    each location inline for xDSL, so they are carried over from the input, already
    checked by mlir-opt."""
    return "".join(f"\n{section}\n" for section in _SECTION.findall(text))


def _print_generic(arguments: list[str], text: str | None, name: str) -> str:
    """mlir-opt's generic form of the input; its first error as one line naming `name`."""
    from graphfuse.toolchain import require_tool

    try:
        found = require_tool("mlir-opt")
    except DiagnosticException as error:
        raise GraphfuseError(f"{name}: reading TOSA needs mlir-opt: {error}") from None
    try:
        run = subprocess.run(
            [found.path, *GENERIC_FLAGS, *arguments],
            input=text,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
    except OSError as error:
        raise GraphfuseError(f"{name}: mlir-opt does not run: {error}") from None
    if run.returncode != 0:
        raise GraphfuseError(_first_error(run.stderr, name))
    return run.stdout


def _first_error(stderr: str, name: str) -> str:
    """`file:line:col: message (mlir-opt)` from mlir-opt's diagnostics."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if ": error: " in line:
            place, message = line.split(": error: ", 1)
            place = place.replace(_STDIN, name)
            return f"{place}: {message} (mlir-opt rejects it as TOSA)"
    last = lines[-1] if lines else "no message"
    return f"{name}: mlir-opt cannot read it: {last}"


def _to_graph(generic: str, name: str) -> ModuleOp:
    context = Context(allow_unregistered=True)
    context.load_dialect(Builtin)
    context.load_dialect(Func)
    try:
        # graphfuse's parser reads the weights torch-mlir writes in the dialect_resources
        # section (see resource_sections) into the tosa.const ops.
        parser = LocatedParser(context, generic, name)
        module = parser.parse_module()
    except ParseError as error:
        message = " ".join(error.msg.split())
        raise GraphfuseError(f"{name}: cannot read mlir-opt's generic form: {message}") from None
    parser.check_resolved()
    convert_module(module)
    verify(module)
    return module
