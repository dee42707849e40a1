"""How fine is the evidence? A spike of 15 s cannot be seen in 60 s samples or in averages."""

from __future__ import annotations

import numpy as np

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

_SERIES = ("system", "gpu", "processes", "server", "allocator", "gpu_processes")


def add_sampling_facts(facts: Facts, dump: Dump) -> None:
    intervals = {}
    for name in _SERIES:
        frame = dump.table(name)
        if frame is not None and len(frame) > 2:
            gaps = np.diff(np.unique(frame["ts"].to_numpy()))
            if gaps.size:
                intervals[name] = float(np.median(gaps))
    if not intervals:
        return
    finest = min(intervals, key=intervals.get)
    facts.add("sampling.interval_s", intervals[finest], f"{dump.source(finest)}: median gap between samples")
    requests = dump.table("requests")
    facts.add(
        "sampling.has_requests",
        requests is not None and len(requests) > 0,
        "requests table" if requests is not None else "no requests table in the dump",
    )
