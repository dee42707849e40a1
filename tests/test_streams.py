"""Silence across streams (diagnose/facts/streams.py): every request in flight waiting at once."""

from __future__ import annotations

import pandas as pd
import pytest

from diagnose.facts.model import Facts
from diagnose.facts.streams import add_stream_facts

T0 = 1_796_549_000.0


def _request(
    at: float, latency_s: float, ttft_s: float, pause_at_s: float | None = None, pause_s: float = 0.0
):
    row = {"ts": T0 + at, "latency_ms": latency_s * 1000, "ttft_ms": ttft_s * 1000}
    if pause_at_s is not None:
        row |= {"itl_max_at_ms": pause_at_s * 1000, "itl_max_ms": pause_s * 1000}
    return row


def _facts(rows: list[dict]) -> Facts:
    facts = Facts()
    add_stream_facts(facts, pd.DataFrame(rows), "requests.jsonl")
    return facts


def _steady(count: int = 20) -> list[dict]:
    """Requests every two seconds, each streaming for 3 s after 50 ms, its longest pause 10 ms."""
    return [_request(2.0 * i, 3.0, 0.05, 1.0, 0.01) for i in range(count)]


def test_a_stopped_engine_silences_every_stream_at_once():
    # From 100 s to 140 s nothing moves: the requests streaming then pause for the whole of it, the
    # ones arriving meanwhile wait for their first token until it ends.
    stalled = [_request(98.0 + i * 0.5, 45.0, 0.05, 2.0 - i * 0.5, 40.0) for i in range(4)]
    arriving = [_request(110.0 + i, 31.0 - i, 30.0 - i) for i in range(6)]
    facts = _facts(_steady() + stalled + arriving)
    assert facts.get("requests.stream_silence_s") == pytest.approx(40.0, abs=0.01)
    assert facts.get("requests.stream_silence_start") == pytest.approx(T0 + 100.0)
    assert facts.get("requests.stream_silence_requests") == 10
    assert "itl_max_at_ms" in facts.values["requests.stream_silence_s"].source


def test_pauses_at_different_times_are_no_silence_while_another_stream_moves():
    staggered = [_request(100.0 + 3 * i, 10.0, 0.05, 1.0, 8.0) for i in range(6)]  # each pause overlaps
    facts = _facts(_steady() + staggered)  # another's streaming
    assert facts.get("requests.stream_silence_s") < 3.0


def test_a_request_whose_pause_is_not_logged_counts_as_moving():
    # One long stream with no pause logged covers the stall: the figure may fall short, never overshoot.
    stalled = [_request(98.0, 45.0, 0.05, 2.0, 40.0) for _ in range(4)]
    unknown = [{"ts": T0 + 90.0, "latency_ms": 60_000.0, "ttft_ms": 20.0}]
    facts = _facts(_steady() + stalled + unknown)
    assert facts.get("requests.stream_silence_s") == pytest.approx(0.0, abs=0.1)


def test_requests_queued_for_their_first_token_beside_a_streaming_one_are_no_silence():
    streaming = [_request(100.0, 30.0, 0.05, 5.0, 0.02)]
    queued = [_request(101.0 + i, 25.0, 20.0) for i in range(8)]
    facts = _facts(_steady() + streaming + queued)
    assert facts.get("requests.stream_silence_s") < 1.0


def test_an_answer_not_streamed_counts_as_moving_and_a_failure_without_a_token_as_waiting():
    # A 40 s answer that was not streamed (no first-token time) alone in flight: no stall shown.
    whole = [{"ts": T0 + 100.0, "latency_ms": 40_000.0, "ttft_ms": None, "status": "ok"}]
    assert _facts(_steady() + whole).get("requests.stream_silence_s") < 1.0
    # Requests that timed out without a token, with nothing else moving: waiting the whole time.
    timed_out = [
        {"ts": T0 + 100.0 + i, "latency_ms": 35_000.0, "ttft_ms": None, "status": "timeout"} for i in range(3)
    ]
    assert _facts(_steady() + timed_out).get("requests.stream_silence_s") == pytest.approx(37.0, abs=0.01)


def test_no_fact_without_first_token_times_or_with_too_few_requests():
    assert (
        _facts([{"ts": T0 + i, "latency_ms": 100.0} for i in range(50)]).get("requests.stream_silence_s")
        is None
    )
    assert _facts(_steady(5)).get("requests.stream_silence_s") is None
