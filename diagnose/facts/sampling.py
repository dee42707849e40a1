"""How fine is the evidence? A spike of 15 s cannot be seen in 60 s samples or in averages."""

from __future__ import annotations

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

_LATENCY_AVERAGES = ("e2e_ms", "queue_ms", "compute_ms", "prefill_ms", "decode_ms", "ttft_ms", "tpot_ms")
_SERIES = ("system", "gpu", "processes", "server", "allocator", "gpu_processes")


def series_intervals(dump: Dump) -> dict[str, float]:
    """Each time-series table's median interval between samples, in seconds (the tables that have one)."""
    return {name: gap for name in _SERIES if (gap := dump.interval(name)) is not None}


def add_sampling_facts(facts: Facts, dump: Dump) -> None:
    intervals = series_intervals(dump)
    if not intervals:
        return
    finest = min(intervals, key=lambda name: intervals[name])
    cadence = dump.cadences.get(finest)
    how = cadence.how if cadence is not None else "median gap between samples"
    facts.add("sampling.interval_s", intervals[finest], f"{dump.source(finest)}: {how}")
    requests = dump.table("requests")
    facts.add(
        "sampling.has_requests",
        requests is not None and len(requests) > 0,
        "requests table" if requests is not None else "no requests table in the dump",
    )
    server = dump.table("server")
    averaged = [
        column
        for column in _LATENCY_AVERAGES
        if server is not None and column in server and server[column].notna().any()
    ]
    cite = f"{dump.source('server')}: {', '.join(averaged)}" if averaged else "no latency means (server)"
    facts.add("sampling.has_latency_averages", bool(averaged), cite)
