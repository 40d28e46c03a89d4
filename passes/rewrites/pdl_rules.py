"""Loading PDL rule files and turning them into rewrite patterns for xDSL's PDL interpreter.

A rule file is an MLIR module of `pdl.pattern` ops. It is parsed with source locations
and checked before use: a file that does not parse, or a pattern that names an op no
loaded dialect defines, is reported as `file:line:col: ...` instead of failing half-way
through a rewrite. Native constraints that rules may call are listed in
`NATIVE_CONSTRAINTS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from xdsl.context import Context
from xdsl.dialects import pdl
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.utils.exceptions import PassFailedException

from graphfuse.dialects import graph
from graphfuse.dialects.graph import elements
from graphfuse.parsing import GraphfuseError, location_of, make_context, parse_text


def _constant(value: object) -> NDArray[Any] | None:
    """The contents of a non-empty graph.constant, else None."""
    owner = getattr(value, "owner", None)
    if not isinstance(owner, graph.ConstantOp):
        return None
    array = elements.dense_to_numpy(owner.value)
    return array if array.size > 0 else None


def _all_zero(value: object, negative: bool | None) -> bool:
    """Every element is 0; for floats, with the sign bit set (negative), clear (not
    negative) or either (None). Integers have one zero, which satisfies all three."""
    array = _constant(value)
    if array is None or not np.all(array == 0):
        return False
    if negative is None or not np.issubdtype(array.dtype, np.floating):
        return True
    return bool(np.all(np.signbit(array) == negative))


def is_zero(value: object) -> bool:
    """The value is a graph.constant whose every element is 0 or -0.0.

    Not enough for `x + 0 -> x`: -0.0 + 0.0 is +0.0. Use `is_neg_zero` there.
    """
    return _all_zero(value, None)


def is_pos_zero(value: object) -> bool:
    """Every element is +0.0 (or integer 0): `x - 0.0` is exactly x, even for x = -0.0."""
    return _all_zero(value, False)


def is_neg_zero(value: object) -> bool:
    """Every element is -0.0 (or integer 0): `x + -0.0` is exactly x, even for x = -0.0."""
    return _all_zero(value, True)


def is_one(value: object) -> bool:
    """The value is a graph.constant whose every element is 1."""
    array = _constant(value)
    return array is not None and bool(np.all(array == 1))


NATIVE_CONSTRAINTS: dict[str, Callable[..., bool]] = {
    "is_zero": is_zero,
    "is_pos_zero": is_pos_zero,
    "is_neg_zero": is_neg_zero,
    "is_one": is_one,
}
"""Python predicates PDL rules may call with `pdl.apply_native_constraint "name"(...)`."""


def _check_rule_op(op: Operation, ctx: Context) -> None:
    """Reject a PDL op naming an op no dialect defines, or an unknown native constraint."""
    if isinstance(op, pdl.OperationOp) and op.opName is not None:
        name = op.opName.data
        if ctx.get_optional_op(name) is None:
            raise GraphfuseError(f"{location_of(op)}: PDL rule names unknown op '{name}'")
    if not isinstance(op, pdl.ApplyNativeConstraintOp):
        return
    if op.constraint_name.data not in NATIVE_CONSTRAINTS:
        known = ", ".join(sorted(NATIVE_CONSTRAINTS))
        raise GraphfuseError(
            f"{location_of(op)}: PDL rule calls unknown native constraint "
            f"'{op.constraint_name.data}' (known: {known})"
        )


def load_rules(text: str, name: str) -> list[RewritePattern]:
    """The rewrite patterns of a PDL module's text; diagnostics name the file and line.

    Rules are parsed, and their new ops created, in graphfuse's own context (every
    registered dialect), whatever context the calling pass was given.
    """
    # xDSL's interpreters package is slow to import; only rule loading needs it.
    from xdsl.interpreters.pdl import PDLRewritePattern

    ctx = make_context()
    try:
        module = parse_text(text, name, ctx)
        for op in module.walk():
            _check_rule_op(op, ctx)
    except GraphfuseError as error:
        raise PassFailedException(str(error)) from None
    return [
        _ByRootName(
            _root_name(op), PDLRewritePattern(op, ctx, None, native_constraints=NATIVE_CONSTRAINTS)
        )
        for op in module.walk()
        if isinstance(op, pdl.RewriteOp)
    ]


@dataclass(frozen=True)
class _ByRootName(RewritePattern):
    """A PDL rule offered only the ops named as its root is (every op when the root names
    none). xDSL's PDL pattern sets up a matcher for each op before it compares the name,
    and a walk offers every rule every op; the match itself is unchanged."""

    root: str | None
    rule: RewritePattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if self.root is None or op.name == self.root:
            self.rule.match_and_rewrite(op, rewriter)


def _root_name(rewrite: pdl.RewriteOp) -> str | None:
    """The op name the rule's root `pdl.operation` requires, if any."""
    root = rewrite.root
    owner = root.owner if root is not None else None
    if isinstance(owner, pdl.OperationOp) and owner.opName is not None:
        return owner.opName.data
    return None


def load_rule_file(path: str) -> list[RewritePattern]:
    """The rewrite patterns of a user's PDL file."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise PassFailedException(
            f"{path}: cannot read PDL rules (option rules): {reason}; "
            "give the path of an MLIR file of pdl.pattern ops"
        ) from None
    return load_rules(text, path)


@cache
def builtin_rules(name: str) -> tuple[RewritePattern, ...]:
    """The patterns of a rule file shipped in graphfuse/passes/rewrites/rules/, parsed once."""
    text = resources.files("graphfuse.passes.rewrites").joinpath("rules", name).read_text()
    return tuple(load_rules(text, f"graphfuse/passes/rewrites/rules/{name}"))
