"""A status line on the terminal: one line rewritten in place while long work runs.

Only where stderr is a terminal (a file or a pipe gets none of it) and not under ``--quiet``;
rewritten at most once a second; cleared before any other line is said, so that warnings and the
final summary read as usual.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from diagnose.commands.output import terminal_columns

_CLEAR = "\r\x1b[K"  # back to the line's start, and erase to its end


class StatusLine:
    def __init__(
        self,
        enabled: bool,
        stream: TextIO | None = None,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self.enabled, self._every_s, self._clock = enabled, every_s, clock
        self._shown_at: float | None = None

    @classmethod
    def for_terminal(cls, quiet: bool) -> StatusLine:
        return cls(enabled=not quiet and sys.stderr.isatty())

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if self._shown_at is not None and now - self._shown_at < self._every_s:
            return
        width = terminal_columns(self._stream) or 100
        self._stream.write(_CLEAR + text[: max(width - 1, 10)])
        self._stream.flush()
        self._shown_at = now

    def say(self, line: str) -> None:
        """A line of its own (a warning, a notice): the status line is cleared first, and drawn again
        at the next ``show``."""
        self.clear()
        print(line, file=self._stream)

    def clear(self) -> None:
        if self._shown_at is not None:
            self._stream.write(_CLEAR)
            self._stream.flush()
            self._shown_at = None
