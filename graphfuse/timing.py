"""A time tree of graphfuse's stages, for `--timing` (as mlir-opt's `-mlir-timing`).

Code marks a stage with `with timed("name"):`; stages nest as the calls do. Nothing is
recorded unless a caller opened a tree with `collect`, so the marks cost one context-variable
read when timing is off. The tree prints as wall time, share of the whole, and the name.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Stage:
    """One timed stage: its wall time and the stages it ran, in order (repeats merged)."""

    name: str
    seconds: float = 0.0
    children: list[Stage] = field(default_factory=list["Stage"])

    def child(self, name: str) -> Stage:
        """The sub-stage called `name`, made on first use (a pass run twice adds up)."""
        found = next((c for c in self.children if c.name == name), None)
        if found is None:
            found = Stage(name)
            self.children.append(found)
        return found


_CURRENT: ContextVar[Stage | None] = ContextVar("graphfuse_timing", default=None)


@contextmanager
def timed(name: str) -> Generator[None]:
    """Times the block as stage `name` under the enclosing stage, if a tree is collected."""
    parent = _CURRENT.get()
    if parent is None:
        yield
        return
    stage = parent.child(name)
    token = _CURRENT.set(stage)
    start = time.perf_counter()
    try:
        yield
    finally:
        stage.seconds += time.perf_counter() - start
        _CURRENT.reset(token)


@contextmanager
def collect(name: str) -> Generator[Stage]:
    """Opens a tree rooted at `name`; the stages timed inside the block become its children."""
    root = Stage(name)
    token = _CURRENT.set(root)
    start = time.perf_counter()
    try:
        yield root
    finally:
        root.seconds = time.perf_counter() - start
        _CURRENT.reset(token)


def render(root: Stage) -> str:
    """The tree as text: `  wall s   share  name`, children indented under their stage."""
    lines = ["   wall (s)  share  stage"]
    stack = [(root, 0)]
    while stack:
        stage, depth = stack.pop()
        share = 100.0 * stage.seconds / root.seconds if root.seconds > 0 else 100.0
        lines.append(f"{stage.seconds:11.3f}  {share:4.0f}%  {'  ' * depth}{stage.name}")
        stack.extend((child, depth + 1) for child in reversed(stage.children))
    return "\n".join(lines)
