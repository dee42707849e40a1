"""Silence across streams: the longest time requests were in flight and none of them got a token.

An engine that stops stepping (a hung collective, a deadlocked worker, a
stopped process) silences every stream at once, whatever its own ``/metrics``
does meanwhile: served by the same stalled process, it may stop answering too,
and then the server table has no row to show the stall with. A gateway that
streams the answers knows each request's first token (``ttft_ms``) and its
longest pause between two tokens (``itl_max_ms``, beginning ``itl_max_at_ms``
after arrival). A moment counts as silent only where every request in flight is
known to be waiting then: before its first token, or inside its longest pause.
A request whose pause is not logged counts as progressing, so the figure can
be short of the truth, never beyond it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.facts.model import Facts

_MIN_REQUESTS = 10


def add_stream_facts(facts: Facts, requests: pd.DataFrame, source: str, sampled: str | None = None) -> None:
    """``sampled``: why not, where the table is a sample (a moment is silent only if every request is)."""
    if "ttft_ms" not in requests.columns or "latency_ms" not in requests.columns:
        return
    if sampled is not None:
        facts.cannot(["requests.stream_silence_s"], sampled)
        return
    start = _numbers(requests, "ts")
    end = start + _numbers(requests, "latency_ms") / 1000.0
    first = start + _numbers(requests, "ttft_ms") / 1000.0
    usable = np.isfinite(start) & np.isfinite(end) & (end > start)
    if int(usable.sum()) < _MIN_REQUESTS:
        return
    pause_from = start + _numbers(requests, "itl_max_at_ms") / 1000.0
    pause_to = pause_from + _numbers(requests, "itl_max_ms") / 1000.0
    failed = _failed(requests)
    pieces = _progressing(
        start[usable], end[usable], first[usable], failed[usable], pause_from[usable], pause_to[usable]
    )
    span, began, caught = _longest_silence(start[usable], end[usable], *pieces)
    logged = "ttft_ms, itl_max_ms and itl_max_at_ms" if "itl_max_at_ms" in requests.columns else "ttft_ms"
    counted = int(usable.sum())
    cite = f"{source}: requests in flight, none receiving a token (from {logged}), {counted:,} requests"
    facts.add("requests.stream_silence_s", span, cite)
    if span > 0:
        facts.add("requests.stream_silence_requests", float(caught), f"{cite}; in flight during it")
        facts.add("requests.stream_silence_start", began, f"{cite}; when it began (Unix seconds)")


def _numbers(requests: pd.DataFrame, column: str) -> np.ndarray:
    if column not in requests.columns:
        return np.full(len(requests), np.nan)
    return pd.to_numeric(requests[column], errors="coerce").to_numpy(dtype="float64")


def _failed(requests: pd.DataFrame) -> np.ndarray:
    if "status" not in requests.columns:
        return np.zeros(len(requests), dtype=bool)
    status = requests["status"].astype("string").str.lower()
    return (status.notna() & ~status.isin(["ok", "200", "success"])).to_numpy(dtype=bool)


def _progressing(
    start: np.ndarray,
    end: np.ndarray,
    first: np.ndarray,
    failed: np.ndarray,
    pause_from: np.ndarray,
    pause_to: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each request's spans of progress: from its first token to its end, less its longest pause.

    A request that failed (an error, a timeout) without a token made no progress at all; one that
    succeeded with no first token logged (an answer not streamed) counts as progressing throughout,
    as does the time of one whose pause is not logged."""
    no_token = ~np.isfinite(first) & failed
    got = np.where(no_token, end, np.where(np.isfinite(first), np.clip(first, start, end), start))
    has_pause = np.isfinite(pause_from) & np.isfinite(pause_to) & (pause_to > pause_from) & ~no_token
    cut_from = np.where(has_pause, np.clip(pause_from, got, end), end)
    cut_to = np.where(has_pause, np.clip(pause_to, got, end), end)
    # Two pieces a request: [got, cut_from) and [cut_to, end); either may be empty.
    return np.concatenate([got, cut_to]), np.concatenate([cut_from, end])


def _longest_silence(
    start: np.ndarray, end: np.ndarray, moving_from: np.ndarray, moving_to: np.ndarray
) -> tuple[float, float, int]:
    """The longest span with requests in flight and none progressing: its length, start, and how many
    requests were in flight during it."""
    keep = moving_to > moving_from
    pieces = int(keep.sum())
    # Ends before starts where two fall on one instant (a stable sort keeps this order): a request
    # ending as another starts leaves no moment with neither.
    times = np.concatenate([end, moving_to[keep], start, moving_from[keep]])
    one, none = np.int32(1), np.int32(0)
    flight = np.concatenate(
        [np.full(end.size, -one), np.full(pieces, none), np.full(start.size, one), np.full(pieces, none)]
    )
    moving = np.concatenate(
        [np.full(end.size, none), np.full(pieces, -one), np.full(start.size, none), np.full(pieces, one)]
    )
    order = np.argsort(times, kind="stable")
    times, in_flight, progressing = times[order], np.cumsum(flight[order]), np.cumsum(moving[order])
    silent = (in_flight[:-1] > 0) & (progressing[:-1] <= 0)
    lengths = np.diff(times)
    joined = silent | (lengths == 0)  # an instant where one request ends as another starts breaks no run
    if not silent.any():
        return 0.0, 0.0, 0
    group = np.cumsum(~joined)
    totals = np.bincount(group[joined], weights=lengths[joined])
    best = int(np.argmax(totals))
    members = np.flatnonzero(joined & (group == best))
    return float(totals[best]), float(times[members[0]]), int(in_flight[members].max())
