"""Checks of pass options, in one message shape for all of graphfuse's passes.

A value out of range is refused with a `PassFailedException` naming the pass, the option as
a pipeline spells it (`max-depth`) and what it allows, at the start of `apply`, before any
IR changes: `graphfuse` prints it as one line, and so does `xdsl-opt --verify-diagnostics`.
Plain `xdsl-opt` catches no exception (it re-raises every one, its own option-parsing
ValueErrors included), so there the message is the last line of a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.utils.exceptions import PassFailedException


def option_error(pass_name: str, field: str, allowed: str, value: object) -> PassFailedException:
    """`graph-fuse: option max-depth must be >= 1, got 0`."""
    option = field.replace("_", "-")
    return PassFailedException(f"{pass_name}: option {option} must be {allowed}, got {value}")


def check_at_least(pass_name: str, field: str, value: int, least: int) -> None:
    """`value` (of the option named by its field, `max_depth`) is at least `least`."""
    if value < least:
        raise option_error(pass_name, field, f">= {least}", value)


def check_one_of(pass_name: str, field: str, value: int, choices: Sequence[int]) -> None:
    """`value` is one of `choices` (`lanes`: 8 or 16)."""
    if value not in choices:
        *most, last = (str(c) for c in choices)
        allowed = f"{', '.join(most)} or {last}" if most else last
        raise option_error(pass_name, field, allowed, value)
