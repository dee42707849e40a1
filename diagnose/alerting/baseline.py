"""A baseline's key figures as Prometheus would evaluate them, and the thresholds its variation sets.

An alerting rule evaluates a figure over a sliding window (``W``, the rule's
range) every evaluation interval. The baseline's variation that matters is that
of the same statistic: the P99 of each ``W`` of requests, the requests per
second of each ``W``, the GPU memory peak of each ``W``, taken every interval.
From the requests themselves where the dump has them (the exact statistic,
up to the histogram's bucket interpolation in Prometheus); from the server
table's per-step figures where it has only those (a pulled dump: each a P99
over a few scrapes, which varies more than a ``W``'s: the threshold is wider,
and the rule says so).

The threshold is the centre (median) plus ``K`` robust spreads (1.4826 x the
median absolute deviation, a standard deviation for a normal figure, not
moved by the baseline's own spikes), and never inside the baseline's own
range: the baseline never fires its own rule. ``for:`` is the longest
excursion the baseline made beyond two spreads (rounded up to the interval,
at least two intervals): shorter than that is what the baseline did anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.errors import InputError

K = 4.0  # robust spreads beyond the centre: about 3 in 100,000 windows of a normal figure
EXCURSION = 2.0  # spreads beyond the centre that count as an excursion, for ``for:``
MIN_WINDOWS = 5  # independent windows a baseline must hold for its variation to be known
MAX_FOR_S = 900.0  # a longer ``for:`` would page too late to be of use
_MAD_TO_SD = 1.4826


class Figure(StrEnum):
    P99_LATENCY = "p99_latency"
    TTFT_P99 = "ttft_p99"
    TPOT_P99 = "tpot_p99"
    THROUGHPUT = "throughput"
    GPU_MEMORY_PEAK = "gpu_memory_peak"


@dataclass(frozen=True)
class Series:
    figure: Figure
    values: np.ndarray  # one per evaluation, in time order
    unit: str  # ms, req/s, bytes
    source: str  # what it was computed from, for the rule's description
    exact: bool  # the rule's own statistic (False: a per-step stand-in, wider)


@dataclass(frozen=True)
class Threshold:
    figure: Figure
    above: bool  # fires above (latency, memory) or below (throughput)
    value: float
    centre: float
    spread: float
    for_s: float
    unit: str
    source: str
    reason: str  # how the value was set, in words


# figure -> (requests column, server column, unit, fires above)
_LATENCIES = {
    Figure.P99_LATENCY: ("latency_ms", "e2e_p99_ms"),
    Figure.TTFT_P99: ("ttft_ms", "ttft_p99_ms"),
    Figure.TPOT_P99: ("tpot_ms", "tpot_p99_ms"),
}


def baseline_series(
    dump: Dump,
    window_s: float,
    every_s: float,
    buckets: dict[Figure, list[float]] | None = None,
    requests_per_row: float = 1.0,
) -> tuple[list[Series], list[str]]:
    """Each figure the dump holds, evaluated as the rule would be; and why the others are missing.

    ``buckets``: a latency histogram's upper bounds (seconds, as its ``le`` labels), where known: the
    requests' P99 is then what ``histogram_quantile`` makes of them, interpolated within the bucket as
    Prometheus does, not the exact one (which a wide bucket can put well below what Prometheus sees).
    ``requests_per_row``: where the requests table is an even sample (an archived baseline's), how many
    requests each row stands for: the throughput is counted in requests, not rows.
    """
    buckets = buckets or {}
    span = dump.span()
    if span is None:
        raise InputError(f"{dump.path}: no samples with times: nothing to set a baseline from")
    duration = span[1] - span[0]
    if duration < MIN_WINDOWS * window_s:
        raise InputError(
            f"{dump.path}: the baseline covers {duration / 60:.0f} min, fewer than {MIN_WINDOWS} windows of "
            f"{window_s / 60:g} min: its variation cannot be known. Give a longer baseline, or a shorter "
            "--window"
        )
    times = np.arange(span[0] + window_s, span[1] + 1e-9, every_s)
    found, missing = [], []
    requests, server, gpu = (_table(dump, name) for name in ("requests", "server", "gpu"))
    for figure, (column, per_step) in _LATENCIES.items():
        exact, stand_in = _column(requests, column), _column(server, per_step)
        if exact is not None and figure in buckets:
            interpolated = _bucketed_p99([1000 * b for b in buckets[figure]])
            values = _windows(*exact, times, window_s, interpolated)
            source = (
                f"requests.{column}, in the histogram's {len(buckets[figure])} buckets as Prometheus sees it"
            )
            found.append(Series(figure, values, "ms", source, True))
        elif exact is not None:
            values = _windows(*exact, times, window_s, _p99)
            source = (
                f"requests.{column} (exact: Prometheus interpolates within the engine's buckets; --buckets)"
            )
            found.append(Series(figure, values, "ms", source, False))
        elif stand_in is not None:
            source = f"server.{per_step} (each a P99 of a few scrapes: wider than a window's)"
            found.append(Series(figure, _windows(*stand_in, times, window_s, _last), "ms", source, False))
        else:
            missing.append(f"{figure}: no requests.{column} or server.{per_step}")
    served = _column(server, "throughput_rps")
    if requests is not None:
        ts = np.sort(requests["ts"].to_numpy(dtype=float))
        counts = _windows(ts, np.ones_like(ts), times, window_s, len) * requests_per_row / window_s
        found.append(Series(Figure.THROUGHPUT, counts, "req/s", "requests: completed per second", True))
    elif served is not None:
        series = _windows(*served, times, window_s, np.mean)
        found.append(Series(Figure.THROUGHPUT, series, "req/s", "server.throughput_rps", True))
    else:
        missing.append(f"{Figure.THROUGHPUT}: no requests or server.throughput_rps")
    if gpu is not None and _column(gpu, "mem_used_bytes") is not None:
        peaks = gpu.groupby("ts")["mem_used_bytes"].max().dropna()
        ts, values = peaks.index.to_numpy(dtype=float), peaks.to_numpy(dtype=float)
        series = _windows(ts, values, times, window_s, np.max)
        found.append(
            Series(Figure.GPU_MEMORY_PEAK, series, "bytes", "gpu.mem_used_bytes (the fullest GPU)", True)
        )
    else:
        missing.append(f"{Figure.GPU_MEMORY_PEAK}: no gpu.mem_used_bytes")
    kept = []
    for each in found:
        finite = each.values[np.isfinite(each.values)]
        if len(finite) < MIN_WINDOWS:
            missing.append(f"{each.figure}: fewer than {MIN_WINDOWS} windows with a value")
        else:
            kept.append(Series(each.figure, finite, each.unit, each.source, each.exact))
    return kept, missing


def threshold(series: Series, every_s: float) -> Threshold | None:
    """The threshold and ``for:`` the series' own variation sets; None where no lower bound means
    anything (a throughput whose range reaches zero)."""
    values = series.values
    above = series.figure is not Figure.THROUGHPUT

    def say(value: float) -> str:
        return shown(value, series.unit)

    centre = float(np.median(values))
    spread = _MAD_TO_SD * float(np.median(np.abs(values - centre)))
    reason = f"median {say(centre)} + {K:g} x spread {say(spread)} (1.4826 x MAD)"
    if spread == 0:
        spread = 0.01 * abs(centre)
        reason = f"the baseline did not vary ({say(centre)} throughout): 1 % of it taken as its spread"
    if above:
        value = max(float(values.max()), centre + K * spread)
        if value == float(values.max()) and values.max() > centre + K * spread:
            reason = f"the baseline's own highest window, {say(value)} (above median + {K:g} spreads)"
    else:
        value = min(float(values.min()), centre - K * spread)
        if value <= 0:
            return None
        if value == float(values.min()) and values.min() < centre - K * spread:
            reason = f"the baseline's own lowest window, {say(value)} (below median - {K:g} spreads)"
        else:
            reason = reason.replace(" + ", " - ")
    outside = values > centre + EXCURSION * spread if above else values < centre - EXCURSION * spread
    longest = _longest_run(outside) * every_s
    for_s = min(MAX_FOR_S, max(2 * every_s, math.ceil(longest / every_s) * every_s))
    return Threshold(series.figure, above, value, centre, spread, for_s, series.unit, series.source, reason)


def shown(value: float, unit: str) -> str:
    """A figure as people read it: ``14,610 ms``, ``1.71 req/s``, ``75.2 GiB``."""
    if unit == "bytes":
        return f"{value / (1 << 30):.1f} GiB"
    return (f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}") + f" {unit}"


def _p99(values: np.ndarray) -> float:
    return float(np.quantile(values, 0.99))


def _bucketed_p99(bounds: list[float]):
    """The P99 Prometheus's ``histogram_quantile`` gives of values counted in buckets of these upper
    bounds (and +Inf): linear within the bucket the rank falls in, from the bucket below's bound (0 for
    the first); the highest finite bound where the rank falls in +Inf."""
    edges = np.array(sorted(bounds), dtype=float)

    def p99(values: np.ndarray) -> float:
        counts = np.searchsorted(np.sort(values), edges, side="right")  # cumulative, as the counters are
        rank = 0.99 * len(values)
        index = int(np.searchsorted(counts, rank, side="left"))
        if index == len(edges):
            return float(edges[-1])
        below = counts[index - 1] if index else 0
        start = edges[index - 1] if index else 0.0
        inside = counts[index] - below
        return (
            float(start + (edges[index] - start) * (rank - below) / inside) if inside else float(edges[index])
        )

    return p99


def _last(values: np.ndarray) -> float:
    return float(values[-1])


def _windows(ts: np.ndarray, values: np.ndarray, times: np.ndarray, window_s: float, stat) -> np.ndarray:
    """``stat`` of the values in (t - window, t] for each evaluation time t; NaN for an empty window."""
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    ends = np.searchsorted(ts, times, side="right")
    starts = np.searchsorted(ts, times - window_s, side="right")
    return np.array([stat(values[a:b]) if b > a else np.nan for a, b in zip(starts, ends, strict=True)])


def _longest_run(flags: np.ndarray) -> int:
    longest = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    return longest


def _table(dump: Dump, name: str) -> pd.DataFrame | None:
    frame = dump.tables.get(name)
    return frame if frame is not None and len(frame) and "ts" in frame else None


def _column(frame: pd.DataFrame | None, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(times, values) of a column's rows with a value; None where it has none."""
    if frame is None or column not in frame:
        return None
    rows = frame[["ts", column]].dropna()
    if rows.empty:
        return None
    return rows["ts"].to_numpy(dtype=float), rows[column].to_numpy(dtype=float)
