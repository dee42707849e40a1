"""Warm versus cold requests after each (re)start.

After a start, a service loads weights, allocates memory and compiles kernels;
the first requests pay for it. A start's cold period ends when the median of
the next five requests first settles within 1.5x of that run's steady median
(the median of its second half). Capped at half the run, so a service that
never settles is not called "cold" throughout.

A start's stamp is not the moment the new process served its first request.
psutil dates a process's birth from the kernel's boot time, which it reads in
whole seconds; the old process may still be answering what it accepted; and
the new one imports and loads before it listens. So the requests just after
a stamp can be the old process's last, served warm, and the cold run may
begin at a slow stretch up to half a minute after it. Such a later stretch
must stand clear of the service's own variation (3x its steady median, the
rule's "much slower"): a busy service's median of five wanders past 1.5x now
and then, and that is not a start's doing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts
from diagnose.facts.restarts import restart_times

_SETTLED_RATIO = 1.5
_SETTLE_WINDOW = 5  # requests
_UNSEEN_START_S = 300.0
_ONSET_SLACK_S = 30.0  # how long after a start's stamp its first slow stretch may begin
_LATE_ONSET_RATIO = 3.0  # how much slower than steady a stretch not at the stamp must be


def cold_requests(
    dump: Dump, requests: pd.DataFrame, starts: list[float] | None = None
) -> tuple[np.ndarray, list[float]] | None:
    """Which requests were served cold, and each start's cold window in seconds.

    None when the evidence holds no start near the requests: nothing can be called cold.
    ``starts``: :func:`restart_times`' starts, where the caller has them already.
    """
    if starts is None:
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
        found = _cold_run(latency[lo:hi], ts[lo:hi] - begin)
        if found is None:
            continue
        onset, settled = lo + found[0], lo + found[1]
        cold[onset:settled] = True
        windows.append(float(ts[settled - 1] - begin) if settled > onset else 0.0)
    return cold, windows


def add_coldstart_facts(facts: Facts, dump: Dump, requests: pd.DataFrame, source: str) -> None:
    starts, stated_by = restart_times(dump)
    found = cold_requests(dump, requests, starts)
    if found is None:
        return
    cold, windows = found
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    cite = f"{source}: latency_ms after starts from {stated_by}"
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
    # Are the cold requests the worst ones? Of the k slowest requests (k: how many cold ones were
    # slower than warm traffic's P99), the share that were cold: near 1 when the start made the
    # worst latencies of the recording. Cold requests within warm traffic's range (those the settling
    # window sweeps in) are left out of k: they cannot be among the worst, and would dilute the share.
    k = int((cold & valid & (latency > p99_warm)).sum())
    facts.add("coldstart.cold_in_tail", k, cite)
    slowest = np.argsort(np.where(valid, latency, -np.inf))[::-1][:k]
    facts.add("coldstart.worst_share", float(cold[slowest].mean()) if k else 0.0, cite)


def _cold_run(latency: np.ndarray, since_start: np.ndarray) -> tuple[int, int] | None:
    """The cold requests of one run as ``(first, past_last)`` indices, or None if the run is too short.

    Cold: from the run's first request if the median of the first few is above 1.5x the steady
    median, else from the first within the onset slack whose next few are 3x slower; until that
    median settles within 1.5x and the requests still slow at that point are the last cold ones.
    The window is a handful of requests, not a share of the run: a lazy start that holds up the
    first eight requests of a long run is as cold as one that holds up eighty.
    """
    positions = np.flatnonzero(np.isfinite(latency))
    values, since_start = latency[positions], since_start[positions]
    n = values.size
    if n < 20:
        return None
    limit = _SETTLED_RATIO * np.median(values[n // 2 :])
    k = _SETTLE_WINDOW
    rolling = pd.Series(values).rolling(k).median().to_numpy()[k - 1 :]  # window starting at i
    late = rolling > limit * _LATE_ONSET_RATIO / _SETTLED_RATIO
    slow = np.flatnonzero(late & (since_start[: rolling.size] <= _ONSET_SLACK_S))
    onset = 0 if rolling[0] > limit else int(slow[0]) if slow.size else n
    if onset >= n // 2:
        return 0, 0
    while values[onset] <= limit:  # the slow window may begin with the old process's last warm ones
        onset += 1
    settled = np.flatnonzero(rolling[onset:] <= limit)
    first = onset + int(settled[0]) if settled.size else n // 2
    while first < n // 2 and values[first] > limit:
        first += 1
    first = min(first, n // 2)
    return int(positions[onset]), int(positions[first - 1]) + 1
