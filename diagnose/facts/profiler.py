"""Was a profiler or heavy tracing on while serving, and what did it cost?

The dump's events mark ``profiler_start`` and ``profiler_stop`` (a start
without a stop runs to the end). The cost is measured, not assumed: median
latency and forward time while profiling against the rest of the dump.
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
    if "stage_forward_ms" in requests.columns:
        forward = requests["stage_forward_ms"].to_numpy(dtype="float64")
        facts.add(
            "profiler.forward_cost",
            float(np.nanmedian(forward[on]) / np.nanmedian(forward[~on])),
            f"{dump.source('requests')}: stage_forward_ms while profiling / otherwise",
        )
