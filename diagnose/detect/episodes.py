"""Episodes and change points in one signal, with ruptures doing the segmentation.

Running ruptures' PELT over a whole day at 1 Hz costs tens of seconds per
signal, so detection is two-staged:

1. Screening (linear time): a robust baseline (rolling median of block
   medians, long enough that short episodes do not move it) and a robust noise
   scale (MAD of the residual) flag samples more than ``Z_SCREEN`` noise units
   off the baseline; flagged samples a few seconds apart form a candidate.
2. Segmentation: ruptures' ``KernelCPD(kernel="linear")`` (the l2 cost,
   implemented in C) with a penalty proportional to the signal's own noise
   variance, ``PENALTY * sigma^2 * ln(n)``, segments a window around each
   candidate; the segments whose mean departs from the baseline form the
   episode, with exact start and end.

Persistent level shifts (change points) are found by the same ruptures search
on block medians of the signal with its episodes masked out, so the edges of
a spike are not counted as shifts. Their penalty is ``SHIFT_PENALTY * ln(n)``
in noise units (the MBIC-style 3 ln n: a level shift must hold for a while).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import ruptures as rpt

Z_SCREEN = 3.5  # a sample this many noise units off the baseline starts a candidate
Z_SEGMENT = 2.5  # a segment whose level (see _level) is this far off is the core of an episode
Z_EXTEND = 2.0  # neighbouring segments this far off extend it (a decaying tail)
MIN_CORE_SAMPLES = 3  # a level needs three samples; two can be one outlier and a neighbour
WHITE_NOISE_RATIO = 0.6  # difference-based noise >= this x the MAD: the noise is white
PENALTY = 2.0  # x sigma^2 x ln(n): the BIC-style penalty of the l2 cost, for episode edges
SHIFT_PENALTY = 3.0  # x sigma^2 x ln(n): MBIC-style, for persistent level shifts
SHIFT_BLOCK_S = 10.0  # level shifts are located to within this
BASELINE_S = 300.0  # the baseline follows changes slower than this
MIN_BASELINE_SAMPLES = 50  # and is a median of at least this many samples (coarse data)
MERGE_GAP_S = 3.0
MIN_EPISODE_S = 3.0
MAX_CHANGE_POINT_POINTS = 1000  # level shifts of a day are located to within ~90 s
SIGMA_SAMPLE = 20_000


@dataclass(frozen=True)
class Episode:
    start: float  # epoch seconds
    end: float
    peak: float
    baseline: float
    direction: int  # +1 above the baseline, -1 below

    @property
    def duration(self) -> float:
        return self.end - self.start


def robust_sigma(values: np.ndarray) -> float:
    """Noise scale: 1.4826 x the median absolute deviation, ignoring NaN.

    Above SIGMA_SAMPLE values an evenly strided subset is used: the MAD of
    20,000 samples is within about 1 % of the full one, at a fraction of the cost.
    """
    finite = values[np.isfinite(values)]
    if finite.size > SIGMA_SAMPLE:
        finite = finite[:: finite.size // SIGMA_SAMPLE]
    if finite.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(finite - np.median(finite))))


def difference_sigma(values: np.ndarray) -> float:
    """Noise scale from first differences: unmoved by level shifts and slow drifts."""
    finite = values[np.isfinite(values)]
    if finite.size < 3:
        return 0.0
    return robust_sigma(np.diff(finite)) / np.sqrt(2)


def baseline(values: np.ndarray, step: float) -> np.ndarray:
    """Rolling median of block medians, interpolated back to every sample."""
    n = values.size
    window = max(MIN_BASELINE_SAMPLES, int(BASELINE_S / step))
    block = max(1, window // 50)  # short blocks: an episode must not fill a block
    blocks = pd.Series(_block_medians(values, block))
    level = blocks.rolling(max(3, window // block) | 1, center=True, min_periods=1).median()
    level = level.interpolate(limit_direction="both").to_numpy()
    centres = np.arange(level.size) * block + (block - 1) / 2
    return np.interp(np.arange(n), centres, level)


def find_episodes(values: np.ndarray, start: float, step: float, log_scale: bool = False) -> list[Episode]:
    """Episodes of one signal. ``log_scale`` suits positive, multiplicative-noise signals (latency)."""
    if np.isfinite(values).sum() < 10:
        return []
    if log_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            work = np.log(np.where(values > 0, values, np.nan))
    else:
        work = values
    level = baseline(work, step)
    residual = work - level
    sigma = _noise_floor(_noise_sigma(residual), work)
    z = residual / sigma
    gap = max(1, int(round(MERGE_GAP_S / step)))
    minimum = max(2, int(np.ceil(MIN_EPISODE_S / step)))
    reference = np.exp(level) if log_scale else level
    episodes: list[Episode] = []
    for direction in (1, -1):
        flagged = np.nan_to_num(direction * z, nan=-np.inf) > Z_SCREEN
        oriented = direction * z
        spans = [
            _segment(oriented, lo, hi)
            for lo, hi in _regions(flagged, gap)
            if _can_hold_core(oriented, lo, hi)
        ]
        for a, b in _merge([s for s in spans if s is not None], gap):
            if b - a < minimum:
                continue
            inside = values[a:b]
            peak = np.nanmax(inside) if direction > 0 else np.nanmin(inside)
            episodes.append(
                Episode(
                    float(start + a * step),
                    float(start + b * step),
                    float(peak),
                    float(np.nanmedian(reference[a:b])),
                    direction,
                )
            )
    return sorted(episodes, key=lambda e: e.start)


def _can_hold_core(z: np.ndarray, lo: int, hi: int) -> bool:
    """Cheap necessary condition for an episode core near a candidate, checked before ruptures.

    A core is MIN_CORE_SAMPLES samples whose level, without their largest
    value, is at least Z_SEGMENT: so at least two samples near the candidate
    reach Z_SEGMENT. A lone outlier cannot, and is dropped here.
    """
    near = z[max(0, lo - MIN_CORE_SAMPLES) : hi + MIN_CORE_SAMPLES]
    return int(np.sum(np.nan_to_num(near, nan=-np.inf) >= Z_SEGMENT)) >= 2


def _merge(spans: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Join spans that overlap or nearly touch: one episode can be screened as several candidates."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _noise_sigma(residual: np.ndarray) -> float:
    """Noise scale of the residual, robust to episodes that fill much of the signal.

    The MAD of the residual, re-estimated without samples beyond 3 sigma, still
    grows when episodes fill a quarter of the signal. The MAD of first
    differences does not (an episode adds only its two edges), but it
    underestimates the noise of a smooth, autocorrelated signal. So: the
    difference estimate where the noise looks white (the two agree within a
    factor WHITE_NOISE_RATIO), else the clipped MAD.
    """
    sigma = robust_sigma(residual)
    for _ in range(2):
        if sigma <= 0:
            break
        keep = np.abs(residual - np.nanmedian(residual)) <= 3 * sigma
        sigma = robust_sigma(residual[keep])
    stepwise = difference_sigma(residual)
    return stepwise if stepwise >= WHITE_NOISE_RATIO * sigma else sigma


def _block_medians(values: np.ndarray, block: int) -> np.ndarray:
    """Median of each block of ``block`` samples, ignoring NaN; NaN for a block with no sample.

    Vectorised by sorting each block (NaN sort last) and indexing the middle of
    its finite values: numpy's nanmedian loops over rows here.
    """
    padded = np.full(-(-values.size // block) * block, np.nan)
    padded[: values.size] = values
    rows = np.sort(padded.reshape(-1, block), axis=1)
    count = np.isfinite(rows).sum(axis=1)
    index = np.arange(rows.shape[0])
    low = rows[index, np.maximum((count - 1) // 2, 0)]
    high = rows[index, np.maximum(count // 2, 0)]
    return np.where(count > 0, (low + high) / 2, np.nan)


def _regions(flagged: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """Runs of flagged samples, joined across gaps of at most ``gap`` samples."""
    index = np.flatnonzero(flagged)
    if index.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(index) > gap + 1)
    starts = np.concatenate(([index[0]], index[breaks + 1]))
    ends = np.concatenate((index[breaks], [index[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _segment(z: np.ndarray, lo: int, hi: int) -> tuple[int, int] | None:
    """Exact episode bounds: ruptures segments a window around the candidate."""
    margin = max(hi - lo, 10)
    a, b = max(0, lo - margin), min(z.size, hi + margin)
    window = pd.Series(z[a:b]).interpolate(limit_direction="both").to_numpy()
    if not np.isfinite(window).all() or window.size < 4:
        return None
    penalty = PENALTY * np.log(window.size)  # z is in noise units: sigma^2 = 1
    bkps = rpt.KernelCPD(kernel="linear", min_size=MIN_CORE_SAMPLES).fit(window).predict(pen=penalty)
    edges = [0, *bkps]
    segments = list(zip(edges[:-1], edges[1:], strict=True))
    means = [_level(window[s:e]) for s, e in segments]
    cores = [
        i
        for i, (s, e) in enumerate(segments)
        if means[i] >= Z_SEGMENT and e - s >= MIN_CORE_SAMPLES and e > lo - a and s < hi - a
    ]
    if not cores:
        return None
    first, last = cores[0], cores[-1]
    if any(means[i] < Z_EXTEND for i in range(first, last + 1)):
        # Two cores with a return to baseline between them: keep the larger one.
        first = last = max(cores, key=lambda i: (segments[i][1] - segments[i][0]) * means[i])
    while first > 0 and means[first - 1] >= Z_EXTEND:
        first -= 1
    while last < len(segments) - 1 and means[last + 1] >= Z_EXTEND:
        last += 1
    return a + segments[first][0], a + segments[last][1]


def _level(segment: np.ndarray) -> float:
    """A segment's level, robust to one outlier: the mean without its largest value."""
    if segment.size <= 2:
        return float(segment.min())
    return float((segment.sum() - segment.max()) / (segment.size - 1))


def _noise_floor(sigma: float, values: np.ndarray) -> float:
    """A flat signal (a process absent most of the time: exactly 0) has sigma 0.

    Then a move of 0.1 % of the signal's typical magnitude is the smallest that
    counts, where the magnitude is its median, or its 99th percentile when the
    median is 0.
    """
    finite = np.abs(values[np.isfinite(values)])
    if finite.size > SIGMA_SAMPLE:
        finite = finite[:: finite.size // SIGMA_SAMPLE]
    scale = max(np.percentile(finite, [50, 99])) if finite.size else 0.0
    return max(sigma, 0.001 * scale, 1e-9)


def change_points(
    values: np.ndarray, start: float, step: float, episodes: Sequence[Episode] = (), log_scale: bool = False
) -> list[float]:
    """Persistent level shifts, found by ruptures on block medians, episodes masked out."""
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
    coarse = _block_medians(values, block)
    coarse = pd.Series(coarse).interpolate(limit_direction="both").to_numpy()
    if coarse.size < 10:
        return []
    bkps = detect_shifts(coarse)
    return [float(start + b * block * step) for b in bkps]


def detect_shifts(series: np.ndarray, min_size: int = 5, penalty_factor: float = SHIFT_PENALTY) -> list[int]:
    """Change-point indices of a gap-free series: ruptures' l2 search, penalty in noise units.

    The noise scale is re-estimated twice from the residuals within the
    segments found so far, and inflated by the long-run variance factor
    (1 + rho) / (1 - rho) of their lag-1 autocorrelation rho: an
    autocorrelated or trending series wanders far from its mean without any
    change point, and a white-noise penalty would cut it into many steps.
    """
    sigma = _noise_floor(robust_sigma(series), series)
    bkps = _l2_search(series, sigma, penalty_factor, min_size)
    for _ in range(2):
        edges = [0, *bkps, series.size]
        parts = [series[a:b] - series[a:b].mean() for a, b in zip(edges[:-1], edges[1:], strict=True)]
        rho = _lag1_autocorrelation(parts)
        sigma = _noise_floor(robust_sigma(np.concatenate(parts)), series) * np.sqrt((1 + rho) / (1 - rho))
        bkps = _l2_search(series, sigma, penalty_factor, min_size)
    return bkps


def _l2_search(series: np.ndarray, sigma: float, penalty_factor: float, min_size: int) -> list[int]:
    scaled = (series - np.median(series)) / sigma
    penalty = penalty_factor * np.log(series.size)
    bkps = rpt.KernelCPD(kernel="linear", min_size=min_size).fit(scaled).predict(pen=penalty)
    return [int(b) for b in bkps[:-1]]


def _lag1_autocorrelation(parts: list[np.ndarray]) -> float:
    """Pooled lag-1 autocorrelation of residuals, clipped to [0, 0.95]."""
    numerator = sum(float(np.dot(p[1:], p[:-1])) for p in parts if p.size > 2)
    denominator = sum(float(np.dot(p, p)) for p in parts if p.size > 2)
    rho = numerator / denominator if denominator > 0 else 0.0
    return float(np.clip(rho, 0.0, 0.95))
