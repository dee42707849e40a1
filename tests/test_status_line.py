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


def test_a_long_step_is_redrawn_with_its_time_while_it_runs_and_cleared_after():
    """One step can be one long call (reading a big table): the ticker's own thread redraws it."""
    import time

    from diagnose.commands.status_line import Ticker

    stream, clock = io.StringIO(), _Clock()
    status = StatusLine(enabled=True, stream=stream, every_s=0.0, clock=clock)
    with Ticker(status, "diagnose", after_s=2.0, clock=clock) as ticker:
        ticker.step("reading requests.csv (1.2 GiB)")
        time.sleep(0.6)
        assert stream.getvalue() == ""  # not in the first two seconds: a quick run shows nothing
        clock.now = 12.0
        deadline = time.monotonic() + 10
        while "12 s" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert "\r\x1b[Kdiagnose: reading requests.csv (1.2 GiB) · 12 s" in stream.getvalue()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_off_a_terminal_the_ticker_starts_no_thread_and_writes_nothing():
    import threading

    from diagnose.commands.status_line import Ticker

    stream = io.StringIO()
    with Ticker(StatusLine(enabled=False, stream=stream), "diagnose", after_s=0.0) as ticker:
        ticker.step("reading")
        assert not [t for t in threading.enumerate() if t.name == "diagnose-status"]
    assert stream.getvalue() == ""


def test_reading_and_analysing_a_dump_tells_each_step(tmp_path):
    from diagnose.judge import default_rules_dir
    from diagnose.pipeline import analyse_path
    from tests.conftest import DUMPS

    steps: list[str] = []
    analyse_path(str(DUMPS / "healthy-steady"), default_rules_dir(), helper=False, progress=steps.append)
    assert steps[0].startswith("reading ") and any(s.startswith("reading requests.csv (") for s in steps)
    assert [s.split(" ")[0] for s in steps[-3:]] == ["computing", "searching", "judging"]
