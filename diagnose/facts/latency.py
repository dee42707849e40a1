"""Latency percentiles overall and per window, throughput, errors and the SLO."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import RequestSample
from diagnose.dump.schema import SUCCESS_CODE, SUCCESS_WORDS
from diagnose.facts.model import Facts, LatencyWindow
from diagnose.quantiles import quantiles

PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
_TARGET_WINDOWS = 30
_MIN_WINDOW_S = 60.0
_NICE_WINDOWS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)


def add_latency_facts(
    facts: Facts, requests: pd.DataFrame, source: str, sample: RequestSample | None = None
) -> None:
    """``sample``: where the table is a sample of a bigger one, the counts of every request (the
    percentiles are the sample's: dump/sample.py)."""
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    ts = requests["ts"].to_numpy()
    valid = np.isfinite(latency)
    values = latency[valid]
    cite = f"{source}: latency_ms, {values.size:,} requests"
    if sample is not None:
        cite += f" (a uniform sample of {sample.total:,})"
    count = int(len(requests)) if sample is None else sample.total
    counted_from = source if sample is None else f"{source}: every request, counted per second"
    duration = float(ts[-1] - ts[0]) if len(requests) > 1 else 0.0
    facts.add("requests.count", count, counted_from)
    facts.add("requests.duration_s", duration, f"{source}: ts")
    throughput = count / duration if duration > 0 else None
    facts.add("requests.throughput_rps", throughput, f"{counted_from}, over ts")
    summary = facts.summary
    summary.requests, summary.throughput_rps = count, throughput
    if values.size == 0:
        return
    points = quantiles(values, [p / 100 for p in PERCENTILES.values()])
    summary.latency_ms = {name: float(v) for name, v in zip(PERCENTILES, points, strict=True)}
    summary.latency_ms["mean"] = float(values.mean())
    summary.latency_ms["max"] = float(values.max())
    if sample is not None and sample.latency_max_ms is not None:  # the slowest of every request
        summary.latency_ms["max"] = sample.latency_max_ms
    for name in (*PERCENTILES, "mean"):
        facts.add(f"latency.{name}_ms", summary.latency_ms[name], cite)
    _add_windows(facts, ts[valid], values, source, duration, sample)
    if sample is not None and sample.statuses is not None:
        _add_counted_statuses(facts, sample.statuses, f"{source}: status of every request")
    elif "status" in requests.columns:
        statuses = Statuses.of(requests["status"])
        failed = statuses.failed()
        if np.isfinite(failed).any():
            facts.add("requests.error_rate", float(np.nanmean(failed)), f"{source}: status")
            facts.add("requests.oom_count", statuses.count("oom"), f"{source}: status")
    if summary.slo_p99_ms:
        facts.add("slo.p99_ms", summary.slo_p99_ms, f"the P99 target given ({summary.slo_source})")
        facts.add("latency.p99_over_slo", summary.latency_ms["p99"] / summary.slo_p99_ms, cite)


@dataclass(frozen=True)
class Statuses:
    """The status column, read once per distinct value: a handful among a million requests."""

    codes: np.ndarray  # per request, the index of its status in ``words``; -1 where none was logged
    words: pd.Series  # the distinct statuses as lower-case text without spaces around it

    @classmethod
    def of(cls, status: pd.Series) -> Statuses:
        codes, distinct = status.factorize()
        return cls(codes, pd.Series(distinct).astype("string").str.strip().str.lower())

    def failed(self) -> np.ndarray:
        """Per request: 1.0 failed, 0.0 succeeded, NaN where none was logged.

        A status succeeds if it says so in words or is an HTTP code below 400.
        """
        words = self.words
        succeeded = words.isin(SUCCESS_WORDS) | words.str.fullmatch(SUCCESS_CODE).fillna(False)
        by_code = np.append((~succeeded).to_numpy(dtype="float64"), np.nan)  # code -1: the NaN at the end
        return by_code[self.codes]

    def count(self, word: str) -> int:
        """Requests whose status is ``word``."""
        matching = np.flatnonzero((self.words == word).to_numpy(dtype=bool, na_value=False))
        return int(np.isin(self.codes, matching).sum())


def _add_counted_statuses(facts: Facts, counts: pd.Series, cite: str) -> None:
    """The error rate and OOM count from each status's count over every request (a sample's table):
    an error one request in ten thousand makes is counted, not missed by the sample."""
    statuses = Statuses.of(pd.Series(counts.index, dtype="object"))
    failed, number = statuses.failed(), counts.to_numpy(dtype="float64")
    known = np.isfinite(failed)
    if known.any() and number[known].sum() > 0:
        facts.add(
            "requests.error_rate", float((failed[known] * number[known]).sum() / number[known].sum()), cite
        )
        oom = (statuses.words == "oom").to_numpy(dtype=bool, na_value=False)
        facts.add("requests.oom_count", int(number[oom[statuses.codes] & (statuses.codes >= 0)].sum()), cite)


def window_length(duration_s: float) -> float:
    """About 30 windows of a round length, never under a minute."""
    wanted = duration_s / _TARGET_WINDOWS
    for nice in _NICE_WINDOWS_S:
        if nice >= wanted:
            return float(max(nice, _MIN_WINDOW_S))
    return float(_NICE_WINDOWS_S[-1])


def _add_windows(
    facts: Facts,
    ts: np.ndarray,
    latency: np.ndarray,
    source: str,
    duration: float,
    sample: RequestSample | None,
) -> None:
    """Percentiles per window; rows are sorted by ts, so each window is a contiguous slice. A sample's
    windows count every request that arrived in them, and are judged solid by the requests sampled."""
    width = window_length(duration)
    start = np.floor(ts[0] / width) * width
    edges = start + width * np.arange(int((ts[-1] - start) // width) + 2)
    bounds = np.searchsorted(ts, edges)
    summary = facts.summary
    summary.window_s = width
    summary.windows = []
    read: list[int] = []  # the requests each window's percentiles come from
    for begin, lo, hi in zip(edges[:-1], bounds[:-1], bounds[1:], strict=True):
        if hi > lo:
            points = quantiles(latency[lo:hi], [p / 100 for p in PERCENTILES.values()])
            p50, p95, p99, p999 = map(float, points)
            arrived = int(hi - lo) if sample is None else sample.between(begin, begin + width - 1).total
            summary.windows.append(LatencyWindow(arrived, p50, p95, p99, p999, float(begin)))
            read.append(int(hi - lo))
    # Windows with too few requests have no meaningful P99; leave them out of the extremes.
    solid = [w.p99 for w, n in zip(summary.windows, read, strict=True) if n >= 100]
    solid = solid or [w.p99 for w in summary.windows]
    cite = f"{source}: latency_ms per {width:.0f} s window, {len(summary.windows)} windows"
    facts.add("latency.window_p99_max_ms", max(solid), cite)
    facts.add("latency.window_p99_min_ms", min(solid), cite)
