"""A one-line progress count for long builds, on a terminal only.

`[12/40] building kernels`, redrawn in place with a carriage return, appears once a build
has run for `delay` seconds and is erased when it ends, so a fast build prints nothing.
Nothing is ever written where stderr is not a terminal: tests, CI logs and pipes read the
command's own output only.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

DELAY = 2.0
"""Seconds a build runs before its count appears."""


class Progress:
    """Counts finished items of `total` (from any thread) and shows the count on `stream`
    when it is a terminal and `delay` seconds have passed. Use as a context manager: the
    line is erased on exit."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, delay: float = DELAY):
        self.total = total
        self.label = label
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._shown = False
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._delay = delay
        self._active = total > 0 and _is_terminal(self._stream)
        self._timer = threading.Timer(delay, self._show) if self._active else None

    def __enter__(self) -> Progress:
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._shown:
                self._write("\r\033[K")
            self._active = False

    def advance(self) -> None:
        """One more item finished."""
        with self._lock:
            self.done += 1
            if self._active and time.monotonic() - self._start >= self._delay:
                self._draw()

    def _show(self) -> None:
        with self._lock:
            if self._active:
                self._draw()

    def _draw(self) -> None:
        self._shown = True
        self._write(f"\r[{self.done}/{self.total}] {self.label}")

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: the build goes on
            self._active = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
