"""graphfuse's error type, in a module that imports nothing of graphfuse and only xDSL's
exception classes: the commands that never parse a module (a compile found whole in the
cache) raise and catch it without loading the parser."""

from __future__ import annotations

from xdsl.utils.exceptions import DiagnosticException


class GraphfuseError(DiagnosticException):
    """A problem with the user's input or tools, as one line: where, what, and the fix."""
