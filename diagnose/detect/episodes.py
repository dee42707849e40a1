"""Episodes of one signal: where it departs from its baseline and returns.

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

Lasting changes (change points) are ``shifts.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.detect.robust import (
    block_medians,
    centred_moving_median,
    difference_sigma,
    noise_floor,
    resolution,
    robust_sigma,
)
from diagnose.detect.segment import breakpoints
from diagnose.quantiles import median

Z_SCREEN = 3.5  # a sample this many noise units off the baseline starts a candidate
Z_SEGMENT = 2.5  # a segment whose level (see _level) is this far off is the core of an episode
Z_EXTEND = 2.0  # neighbouring segments this far off extend it (a decaying tail)
MIN_CORE_SAMPLES = 3  # a level needs three samples; two can be one outlier and a neighbour
WHITE_NOISE_RATIO = 0.6  # difference-based noise >= this x the MAD: the noise is white
PENALTY = 2.0  # x sigma^2 x ln(n): the BIC-style penalty of the l2 cost, for episode edges
BASELINE_S = 300.0  # the baseline follows changes slower than this
MIN_BASELINE_SAMPLES = 50  # and is a median of at least this many samples (coarse data)
MERGE_GAP_S = 3.0
MIN_EPISODE_S = 3.0


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


def baseline(values: np.ndarray, step: float) -> np.ndarray:
    """Rolling median of block medians, interpolated back to every sample."""
    n = values.size
    window = max(MIN_BASELINE_SAMPLES, int(BASELINE_S / step))
    block = max(1, window // 50)  # short blocks: an episode must not fill a block
    blocks = block_medians(values, block)
    medians = pd.Series(centred_moving_median(blocks, max(3, window // block) | 1))
    level = medians.interpolate(limit_direction="both").to_numpy()
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
    # One step of a quantised signal is its grain, not noise that an episode may stand out from by
    # chance: a whole degree, a clock tick of CPU time, one more request running.
    sigma = max(noise_floor(_noise_sigma(residual), work), resolution(work))
    z = residual / sigma
    gap = max(1, int(round(MERGE_GAP_S / step)))
    minimum = max(2, int(np.ceil(MIN_EPISODE_S / step)))
    reference = np.exp(level) if log_scale else level
    episodes: list[Episode] = []
    for direction in (1, -1):
        oriented = direction * z  # NaN compares False: a gap is never flagged
        regions = _regions(oriented > Z_SCREEN, gap)
        spans = [_segment(oriented, lo, hi) for lo, hi in _can_hold_core(oriented, regions)]
        for a, b in _merge([s for s in spans if s is not None], gap):
            if b - a < minimum:
                continue
            inside = values[a:b]
            peak = np.nanmax(inside) if direction > 0 else np.nanmin(inside)
            levels = reference[a:b]
            episodes.append(
                Episode(
                    float(start + a * step),
                    float(start + b * step),
                    float(peak),
                    median(levels[np.isfinite(levels)]),
                    direction,
                )
            )
    return sorted(episodes, key=lambda e: e.start)


def _can_hold_core(z: np.ndarray, regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The candidates that pass a cheap necessary condition for an episode core, checked before ruptures.

    A core is MIN_CORE_SAMPLES samples whose level, without their largest
    value, is at least Z_SEGMENT: so at least two samples near the candidate
    reach Z_SEGMENT. A lone outlier cannot, and is dropped here.
    """
    if not regions:
        return []
    high = np.concatenate(([0], np.cumsum(z >= Z_SEGMENT)))
    bounds = np.array(regions)
    near = (
        high[np.minimum(bounds[:, 1] + MIN_CORE_SAMPLES, z.size)]
        - high[np.maximum(bounds[:, 0] - MIN_CORE_SAMPLES, 0)]
    )
    return [region for region, count in zip(regions, near.tolist(), strict=True) if count >= 2]


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
    finite = residual[np.isfinite(residual)]
    sigma = robust_sigma(finite)
    centre = median(finite) if finite.size else 0.0
    for _ in range(2):
        if sigma <= 0:
            break
        sigma = robust_sigma(finite[np.abs(finite - centre) <= 3 * sigma])
    stepwise = difference_sigma(residual)
    return stepwise if stepwise >= WHITE_NOISE_RATIO * sigma else sigma


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
    window = _filled(z[a:b])
    if window is None or window.size < 4:
        return None
    penalty = PENALTY * np.log(window.size)  # z is in noise units: sigma^2 = 1
    bkps = breakpoints(window, MIN_CORE_SAMPLES, penalty)
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


def _filled(window: np.ndarray) -> np.ndarray | None:
    """Gaps filled by linear interpolation (held flat at the ends); None when nothing is finite."""
    finite = np.isfinite(window)
    if finite.all():
        return window
    if not finite.any():
        return None
    index = np.arange(window.size)
    return np.interp(index, index[finite], window[finite])


def _level(segment: np.ndarray) -> float:
    """A segment's level, robust to one outlier: the mean without its largest value."""
    if segment.size <= 2:
        return float(segment.min())
    return float((segment.sum() - segment.max()) / (segment.size - 1))
