"""The figures compared between two recordings, each with its change and interval.

Percentiles, never only means; per stage; the memory peak and the steady
level (and the gap between them); error rate and throughput. A change is
judged "better" or "worse" only when its interval excludes no change *and* it
is at least ``MIN_EFFECT`` (2 %): with a million requests, a 0.3 % shift is
statistically real and practically nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from diagnose.compare.bootstrap import Blocks, Grid, Resampled, interval, replicate_weights, time_blocks
from diagnose.compare.model import BETTER, INFO, SAME, UNTESTED, WORSE, FigureChange
from diagnose.dump.model import Dump
from diagnose.dump.schema import stage_columns
from diagnose.facts.coldstart import cold_requests
from diagnose.facts.latency import failed_requests
from diagnose.facts.stages import declared_kinds, stage_kind

MIN_EFFECT = 0.02  # a relative change smaller than this is no change worth a verdict
MIN_POINTS = 0.001  # an error rate moving less than 0.1 percentage point likewise
LATENCY_QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99, "p999": 0.999}
_STAGE_QUANTILES = {"p50": 0.50, "p99": 0.99}
_PEAK_METHOD = f"a maximum has no bootstrap interval; a change of at least {MIN_EFFECT:.0%} counts"


@dataclass(frozen=True)
class Requests:
    """One side's requests as compared: the warm ones, cut into time blocks."""

    frame: pd.DataFrame
    blocks: Blocks
    duration_s: float
    source: str
    cold_excluded: int
    stage_kinds: dict[str, str]  # the manifest's stages: map
    salt: int  # 0 before, 1 after: the two sides' replicates are drawn independently

    @cached_property
    def weights(self) -> np.ndarray:
        return replicate_weights(self.blocks, self.salt)


def warm_requests(dump: Dump, salt: int) -> Requests | None:
    """The requests with a latency, the cold ones after a (re)start left out: a warm-up is not the service."""
    frame = dump.table("requests")
    if frame is None or "latency_ms" not in frame.columns:
        return None
    frame = frame[np.isfinite(pd.to_numeric(frame["latency_ms"], errors="coerce"))].reset_index(drop=True)
    if len(frame) < 2:
        return None
    cold = cold_requests(dump, frame)
    excluded = 0
    if cold is not None and cold[0].any() and (~cold[0]).sum() >= 2:
        excluded = int(cold[0].sum())
        frame = frame[~cold[0]].reset_index(drop=True)
    ts, latency = frame["ts"].to_numpy(), frame["latency_ms"].to_numpy(dtype="float64")
    kinds = declared_kinds(dump.manifest.extra, [])
    return Requests(
        frame, time_blocks(ts, latency), float(ts[-1] - ts[0]), dump.source("requests"), excluded, kinds, salt
    )


def request_figures(before: Requests, after: Requests) -> list[FigureChange]:
    figures = latency_figures(before, after)
    figures += _throughput_and_errors(before, after)
    for column in _shared(before, after, ("ttft_ms", "tpot_ms")):
        label = "time to first token" if column == "ttft_ms" else "time per output token"
        figures += _quantile_figures(before, after, column, column[:4], label, _STAGE_QUANTILES)
    shared = stage_columns(after.frame)
    for stage, column in stage_columns(before.frame).items():
        if stage in shared:
            figures += _quantile_figures(
                before, after, column, f"stage_{stage}", f"{stage} stage", _STAGE_QUANTILES
            )
    return figures


def latency_figures(
    before: Requests, after: Requests, after_weights: np.ndarray | None = None
) -> list[FigureChange]:
    """Latency percentiles and mean; ``after_weights`` re-weights the after side's requests."""
    figures = _quantile_figures(before, after, "latency_ms", "", "latency", LATENCY_QUANTILES, after_weights)
    b_values, a_values = _values(before, "latency_ms"), _values(after, "latency_ms")
    grid = Grid.spanning(b_values, a_values)
    b = Resampled(b_values, before.blocks, grid, before.weights)
    a = Resampled(a_values, after.blocks, grid, after.weights, after_weights)
    method = before.blocks.method
    figures.append(
        relative_change(
            "mean",
            "mean latency",
            "ms",
            "lower",
            b.mean(),
            a.mean(),
            b.replicate_means(),
            a.replicate_means(),
            method,
            _cite(before, after, "latency_ms"),
        )
    )
    return figures


def _quantile_figures(
    before: Requests,
    after: Requests,
    column: str,
    prefix: str,
    label: str,
    quantiles: dict[str, float],
    after_weights: np.ndarray | None = None,
) -> list[FigureChange]:
    return quantile_changes(
        before,
        after,
        _values(before, column),
        _values(after, column),
        prefix,
        label,
        quantiles,
        _cite(before, after, column),
        after_weights,
    )


def service_figures(
    before: Requests, after: Requests, after_weights: np.ndarray | None
) -> list[FigureChange]:
    """P50 and P99 of the time the service worked on a request: latency less every waiting stage.

    Waiting depends on the load; the work a request needs does not. Empty where no wait stage is logged.
    """
    b_waits, a_waits = wait_columns(before), wait_columns(after)
    if not b_waits or not a_waits:
        return []
    source = (
        f"{before.source} / {after.source}: latency_ms less {', '.join(sorted(set(b_waits) | set(a_waits)))}"
    )
    return quantile_changes(
        before,
        after,
        _service(before, b_waits),
        _service(after, a_waits),
        "service",
        "service time (latency less waiting)",
        _STAGE_QUANTILES,
        source,
        after_weights,
    )


def wait_columns(side: Requests) -> list[str]:
    return [
        c for name, c in stage_columns(side.frame).items() if stage_kind(name, side.stage_kinds) == "wait"
    ]


def _service(side: Requests, waits: list[str]) -> np.ndarray:
    waited = sum(np.nan_to_num(_values(side, column)) for column in waits)
    return _values(side, "latency_ms") - waited


def quantile_changes(
    before: Requests,
    after: Requests,
    b_values: np.ndarray,
    a_values: np.ndarray,
    prefix: str,
    label: str,
    quantiles: dict[str, float],
    source: str,
    after_weights: np.ndarray | None = None,
) -> list[FigureChange]:
    if np.isfinite(b_values).sum() < 2 or np.isfinite(a_values).sum() < 2:
        return []
    grid = Grid.spanning(b_values, a_values)
    b = Resampled(b_values, before.blocks, grid, before.weights)
    a = Resampled(a_values, after.blocks, grid, after.weights, after_weights)
    qs = list(quantiles.values())
    b_reps, a_reps = b.replicate_quantiles(qs), a.replicate_quantiles(qs)
    b_exact, a_exact = b.quantiles(qs), a.quantiles(qs)
    return [
        relative_change(
            f"{prefix}_{name}" if prefix else name,
            f"{name.upper().replace('P999', 'P99.9')} {label}",
            "ms",
            "lower",
            b_exact[row],
            a_exact[row],
            b_reps[row],
            a_reps[row],
            before.blocks.method,
            source,
        )
        for row, name in enumerate(quantiles)
    ]


def _throughput_and_errors(before: Requests, after: Requests) -> list[FigureChange]:
    figures = []
    if "status" in before.frame.columns and "status" in after.frame.columns:
        b_failed, a_failed = _failed(before), _failed(after)
        if np.isfinite(b_failed).any() and np.isfinite(a_failed).any():
            grid = Grid.spanning(np.array([0.0, 1.0]))
            b = Resampled(b_failed, before.blocks, grid, before.weights)
            a = Resampled(a_failed, after.blocks, grid, after.weights)
            reps = a.replicate_means() - b.replicate_means()
            low, high = interval(reps)
            change = a.mean() - b.mean()
            figures.append(
                FigureChange(
                    "error_rate",
                    "error rate",
                    "share",
                    "lower",
                    b.mean(),
                    a.mean(),
                    change,
                    "difference",
                    low,
                    high,
                    before.blocks.method,
                    _verdict(change, low, high, "lower", "difference"),
                    _cite(before, after, "status"),
                )
            )
        ok_b, ok_a = 1 - np.nan_to_num(b_failed), 1 - np.nan_to_num(a_failed)
    else:
        ok_b, ok_a = np.ones(len(before.frame)), np.ones(len(after.frame))
    if before.duration_s > 0 and after.duration_s > 0:
        grid = Grid.spanning(np.array([0.0, 1.0]))
        b = Resampled(ok_b, before.blocks, grid, before.weights)
        a = Resampled(ok_a, after.blocks, grid, after.weights)
        figures.append(
            relative_change(
                "throughput",
                "throughput (answered requests/s)",
                "rps",
                "higher",
                ok_b.sum() / before.duration_s,
                ok_a.sum() / after.duration_s,
                b.replicate_sums() / before.duration_s,
                a.replicate_sums() / after.duration_s,
                before.blocks.method,
                _cite(before, after, "ts"),
            )
        )
    return figures


def series_figures(before: Dump, after: Dump) -> list[FigureChange]:
    """Memory peaks and steady levels of the fullest GPU and the host, and GPU utilisation."""
    figures: list[FigureChange] = []
    specs = (
        ("gpu", "mem_used_bytes", "max", "gpu_mem", "GPU memory, fullest GPU", "bytes"),
        ("system", "mem_used_bytes", "max", "host_mem", "host memory", "bytes"),
    )
    for table, column, combine, name, label, unit in specs:
        b, a = _series(before, table, column, combine), _series(after, table, column, combine)
        if b is None or a is None:
            continue
        source = f"{before.source(table)} / {after.source(table)}: {column}"
        figures.append(_peak(f"{name}_peak", f"peak {label}", unit, b[1], a[1], source))
        figures.append(_median(f"{name}_steady", f"steady {label} (median)", unit, "lower", b, a, source))
        b_gap, a_gap = (
            float(np.nanmax(b[1]) - np.nanmedian(b[1])),
            float(np.nanmax(a[1]) - np.nanmedian(a[1])),
        )
        figures.append(_peak_gap(f"{name}_gap", f"{label}: peak above steady", unit, b_gap, a_gap, source))
    b, a = _series(before, "gpu", "util_pct", "mean"), _series(after, "gpu", "util_pct", "mean")
    if b is not None and a is not None:
        source = f"{before.source('gpu')} / {after.source('gpu')}: util_pct"
        figures.append(_mean_series("gpu_util", "GPU utilisation (mean over GPUs)", "pct", b, a, source))
    return figures


def relative_change(
    name: str,
    label: str,
    unit: str,
    better: str | None,
    before: float,
    after: float,
    before_reps: np.ndarray,
    after_reps: np.ndarray,
    method: str,
    source: str,
) -> FigureChange:
    with np.errstate(invalid="ignore", divide="ignore"):
        change = after / before - 1 if before else math.nan
        low, high = interval(after_reps / before_reps - 1)
    return FigureChange(
        name,
        label,
        unit,
        better,
        _clean(before),
        _clean(after),
        _clean(change),
        "relative",
        _clean(low),
        _clean(high),
        method,
        _verdict(change, low, high, better, "relative"),
        source,
    )


def _verdict(change: float, low: float, high: float, better: str | None, scale: str) -> str:
    if better is None:
        return INFO
    if not math.isfinite(change):
        return UNTESTED
    smallest = MIN_EFFECT if scale == "relative" else MIN_POINTS
    if math.isfinite(low) and math.isfinite(high):
        if (low <= 0 <= high) or abs(change) < smallest:
            return SAME
    elif abs(change) < smallest:  # no interval (a maximum): size alone decides
        return SAME
    rose = change > 0
    return BETTER if rose == (better == "higher") else WORSE


def _series(dump: Dump, table: str, column: str, combine: str) -> tuple[np.ndarray, np.ndarray] | None:
    frame = dump.table(table)
    if frame is None or column not in frame.columns:
        return None
    values = pd.to_numeric(frame[column], errors="coerce")
    per_second = values.groupby(frame["ts"].to_numpy()).agg(combine).dropna()
    if len(per_second) < 2:
        return None
    return per_second.index.to_numpy(dtype="float64"), per_second.to_numpy(dtype="float64")


def _peak(
    name: str, label: str, unit: str, before: np.ndarray, after: np.ndarray, source: str
) -> FigureChange:
    b, a = float(np.nanmax(before)), float(np.nanmax(after))
    change = a / b - 1 if b else math.nan
    return FigureChange(
        name,
        label,
        unit,
        "lower",
        b,
        a,
        _clean(change),
        "relative",
        None,
        None,
        _PEAK_METHOD,
        _verdict(change, math.nan, math.nan, "lower", "relative"),
        source,
    )


def _peak_gap(name: str, label: str, unit: str, before: float, after: float, source: str) -> FigureChange:
    return FigureChange(
        name,
        label,
        unit,
        None,
        before,
        after,
        after - before,
        "difference",
        None,
        None,
        "the peak minus the median level: how much headroom the peak takes",
        INFO,
        source,
    )


def _median(name, label, unit, better, before, after, source) -> FigureChange:
    (b_ts, b_values), (a_ts, a_values) = before, after
    b_blocks, a_blocks = time_blocks(b_ts, b_values), time_blocks(a_ts, a_values)
    grid = Grid.spanning(b_values, a_values)
    b = Resampled(b_values, b_blocks, grid, replicate_weights(b_blocks, 2))
    a = Resampled(a_values, a_blocks, grid, replicate_weights(a_blocks, 3))
    b_reps, a_reps = b.replicate_quantiles([0.5])[0], a.replicate_quantiles([0.5])[0]
    return relative_change(
        name, label, unit, better, b.quantile(0.5), a.quantile(0.5), b_reps, a_reps, b_blocks.method, source
    )


def _mean_series(name, label, unit, before, after, source) -> FigureChange:
    (b_ts, b_values), (a_ts, a_values) = before, after
    b_blocks, a_blocks = time_blocks(b_ts, b_values), time_blocks(a_ts, a_values)
    grid = Grid.spanning(b_values, a_values)
    b = Resampled(b_values, b_blocks, grid, replicate_weights(b_blocks, 4))
    a = Resampled(a_values, a_blocks, grid, replicate_weights(a_blocks, 5))
    reps = a.replicate_means() - b.replicate_means()
    low, high = interval(reps)
    change = a.mean() - b.mean()
    return FigureChange(
        name,
        label,
        unit,
        None,
        b.mean(),
        a.mean(),
        change,
        "difference",
        low,
        high,
        b_blocks.method,
        INFO,
        source,
    )


def _values(side: Requests, column: str) -> np.ndarray:
    return pd.to_numeric(side.frame[column], errors="coerce").to_numpy(dtype="float64")


def _failed(side: Requests) -> np.ndarray:
    return failed_requests(side.frame["status"]).astype("Float64").to_numpy(dtype="float64", na_value=np.nan)


def _shared(before: Requests, after: Requests, columns: tuple[str, ...]) -> list[str]:
    return [c for c in columns if c in before.frame.columns and c in after.frame.columns]


def _cite(before: Requests, after: Requests, column: str) -> str:
    return f"{before.source} / {after.source}: {column}"


def _clean(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
