"""A status line on the terminal: one line rewritten in place while long work runs.

Only where stderr is a terminal (a file or a pipe gets none of it) and not under ``--quiet``;
rewritten at most once a second; cleared before any other line is said, so that warnings and the
final summary read as usual.
"""

from __future__ import annotations

import sys
import threading
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


class Ticker:
    """Long work's current step on the status line, with the time it has taken so far, redrawn by a
    thread of its own: one step can be one long call (reading a 2 GB table), which says nothing
    while it runs. Nothing is drawn in the first ``after_s`` (a quick run shows nothing), nor where
    the status line is off. Use as a context manager; the line is cleared on leaving."""

    def __init__(self, status: StatusLine, label: str, after_s: float = 2.0, clock=time.monotonic) -> None:
        self._status, self._label, self._after_s, self._clock = status, label, after_s, clock
        self._step = ""
        self._started = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, text: str) -> None:
        self._step = text

    def __enter__(self) -> Ticker:
        self._started = self._clock()
        if self._status.enabled:
            self._thread = threading.Thread(target=self._run, name="diagnose-status", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._status.clear()

    def line(self) -> str:
        what = f"{self._label}: {self._step}" if self._step else self._label
        return f"{what} · {self._clock() - self._started:.0f} s"

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            if self._clock() - self._started >= self._after_s:
                self._status.show(self.line())
