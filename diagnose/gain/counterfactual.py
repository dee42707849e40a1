"""Counterfactuals on the evidence: the latency the dump would have shown without a cause.

Cold-start contamination: the requests served cold (the run of slow requests
after each start that facts/coldstart.py finds) are set aside, and P50 and P99
are those of the others. Their interval is the block bootstrap compare uses
(bootstrap.py): whole stretches of time resampled, since a slow minute
makes many slow requests, with the cold requests weighted out of every
replicate. What a restart costs is then the difference: a warm-up before
traffic (or a readiness probe that waits for it) buys about that much.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from diagnose.bootstrap import Resampled, interval, replicate_weights, time_blocks
from diagnose.dump.model import Dump
from diagnose.facts.coldstart import cold_requests
from diagnose.gain.model import ExpectedGain, GainFigure

_QUANTILES = (("p50", 0.5), ("p99", 0.99))
_MIN_LEFT = 50  # requests left after setting the cause's aside, for a P99 worth stating


def expected_gain(cause: str, dump: Dump) -> ExpectedGain | None:
    """The counterfactual for ``cause`` where one exists and the evidence allows it; else None."""
    counterfactual = _COUNTERFACTUALS.get(cause)
    return counterfactual(dump) if counterfactual is not None else None


def _cold_start(dump: Dump) -> ExpectedGain | None:
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns or len(requests) < _MIN_LEFT:
        return None
    found = cold_requests(dump, requests)
    if found is None or not found[0].any():
        return None
    cold, windows = found
    warm = ~cold
    if warm.sum() < _MIN_LEFT:
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    blocks = time_blocks(ts, latency)
    salt = zlib.crc32(f"{ts.size}|{ts[0]:.3f}|{ts[-1]:.3f}".encode())
    resampled = Resampled(latency, blocks, replicate_weights(blocks, salt), warm.astype("float64"))
    qs = [q for _, q in _QUANTILES]
    now = np.quantile(latency[np.isfinite(latency)], qs)
    expected = resampled.quantiles(qs)
    replicates = resampled.replicate_quantiles(qs)
    figures = []
    for column, ((name, _), current, value) in enumerate(zip(_QUANTILES, now, expected, strict=True)):
        low, high = interval(replicates[column])  # rows: one per quantile
        figures.append(
            GainFigure(
                name,
                round(float(current), 2),
                round(float(value), 2),
                None if not np.isfinite(low) else round(float(low), 2),
                None if not np.isfinite(high) else round(float(high), 2),
            )
        )
    longest = max(windows) if windows else 0.0
    starts = len(windows)
    how = (
        f"the {int(cold.sum()):,} requests served cold set aside (after {starts} start"
        f"{'s' if starts != 1 else ''}, up to {longest:.0f} s after one): what a warm-up before traffic buys"
    )
    return ExpectedGain(tuple(figures), how, blocks.method, f"{dump.source('requests')}: latency_ms")


_COUNTERFACTUALS: dict[str, Callable[[Dump], ExpectedGain | None]] = {
    "cold-start-contamination": _cold_start,
}
