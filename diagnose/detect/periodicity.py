"""Do a signal's episodes recur with a regular period, or come at random?

The period is fitted to the gaps between episode starts, allowing a gap to
span several periods (an episode missed in noise or a hole in the data):
``P0`` is the median gap, each gap ``d`` is taken as ``k = round(d / P0)``
periods, and ``P = sum(d) / sum(k)``. The jitter is the robust spread (MAD) of
the gaps' residuals ``d - kP``.

The test: under the null hypothesis that the same number of episodes fell at
uniformly random times over the same span (which is what Poisson bursts look
like, given their count), the relative jitter ``jitter / P`` would be about
0.37. Its distribution is simulated with the same estimator (Monte Carlo), and
the p-value is the share of random draws at least as regular as what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_OCCURRENCES = 4
ALPHA = 0.01
MAX_RELATIVE_JITTER = 0.15
SIMULATIONS = 999


@dataclass(frozen=True)
class Periodicity:
    period_s: float
    jitter_s: float
    occurrences: int
    p_value: float

    @property
    def periodic(self) -> bool:
        return self.p_value < ALPHA and self.jitter_s <= MAX_RELATIVE_JITTER * self.period_s


def periodicity(starts: np.ndarray, span: tuple[float, float], seed: int = 0) -> Periodicity | None:
    starts = np.sort(np.asarray(starts, dtype="float64"))
    if starts.size < MIN_OCCURRENCES:
        return None
    period, jitter = _fit(starts[None, :])
    if not np.isfinite(period[0]) or period[0] <= 0:
        return None
    observed = jitter[0] / period[0]
    rng = np.random.default_rng(seed)
    random_starts = np.sort(rng.uniform(span[0], span[1], (SIMULATIONS, starts.size)), axis=1)
    null_period, null_jitter = _fit(random_starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        null = null_jitter / null_period
    as_regular = int(np.sum(null <= observed))
    p_value = (1 + as_regular) / (1 + SIMULATIONS)
    return Periodicity(float(period[0]), float(jitter[0]), int(starts.size), float(p_value))


def _fit(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Period and jitter for each row of sorted start times, vectorised over rows."""
    gaps = np.diff(starts, axis=1)
    first = np.median(gaps, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        multiples = np.maximum(1, np.round(gaps / first))
        period = gaps.sum(axis=1) / multiples.sum(axis=1)
        residual = gaps - multiples * period[:, None]
    spread = np.median(np.abs(residual - np.median(residual, axis=1, keepdims=True)), axis=1)
    return period, 1.4826 * spread
