"""Reading graph-dialect files with source locations, and one-line diagnostics.

xDSL's parser leaves `op.location` unknown unless the text spells out `loc(...)`; graphfuse
records each op's line and column as it parses, so a verifier failure found later names the
op and where it is. `GraphfuseError` carries the one-line message the CLI prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.universe import Universe
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Span


class GraphfuseError(DiagnosticException):
    """A problem with the user's input or tools, as one line: where, what, and the fix."""


def make_context() -> Context:
    """A context that knows every dialect xdsl-opt knows (ours included), loaded lazily."""
    ctx = Context(allow_unregistered=False)
    for name, getter in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, getter)
    return ctx


class LocatedParser(Parser):
    """An xDSL parser that stamps every op with the file, line and column it starts at."""

    def parse_operation(self) -> Operation:
        span = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as error:
            # Type constraints of a custom format are checked while parsing; name the op.
            raise ParseError(span, f"{_op_name_at(span)}{error}") from None
        if not isinstance(op.location, FileLineColLoc):
            where = span.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file), IntAttr(where.line), IntAttr(where.col)
            )
        return op


def _op_name_at(span: Span[str]) -> str:
    line_end = span.input.get_end_of_line(span.start)
    match = _OP_NAME.search(span.input.content[span.start : line_end])
    return f"'{match.group(1)}' op " if match else ""


_OP_NAME = re.compile(r"\b([a-z_][a-z0-9_]*\.[a-z0-9_.]+)\b")


def location_of(op: Operation) -> str:
    """`file:line:col` of an op parsed by `LocatedParser`, else `<unknown>`."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return "<unknown>"


def op_error(op: Operation, message: str) -> GraphfuseError:
    """A diagnostic naming the op and its location: `f.mlir:3:5: 'graph.add' op <msg>`."""
    first_line = message.strip().splitlines()[0] if message.strip() else "is invalid"
    return GraphfuseError(f"{location_of(op)}: '{op.name}' op {first_line}")


def parse_text(text: str, name: str = "<input>", ctx: Context | None = None) -> ModuleOp:
    """Parse and verify a module; any problem becomes a one-line `GraphfuseError`."""
    parser = LocatedParser(ctx or make_context(), text, name)
    try:
        module = parser.parse_module()
    except ParseError as error:
        raise GraphfuseError(f"{error.span.get_location()}: {error.msg}") from None
    verify(module)
    return module


def parse_file(path: str | Path, ctx: Context | None = None) -> ModuleOp:
    """Read, parse and verify a `.mlir` file."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise GraphfuseError(f"{path}: cannot read: {error}") from None
    return parse_text(text, str(path), ctx)


def verify(module: ModuleOp) -> None:
    """Verify a module; on failure name the innermost failing op and its location."""
    try:
        module.verify()
        return
    except VerifyException as error:
        whole_module_error = error
    # Children before parents, so the op reported is the one whose own rule failed.
    for op in module.walk(region_first=True):
        try:
            op.verify()
        except VerifyException as error:
            raise op_error(op, str(error)) from None
    raise op_error(module, str(whole_module_error)) from None
