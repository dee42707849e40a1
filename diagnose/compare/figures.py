"""The change of each figure between two recordings, its interval, and what it means.

A change is judged "better" or "worse" only when its interval excludes no
change *and* it is at least ``MIN_EFFECT`` (2 %): with a million requests, a
0.3 % shift is statistically real and practically nothing; nor is a change
of less than two steps of the log's own resolution (a P50 of 0.1 ms becoming
0.2 ms in a log written in 0.1 ms). A maximum (a memory peak) has no
interval; there the size alone decides.
"""

from __future__ import annotations

import math

import numpy as np

from diagnose.bootstrap import interval
from diagnose.compare.measure import Measure
from diagnose.compare.model import BETTER, INFO, SAME, UNTESTED, WORSE, FigureChange

MIN_EFFECT = 0.02  # a relative change smaller than this is no change worth a verdict
MIN_POINTS = 0.001  # an error rate moving less than 0.1 percentage point likewise
_TRAFFIC = ("request_rate", "work_rate")  # compared in the traffic section, not as figures
_SERVICE = ("service_p50", "service_p99")  # read when the load differed
_EVERY = ("every_p50", "every_p99")  # the cold requests too: read against a fix's expected gain


def figure_changes(before: dict[str, Measure], after: dict[str, Measure]) -> list[FigureChange]:
    """Every figure both sides have, in the before side's order."""
    return [
        change(measure, after[name])
        for name, measure in before.items()
        if name in after and name not in _TRAFFIC and name not in _SERVICE and name not in _EVERY
    ]


def change(before: Measure, after: Measure) -> FigureChange:
    b, a = (math.nan if m.value is None else m.value for m in (before, after))  # not measured: no change
    low = high = math.nan
    method = (
        before.method
        if before.replicates is not None
        else f"{before.method}; a change of {MIN_EFFECT:.0%} counts"
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        if before.scale == "relative":
            moved = a / b - 1 if b else math.nan
            if before.replicates is not None and after.replicates is not None:
                low, high = interval(after.replicates.astype("float64") / before.replicates - 1)
        else:
            moved = a - b
            if before.replicates is not None and after.replicates is not None:
                low, high = interval(after.replicates.astype("float64") - before.replicates)
    verdict = INFO if before.better is None else _verdict(moved, low, high, before.better, before.scale)
    steps = [r for r in (before.resolution, after.resolution) if r]
    if verdict in (BETTER, WORSE) and steps and abs(a - b) < 2 * max(steps):
        verdict = SAME  # within two steps of the log's own resolution: rounding, not a change
    return FigureChange(
        before.name,
        before.label,
        before.unit,
        before.better,
        _clean(b),
        _clean(a),
        _clean(moved),
        before.scale,
        _clean(low),
        _clean(high),
        method,
        verdict,
        before.source if before.source == after.source else f"{before.source} / {after.source}",
    )


def _verdict(moved: float, low: float, high: float, better: str, scale: str) -> str:
    if not math.isfinite(moved):
        return UNTESTED
    smallest = MIN_EFFECT if scale == "relative" else MIN_POINTS
    if math.isfinite(low) and math.isfinite(high):
        if (low <= 0 <= high) or abs(moved) < smallest:
            return SAME
    elif abs(moved) < smallest:  # no interval (a maximum): size alone decides
        return SAME
    return BETTER if (moved > 0) == (better == "higher") else WORSE


def _clean(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
