"""The status line long work draws on a terminal: rewritten in place, at most once a second, out of
the way of the lines said beside it, and absent off a terminal."""

from __future__ import annotations

import io

from diagnose.commands.status_line import StatusLine


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_it_is_rewritten_in_place_at_most_once_a_second():
    stream, clock = io.StringIO(), _Clock()
    line = StatusLine(enabled=True, stream=stream, clock=clock)
    line.show("recording 0:00, 1 samples")
    clock.now = 0.5
    line.show("recording 0:00, 2 samples")  # too soon: not drawn
    clock.now = 1.0
    line.show("recording 0:01, 3 samples")
    assert stream.getvalue() == "\r\x1b[Krecording 0:00, 1 samples\r\x1b[Krecording 0:01, 3 samples"


def test_a_line_said_beside_it_clears_it_first_and_it_comes_back():
    stream, clock = io.StringIO(), _Clock()
    line = StatusLine(enabled=True, stream=stream, clock=clock)
    line.show("recording 0:00")
    clock.now = 0.2
    line.say("diagnose: warning: the request log stopped")
    line.show("recording 0:00, again")  # cleared: drawn again at once
    assert stream.getvalue() == (
        "\r\x1b[Krecording 0:00\r\x1b[Kdiagnose: warning: the request log stopped\n\r\x1b[Krecording 0:00, again"
    )
    line.clear()
    assert stream.getvalue().endswith("again\r\x1b[K")


def test_off_a_terminal_or_quiet_it_draws_nothing_and_lines_are_said_as_usual():
    stream = io.StringIO()
    line = StatusLine(enabled=False, stream=stream)
    line.show("recording 0:00")
    line.say("diagnose: recorded 3 samples")
    line.clear()
    assert stream.getvalue() == "diagnose: recorded 3 samples\n"
