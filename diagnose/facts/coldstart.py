"""Warm versus cold requests after each (re)start.

After a start, a service loads weights, allocates memory and compiles kernels;
the first requests pay for it. A start's cold period ends when the median of
the next five requests first settles within 1.5x of that run's steady median
(the median of its second half). Capped at half the run, so a service that
never settles is not called "cold" throughout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

_SETTLED_RATIO = 1.5
_SETTLE_WINDOW = 5  # requests
_UNSEEN_START_S = 300.0
_RESTART_KINDS = ("restart", "deploy")


def restart_times(dump: Dump) -> tuple[list[float], str]:
    starts = list(dump.manifest.process_starts)
    sources = ["manifest.yaml process_start"] if starts else []
    events = dump.table("events")
    if events is not None:
        kinds = events["kind"].astype("string").str.lower()
        found = events.loc[kinds.isin(_RESTART_KINDS), "ts"].tolist()
        if found:
            starts += found
            sources.append(f"{dump.source('events')}: restart/deploy events")
    return sorted(set(starts)), " and ".join(sources)


def cold_requests(dump: Dump, requests: pd.DataFrame) -> tuple[np.ndarray, list[float]] | None:
    """Which requests were served cold, and each start's cold window in seconds.

    None when the evidence holds no start near the requests: nothing can be called cold.
    """
    starts, _ = restart_times(dump)
    ts = requests["ts"].to_numpy()
    # A server started long before the first recorded request had time to serve its cold requests
    # unrecorded; its first recorded ones are slow for some other reason (the incident itself).
    starts = [start for start in starts if start >= ts[0] - _UNSEEN_START_S] if ts.size else []
    if not starts:
        return None
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    cold = np.zeros(ts.size, dtype=bool)
    windows: list[float] = []
    boundaries = [*starts, np.inf]
    for begin, end in zip(boundaries[:-1], boundaries[1:], strict=True):
        lo, hi = np.searchsorted(ts, [begin, end])
        settled = _settled_index(latency[lo:hi])
        if settled is None:
            continue
        cold[lo : lo + settled] = True
        windows.append(float(ts[lo + settled - 1] - begin) if settled else 0.0)
    return cold, windows


def add_coldstart_facts(facts: Facts, dump: Dump, requests: pd.DataFrame, source: str) -> None:
    found = cold_requests(dump, requests)
    if found is None:
        return
    cold, windows = found
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    cite = f"{source}: latency_ms after starts from {restart_times(dump)[1]}"
    facts.add("coldstart.restarts", len(windows), cite)
    valid = np.isfinite(latency)
    if not windows or cold.sum() == 0:
        if windows:
            facts.add("coldstart.cold_requests", 0, cite)
            facts.add("coldstart.p99_inflation", 1.0, cite)
            facts.add("coldstart.tail_share", 0.0, cite)
        return
    warm = ~cold & valid
    p99_all = np.percentile(latency[valid], 99)
    p99_warm = np.percentile(latency[warm], 99)
    tail = valid & (latency >= p99_all)
    facts.add("coldstart.cold_requests", int(cold.sum()), cite)
    facts.add("coldstart.cold_window_s", float(np.mean(windows)), cite)
    cold_p50 = float(np.median(latency[cold & valid]))
    warm_p50 = float(np.median(latency[warm]))
    facts.add("coldstart.cold_p50_ms", cold_p50, cite)
    facts.add("coldstart.warm_p50_ms", warm_p50, cite)
    facts.add("coldstart.slowdown", cold_p50 / warm_p50 if warm_p50 > 0 else None, cite)
    facts.add("coldstart.p99_warm_ms", float(p99_warm), cite)
    facts.add("coldstart.p99_inflation", float(p99_all / p99_warm) if p99_warm > 0 else None, cite)
    facts.add("coldstart.tail_share", float(cold[tail].mean()), cite)
    # Are the cold requests the worst ones? Of the k slowest requests (k: how many were cold),
    # the share that were cold: near 1 when the start made the worst latencies of the recording.
    k = int(cold.sum())
    slowest = np.argsort(np.where(valid, latency, -np.inf))[::-1][:k]
    facts.add("coldstart.worst_share", float(cold[slowest].mean()), cite)


def _settled_index(latency: np.ndarray) -> int | None:
    """How many leading requests of one run were served before latency settled.

    Settled: the median of the next few requests is within 1.5x of the steady
    median, and the requests still slow at that point are the last cold ones. The
    window is a handful of requests, not a share of the run: a lazy start that
    holds up the first eight requests of a long run is as cold as one that holds
    up eighty.
    """
    values = latency[np.isfinite(latency)]
    n = values.size
    if n < 20:
        return None
    limit = _SETTLED_RATIO * np.median(values[n // 2 :])
    k = _SETTLE_WINDOW
    rolling = pd.Series(values).rolling(k).median().to_numpy()[k - 1 :]  # window starting at i
    settled = np.flatnonzero(rolling <= limit)
    first = int(settled[0]) if settled.size else n // 2
    while first < n // 2 and first > 0 and values[first] > limit:
        first += 1
    return min(first, n // 2)
