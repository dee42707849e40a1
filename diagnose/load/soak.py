"""Is the service stable near its knee? The soak judged: a system that survives the peak but falls over
after ten minutes is of no use.

The soak is first measured as one stage (curve.py): it must keep up, fail few requests and build no
backlog. Then, over its windows:

- **drift**: the P99 of each window, its trend by Theil-Sen on the log (so a change is relative); the
  soak drifts when the interval of the change over the whole soak lies above ``DRIFT``;
- **stalls**: episodes of the per-second latency (the project's episode detector, ruptures at its
  core) at least ``STALL_FACTOR`` times their baseline, and whether they recur with a period;
- **memory**: the server's resident memory, where its ``/metrics`` says it
  (``process_resident_memory_bytes``), growing over the soak's second half by at least ``GROWTH``
  of its level with an interval above zero: a leak, or a cache still filling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.detect.episodes import Episode, find_episodes
from diagnose.detect.periodicity import Periodicity, periodicity
from diagnose.load.curve import Figure, StageResult, theil_sen
from diagnose.quantiles import quantiles

DRIFT = 0.25  # P99 up a quarter over the soak
STALL_FACTOR = 2.0
MIN_STALLS = 2  # one slow moment in ten minutes is a hiccup; two are a pattern to say
GROWTH = 0.01
WINDOWS = 30
MIN_WINDOW_S = 10.0


@dataclass(frozen=True)
class Soak:
    result: StageResult
    windows: pd.DataFrame  # start (s into the soak), p50_ms, p99_ms, sent, failed
    p99_change: Figure  # relative change of P99 over the soak, from its trend
    stalls: list[Episode]
    period: Periodicity | None
    memory_growth: Figure  # relative growth of the server's memory over the second half (nan: unread)
    memory_source: str
    started: float  # epoch seconds: the stalls' times are epoch seconds too

    @property
    def reasons(self) -> list[str]:
        """Why the soak is unstable; empty when it is stable."""
        found = []
        behind = self.result.falls_behind()
        if behind:
            found.append(f"it did not keep up: {behind}")
        if self.p99_change.low > DRIFT:
            found.append(
                f"P99 drifted up {self.p99_change.value:+.0%} over the soak "
                f"(interval {self.p99_change.low:+.0%} to {self.p99_change.high:+.0%})"
            )
        if len(self.stalls) >= MIN_STALLS:
            found.append(self._stall_text())
        if self.memory_growth.low > 0 and self.memory_growth.value >= GROWTH:
            found.append(
                f"the server's memory grew {self.memory_growth.value:+.1%} over the soak's second half "
                f"({self.memory_source}): a leak, or a cache still filling"
            )
        return found

    @property
    def stable(self) -> bool:
        return not self.reasons

    def _stall_text(self) -> str:
        worst = max(self.stalls, key=lambda e: e.peak / e.baseline if e.baseline > 0 else 0)
        text = (
            f"{len(self.stalls)} stalls: latency up to {worst.peak:,.0f} ms against {worst.baseline:,.0f} ms "
            f"around them, {sum(e.duration for e in self.stalls):.0f} s in all"
        )
        if self.period is not None and self.period.periodic:
            text += f", every {self.period.period_s:.0f} s (±{self.period.jitter_s:.1f} s)"
        return text


def judge_soak(
    result: StageResult, rows: pd.DataFrame, started: float, memory: pd.DataFrame | None = None
) -> Soak:
    """The soak's verdict from its requests (``rows``, the engine's columns) and, where read, the
    server's memory (``memory``: ts, rss_bytes, source)."""
    duration = result.stage.duration_s
    good = rows[rows["status"] == "ok"].sort_values("ts")
    windows = _windows(rows, started, duration)
    change = _p99_change(windows, duration)
    stalls = _stalls(good, started, duration)
    period = (
        periodicity(np.array([e.start for e in stalls]), (started, started + duration)) if stalls else None
    )
    growth, source = _memory_growth(memory, started, duration)
    return Soak(result, windows, change, stalls, period, growth, source, started)


def _windows(rows: pd.DataFrame, started: float, duration: float) -> pd.DataFrame:
    width = max(MIN_WINDOW_S, duration / WINDOWS)
    index = ((rows["ts"] - started) // width).clip(lower=0).astype(int)
    out = []
    for number, part in rows.groupby(index):
        latency = part.loc[part["status"] == "ok", "latency_ms"].to_numpy(dtype="float64")
        p50, p99 = quantiles(latency, [0.5, 0.99]) if latency.size else (math.nan, math.nan)
        failed = int((part["status"] != "ok").sum())
        out.append((number * width, float(p50), float(p99), len(part), failed))
    return pd.DataFrame(out, columns=["start_s", "p50_ms", "p99_ms", "sent", "failed"])


def _p99_change(windows: pd.DataFrame, duration: float) -> Figure:
    usable = windows[np.isfinite(windows["p99_ms"]) & (windows["p99_ms"] > 0)]
    if len(usable) < 5:
        return Figure(math.nan)
    slope = theil_sen(usable["start_s"].to_numpy(dtype="float64"), np.log(usable["p99_ms"].to_numpy()))
    return Figure(*(math.expm1(value * duration) for value in (slope.value, slope.low, slope.high)))


def _stalls(good: pd.DataFrame, started: float, duration: float) -> list[Episode]:
    """Upward episodes of the slowest latency sent in each second, at least STALL_FACTOR their level."""
    seconds = int(duration)
    if seconds < 30 or good.empty:
        return []
    second = ((good["ts"] - started) // 1).astype(int)
    inside = (second >= 0) & (second < seconds)
    per_second = np.full(seconds, np.nan)
    slowest = good.loc[inside, "latency_ms"].groupby(second[inside]).max()
    per_second[slowest.index.to_numpy()] = slowest.to_numpy()
    found = find_episodes(per_second, started, 1.0, log_scale=True)
    return [e for e in found if e.direction > 0 and e.peak >= STALL_FACTOR * e.baseline]


def _memory_growth(memory: pd.DataFrame | None, started: float, duration: float) -> tuple[Figure, str]:
    if memory is None or memory.empty:
        return Figure(math.nan), ""
    source = str(memory["source"].iloc[0])
    second_half = memory[memory["ts"] >= started + duration / 2]
    if len(second_half) < 5:
        return Figure(math.nan), source
    level = float(np.median(second_half["rss_bytes"]))
    slope = theil_sen(
        second_half["ts"].to_numpy(dtype="float64"), second_half["rss_bytes"].to_numpy(dtype="float64")
    )
    span = duration / 2
    growth = Figure(*(value * span / level for value in (slope.value, slope.low, slope.high)))
    return growth, source
