"""Counterfactuals on the evidence: the latency the dump would have shown without a cause.

Each sets aside the requests the cause touched, and P50 and P99 are those of
the others. Their interval is the block bootstrap compare uses
(diagnose/bootstrap.py): whole stretches of time resampled, since a slow
minute makes many slow requests, with the set-aside requests weighted out of
every replicate.

- Cold-start contamination: the requests served cold (the run of slow requests
  after each start that facts/coldstart.py finds). A warm-up before traffic
  (or a readiness probe that waits for it) buys about the difference.
- Co-located contention: the requests that arrived while the contending
  process ran (its episodes, as facts/spikes.py names it). Moving the job off
  the host, or out of the service's busy hours, buys about the difference.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pandas as pd

from diagnose.bootstrap import Resampled, interval, replicate_weights, time_blocks
from diagnose.detect import SpikeAnalysis
from diagnose.dump.model import Dump
from diagnose.facts.coldstart import cold_requests
from diagnose.facts.spikes import contender
from diagnose.gain.model import ExpectedGain, GainFigure

_QUANTILES = (("p50", 0.5), ("p99", 0.99))
_MIN_LEFT = 50  # requests left after setting the cause's aside, for a P99 worth stating


def expected_gain(cause: str, dump: Dump, spikes: SpikeAnalysis | None = None) -> ExpectedGain | None:
    """The counterfactual for ``cause`` where one exists and the evidence allows it; else None."""
    counterfactual = _COUNTERFACTUALS.get(cause)
    return counterfactual(dump, spikes) if counterfactual is not None else None


def _cold_start(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    if requests is None:
        return None
    found = cold_requests(dump, requests)
    if found is None or not found[0].any():
        return None
    cold, windows = found
    longest = max(windows) if windows else 0.0
    starts = len(windows)
    how = (
        f"the {int(cold.sum()):,} requests served cold set aside (after {starts} start"
        f"{'s' if starts != 1 else ''}, up to {longest:.0f} s after one): what a warm-up before traffic buys"
    )
    return _without(dump, requests, cold, how)


def _co_located(dump: Dump, spikes: SpikeAnalysis | None) -> ExpectedGain | None:
    requests = _requests(dump)
    chosen = contender(spikes) if spikes is not None and requests is not None else None
    if chosen is None or requests is None:
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    during = np.zeros(ts.size, dtype=bool)
    for run in chosen.runs:
        during |= (ts >= run.start) & (ts < run.end)
    if not during.any():
        return None
    meta = chosen.found.signal.meta
    who = meta.get("cmdline") or meta.get("name") or chosen.found.signal.name
    how = (
        f"the {int(during.sum()):,} requests that arrived during the {len(chosen.runs)} runs of `{who}` "
        "set aside: "
        "what moving the job off the host, or out of the service's hours, buys"
    )
    return _without(dump, requests, during, how)


def _requests(dump: Dump) -> pd.DataFrame | None:
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns or len(requests) < _MIN_LEFT:
        return None
    return requests


def _without(dump: Dump, requests: pd.DataFrame, aside: np.ndarray, how: str) -> ExpectedGain | None:
    """P50 and P99 of the requests not ``aside``, with their intervals, against all of them now."""
    kept = ~aside
    if kept.sum() < _MIN_LEFT:
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    blocks = time_blocks(ts, latency)
    salt = zlib.crc32(f"{ts.size}|{ts[0]:.3f}|{ts[-1]:.3f}".encode())
    resampled = Resampled(latency, blocks, replicate_weights(blocks, salt), kept.astype("float64"))
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
    return ExpectedGain(tuple(figures), how, blocks.method, f"{dump.source('requests')}: latency_ms")


_COUNTERFACTUALS: dict[str, Callable[[Dump, SpikeAnalysis | None], ExpectedGain | None]] = {
    "cold-start-contamination": _cold_start,
    "co-located-contention": _co_located,
}
