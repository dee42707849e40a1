"""Robust noise scales and block medians, shared by the episode and change-point searches.

Both searches state their thresholds in units of the signal's own noise, so
the noise scale must not be inflated by the very spikes and shifts they look
for: medians and MADs throughout, never means and standard deviations.
"""

from __future__ import annotations

import bottleneck as bn
import numpy as np

from diagnose.quantiles import median, quantiles

SIGMA_SAMPLE = 20_000


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
    return float(1.4826 * median(np.abs(finite - median(finite))))


def difference_sigma(values: np.ndarray) -> float:
    """Noise scale from first differences: unmoved by level shifts and slow drifts."""
    finite = values[np.isfinite(values)]
    if finite.size < 3:
        return 0.0
    return robust_sigma(np.diff(finite)) / np.sqrt(2)


def noise_floor(sigma: float, values: np.ndarray) -> float:
    """A flat signal (a process absent most of the time: exactly 0) has sigma 0.

    Then a move of 0.1 % of the signal's typical magnitude is the smallest that
    counts, where the magnitude is its median, or its 99th percentile when the
    median is 0.
    """
    finite = np.abs(values[np.isfinite(values)])
    if finite.size > SIGMA_SAMPLE:
        finite = finite[:: finite.size // SIGMA_SAMPLE]
    scale = max(quantiles(finite, (0.5, 0.99))) if finite.size else 0.0
    return max(sigma, 0.001 * scale, 1e-9)


MIN_LEVELS = 4  # fewer distinct values are a few states (a step between two levels), not a quantised scale


def resolution(values: np.ndarray) -> float:
    """The step of a quantised signal: the median gap between its distinct values, else 0.

    A temperature in whole degrees, CPU time counted in clock ticks, a count of
    running requests: a move of one step is the measurement's grain, not an
    event. A continuous signal's distinct values lie close together, and its
    resolution is negligible against its noise; a signal of fewer than
    MIN_LEVELS distinct values is a few states, whose steps are the events.
    """
    finite = values[np.isfinite(values)]
    if finite.size > SIGMA_SAMPLE:
        finite = finite[:: finite.size // SIGMA_SAMPLE]
    levels = np.unique(finite)
    if levels.size < MIN_LEVELS:
        return 0.0
    return float(np.median(np.diff(levels)))


def block_medians(values: np.ndarray, block: int) -> np.ndarray:
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


def centred_moving_median(values: np.ndarray, window: int) -> np.ndarray:
    """Median of the ``window`` (odd) samples centred on each one, ignoring NaN; near the ends, of those
    there are. What pandas' ``rolling(window, center=True, min_periods=1).median()`` gives, from
    bottleneck's double-heap moving median: five times faster on a day of 1 Hz block medians.
    """
    values = np.asarray(values, dtype="float64")
    half = window // 2
    if values.size <= half:  # every window holds them all
        finite = values[np.isfinite(values)]
        return np.full(values.size, np.median(finite) if finite.size else np.nan)
    padded = np.concatenate((values, np.full(half, np.nan)))
    return bn.move_median(padded, window, min_count=1)[half:]
