"""Was a profiler or heavy tracing on while serving, and what did it cost?

The dump's events mark ``profiler_start`` and ``profiler_stop`` (a start
without a stop runs to the end). The cost is measured, not assumed: median
latency and forward time while profiling against the rest of the dump. And
whether the start *caused* the change: the step in median latency across the
start, against the same step across every other moment of the dump (a rise
that happens at the start and nowhere else is the profiler's; one that any
moment shows is noise).
"""

from __future__ import annotations

import numpy as np

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts


def add_profiler_facts(facts: Facts, dump: Dump) -> None:
    events = dump.table("events")
    requests = dump.table("requests")
    if events is None:
        return
    kinds = events["kind"].astype("string").str.lower()
    starts = events.loc[kinds == "profiler_start", "ts"].to_numpy()
    stops = events.loc[kinds == "profiler_stop", "ts"].to_numpy()
    source = f"{dump.source('events')}: profiler_start/profiler_stop"
    facts.add("profiler.sessions", int(starts.size), source)
    if not starts.size or requests is None or len(requests) < 40:
        return
    ts = requests["ts"].to_numpy()
    on = np.zeros(ts.size, dtype=bool)
    for start in starts:
        later = stops[stops > start]
        end = later.min() if later.size else np.inf
        on |= (ts >= start) & (ts < end)
    facts.add("profiler.active_share", float(on.mean()), f"{source} against {dump.source('requests')}")
    if on.sum() < 20 or (~on).sum() < 20:
        return
    cite = f"{dump.source('requests')}: latency_ms while profiling / otherwise"
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    facts.add("profiler.latency_cost", float(np.nanmedian(latency[on]) / np.nanmedian(latency[~on])), cite)
    step = _step_rank(ts, latency, float(starts[0]))
    if step is not None:
        facts.add(
            "profiler.step_p_value",
            step,
            f"{dump.source('requests')}: median latency {_STEP_S:.0f} s after / before the first start, "
            "against the same step at every other moment",
        )
    if "stage_forward_ms" in requests.columns:
        forward = requests["stage_forward_ms"].to_numpy(dtype="float64")
        facts.add(
            "profiler.forward_cost",
            float(np.nanmedian(forward[on]) / np.nanmedian(forward[~on])),
            f"{dump.source('requests')}: stage_forward_ms while profiling / otherwise",
        )


_STEP_S = 60.0  # the windows either side of a moment
_STEP_GRID_S = 5.0


def _step(ts: np.ndarray, latency: np.ndarray, at: float) -> float | None:
    before = latency[(ts >= at - _STEP_S) & (ts < at)]
    after = latency[(ts >= at) & (ts < at + _STEP_S)]
    if before.size < 20 or after.size < 20:
        return None
    low = np.nanmedian(before)
    return float(np.nanmedian(after) / low) if low > 0 else None


def _step_rank(ts: np.ndarray, latency: np.ndarray, start: float) -> float | None:
    """Share of the dump's moments whose step is at least the step at the start (the start included)."""
    observed = _step(ts, latency, start)
    if observed is None:
        return None
    grid = np.arange(ts[0] + _STEP_S, ts[-1] - _STEP_S, _STEP_GRID_S)
    steps = [s for at in grid if (s := _step(ts, latency, float(at))) is not None]
    if len(steps) < 10:
        return None
    return float((1 + sum(s >= observed for s in steps)) / (1 + len(steps)))
