"""Change points: where a signal's level or trend changes and stays changed.

A spike that returns to its baseline is an episode (``episodes.py``); a
change point is lasting. Two models of a signal compete:

- piecewise constant, for level shifts: ruptures' ``KernelCPD`` with the
  linear kernel (the l2 cost, in C);
- piecewise linear, for changes of level or slope (memory that starts to
  grow, a rate that stops climbing): least-squares lines, found by an exact
  PELT search over segment costs taken from cumulative sums. ruptures'
  piecewise-linear costs fit every candidate segment by ``lstsq`` in Python;
  through its ``Pelt`` that took 4.8 s on 1,000 points here, this search
  about 13 ms for the same breakpoints.

Each model is searched with the MBIC-style penalty ``(p + 2) sigma^2 ln n``
per change, ``p`` the parameters a segment adds (1 for a level, 2 for a
line). ``sigma`` is the noise of the residuals within the segments found
(first the no-change fit, then at most twice the segmentation it leads to), inflated
by the long-run variance factor ``(1 + rho) / (1 - rho)`` of their lag-1
autocorrelation ``rho``: an autocorrelated or trending series wanders far
from a fitted level without any change point, and a white-noise penalty
would cut it into steps. Schwarz's criterion with the noise variance
profiled out, ``n ln(RSS / n) + k ln n`` (``k`` counting the same
penalties), picks the model: a staircase of level shifts on a ramp costs more
than the ramp. A signal that one level fits with white residuals (the usual
healthy signal) has no trend for lines to find, and skips their search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.detect.episodes import Episode
from diagnose.detect.robust import block_medians, noise_floor, robust_sigma
from diagnose.detect.segment import breakpoints
from diagnose.quantiles import median

SHIFT_BLOCK_S = 10.0  # change points are located to within this
MAX_CHANGE_POINT_POINTS = 500  # those of a day to within ~3 min
MIN_SEGMENT = 5  # samples between two change points (at least 2: a line needs two)
NOISE_PASSES = 2  # noise re-estimates from the segments found
WHITE_Z = 2.0  # lag-1 autocorrelation within 2 standard errors (1 / sqrt(n)) of 0: white noise


def change_points(
    values: np.ndarray, start: float, step: float, episodes: Sequence[Episode] = (), log_scale: bool = False
) -> list[float]:
    """Lasting changes of one signal, found on block medians with its episodes masked out.

    Masking keeps the edges of a spike from being counted as shifts.
    """
    if log_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.log(np.where(values > 0, values, np.nan))
    else:
        values = values.copy()
    for episode in episodes:
        a = max(0, int((episode.start - start) / step))
        values[a : int(np.ceil((episode.end - start) / step))] = np.nan
    if np.isfinite(values).sum() < 20:
        return []
    block = max(int(np.ceil(SHIFT_BLOCK_S / step)), -(-values.size // MAX_CHANGE_POINT_POINTS))
    coarse = block_medians(values, block)
    coarse = pd.Series(coarse).interpolate(limit_direction="both").to_numpy()
    if coarse.size < 10:
        return []
    return [float(start + b * block * step) for b in detect_shifts(coarse)]


def detect_shifts(
    series: np.ndarray,
    min_size: int = MIN_SEGMENT,
    models: Sequence[Model] | None = None,
    penalty_scale: float = 1.0,
) -> list[int]:
    """Change-point indices of a gap-free series, under whichever model fits it better.

    ``models`` (default: levels and lines) and ``penalty_scale`` (a factor on
    every change's penalty) are there for the benchmarks' ablation and
    sensitivity runs; the analysis uses the defaults.
    """
    if series.size < 2 * min_size:
        return []
    fits = []
    for model in models or (LEVELS, LINES):
        fit = _fit(series, model, min_size, penalty_scale)
        if not fit.breakpoints and fit.autocorrelation * np.sqrt(series.size) <= WHITE_Z:
            return []  # one level (or line) and white noise: nothing left for another model
        fits.append(fit)
    return min(fits, key=lambda fit: fit.criterion).breakpoints


@dataclass(frozen=True)
class Model:
    """A family of segment shapes: how to fit one segment, and how to search for breakpoints."""

    params: int  # parameters one segment adds
    residuals: Callable[[np.ndarray], np.ndarray]  # of the best fit of this shape to one segment
    search: Callable[[np.ndarray, float, int], list[int]]  # (series in noise units, penalty, min size)


@dataclass(frozen=True)
class Fit:
    breakpoints: list[int]
    criterion: float  # Schwarz's criterion, lower is better
    autocorrelation: float  # lag-1, of the residuals within the segments


def _fit(series: np.ndarray, model: Model, min_size: int, penalty_scale: float) -> Fit:
    per_change = penalty_scale * (model.params + 2)
    sigma = noise_floor(robust_sigma(model.residuals(series)), series)
    breakpoints = _search(series, sigma, model, min_size, per_change)
    parts = _segment_residuals(series, breakpoints, model)
    for _ in range(NOISE_PASSES):
        rho = _lag1_autocorrelation(parts)
        sigma = noise_floor(robust_sigma(np.concatenate(parts)), series) * np.sqrt((1 + rho) / (1 - rho))
        again = _search(series, sigma, model, min_size, per_change)
        if again == breakpoints:  # the noise estimate depends only on them: a fixed point
            break
        breakpoints = again
        parts = _segment_residuals(series, breakpoints, model)
    n = series.size
    rss = sum(float(np.dot(part, part)) for part in parts)
    k = model.params + len(breakpoints) * per_change
    criterion = n * np.log(max(rss, 1e-300) / n) + k * np.log(n)
    return Fit(breakpoints, float(criterion), _lag1_autocorrelation(parts))


def _search(series: np.ndarray, sigma: float, model: Model, min_size: int, per_change: float) -> list[int]:
    scaled = (series - median(series)) / sigma
    return model.search(scaled, per_change * np.log(series.size), min_size)


def _segment_residuals(series: np.ndarray, breakpoints: list[int], model: Model) -> list[np.ndarray]:
    edges = [0, *breakpoints, series.size]
    return [model.residuals(series[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _lag1_autocorrelation(parts: list[np.ndarray]) -> float:
    """Pooled lag-1 autocorrelation of residuals, clipped to [0, 0.95]."""
    numerator = sum(float(np.dot(p[1:], p[:-1])) for p in parts if p.size > 2)
    denominator = sum(float(np.dot(p, p)) for p in parts if p.size > 2)
    rho = numerator / denominator if denominator > 0 else 0.0
    return float(np.clip(rho, 0.0, 0.95))


def _level_residuals(segment: np.ndarray) -> np.ndarray:
    return segment - segment.mean()


def _line_residuals(segment: np.ndarray) -> np.ndarray:
    t = np.arange(segment.size) - (segment.size - 1) / 2
    y = segment - segment.mean()
    tt = float(np.dot(t, t))
    return y - t * (float(np.dot(t, y)) / tt) if tt > 0 else y


def _level_search(scaled: np.ndarray, penalty: float, min_size: int) -> list[int]:
    bkps = breakpoints(scaled, min_size, penalty)
    return [int(b) for b in bkps[:-1]]


def _line_search(y: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Exact PELT over least-squares line segments, ``min_size`` ends at a time.

    A segment's residual sum of squares comes in O(1) from cumulative sums of
    y, ty and y^2 (the spread of t over k consecutive samples is always
    k(k^2 - 1)/12). Every end t in [T, T + min_size) can only start its last
    segment at s <= t - min_size < T, whose optimal costs are all known: so
    each pass fills ``min_size`` ends with one matrix of candidate costs.
    Pruning is PELT's (a start that cannot beat the best at one end never
    will), valid because splitting a segment never raises its cost.
    """
    n = y.size
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2  # centred: smaller sums, less cancellation
    sums = np.zeros((3, n + 1))
    np.cumsum(np.vstack((y, t * y, y * y)), axis=1, out=sums[:, 1:])
    length = np.arange(n + 1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        per_length = 1 / length  # for the mean of y
        per_spread = 12 / (length * (length * length - 1))  # for the slope: 1 / sum (t - mean t)^2
    per_spread[length < min_size] = np.nan  # never a segment
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    previous = np.zeros(n + 1, dtype=np.int64)
    starts = np.zeros(1, dtype=np.int64)
    for first in range(min_size, n + 1, min_size):
        ends = np.arange(first, min(first + min_size, n + 1))
        k = np.subtract.outer(ends, starts)
        sy, sty, syy = (np.subtract.outer(column[ends], column[starts]) for column in sums)
        cov = sty - (np.add.outer(ends, starts) - n) * 0.5 * sy
        total = syy - sy * sy * per_length[k] - cov * cov * per_spread[k] + best[starts]
        too_short = np.isnan(total)
        total[too_short] = np.inf
        choice = np.argmin(total, axis=1)
        best[ends] = total[np.arange(ends.size), choice] + penalty
        previous[ends] = starts[choice]
        beaten = total > best[ends][:, None]
        beaten[too_short] = False
        starts = np.concatenate((starts[~beaten.any(axis=0)], ends))
    breakpoints = []
    end = n
    while end > 0:
        end = int(previous[end])
        if end > 0:
            breakpoints.append(end)
    return sorted(breakpoints)


LEVELS = Model(1, _level_residuals, _level_search)
LINES = Model(2, _line_residuals, _line_search)
