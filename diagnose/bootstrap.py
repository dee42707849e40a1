"""Confidence intervals from time-correlated samples: a block bootstrap over time.

Used for a change between two recordings (diagnose compare) and for a counterfactual on one
(diagnose/gain: the latency without a cause's requests).

Requests (or samples) close in time are not independent: a slow minute makes
many slow requests. Resampling single requests would then give intervals far
too narrow. Each side is cut into consecutive time blocks (as long as the
side's own autocorrelation asks, by Politis and White's rule, and at least
``MIN_BLOCK_S``; ``MIN_BLOCKS`` to ``MAX_BLOCKS`` of them) and whole blocks are
resampled with replacement (the non-overlapping block bootstrap),
each side independently, ``REPLICATES`` times.

Such a bootstrap is too narrow in two known ways, and each side's replicates
are widened about the point estimate by both (in log space for positive
figures): resampling whole blocks ignores how neighbouring blocks are alike,
which shrinks the variance by about ``G / (L sigma^2)`` (``L`` the block
length; ``G`` and ``sigma^2`` the same autocovariance sums Politis and White's
rule reads; Lahiri 2003, ch. 3), and with ten or twenty blocks the spread of
block means is itself uncertain, as a t distribution says and a normal one does
not (Hesterberg's expanded percentile interval: ``sqrt(b / (b - 1)) t_{b-1}``
over ``z``). Measured on simulated pairs (benchmarks/bench_compare_coverage.py),
95 % intervals held the true change 82-87 % of the time without them where a
slow spell lasts 10 s of a 300 s recording, 88-94 % with them (the P99.9 lowest).

A million requests resampled a thousand times would be slow, so a side is held
as one histogram per block on a fine grid spanning its values (log-spaced when
they are all positive); a replicate's distribution is a weighted sum of its blocks'
histograms, one matrix product for all replicates, and a quantile is read from
it by interpolation within a bin. The grid's discretisation is removed by
centring each replicate on the same statistic of the unresampled histogram; the
point estimate itself is always computed from the raw values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from statistics import NormalDist

import numpy as np

from diagnose.quantiles import quantiles

REPLICATES = 1000
LEVEL = 0.95
MIN_BLOCK_S = 10.0
MIN_BLOCKS = 10
MAX_BLOCKS = 100
MAX_VARIANCE_BIAS = 0.5  # blocks this short against the memory are widened no further (x1.41)
_BINS = 2048
_SEED = 20261202  # fixed: the same dumps always give the same intervals


@dataclass(frozen=True)
class Blocks:
    """Which time block each sample is in, and how long a block is."""

    index: np.ndarray  # int, one per sample
    count: int
    seconds: float
    memory_s: float = 0.0  # G / sigma^2 of the series the length was chosen on (0: not estimated)

    @property
    def method(self) -> str:
        return (
            f"block bootstrap over time ({self.count} blocks of {self.seconds:,.0f} s, "
            f"{REPLICATES} replicates, {LEVEL:.0%} interval widened x{self.widening:.2f} "
            "for few, correlated blocks)"
        )

    @property
    def widening(self) -> float:
        """By how much the replicates' spread is widened (see the module's note)."""
        if self.count < 2:
            return 1.0
        bias = min(self.memory_s / self.seconds, MAX_VARIANCE_BIAS) if self.seconds > 0 else 0.0
        tail = (1 + LEVEL) / 2
        few = math.sqrt(self.count / (self.count - 1)) * t_quantile(tail, self.count - 1) / _z(tail)
        return float(few / math.sqrt(1 - max(bias, 0.0)))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else Abramowitz and Stegun 26.7.5.

    The expansion in powers of 1/df is within 0.2 % of the exact quantile from 3 degrees of freedom
    up, for the tails of 80-95 % intervals (tests/test_compare.py checks it against scipy); written
    here because importing scipy.special costs each process of a comparison 0.2 s for one number.
    """
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = _z(p)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / df**power for power, term in enumerate(terms, start=1))


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def time_blocks(ts: np.ndarray, values: np.ndarray | None = None) -> Blocks:
    """Consecutive blocks of equal duration, as long as the signal's own memory asks.

    With ``values``, the block length is Politis and White's (2004, corrected by
    Patton, Politis and White 2009) for the circular block bootstrap, estimated on
    the per-second mean of the values (their log where all are positive): a
    service whose slow spells last a minute gets blocks of minutes. Never shorter
    than MIN_BLOCK_S; MIN_BLOCKS to MAX_BLOCKS of them.
    """
    span = float(ts[-1] - ts[0]) if ts.size > 1 else 0.0
    length, memory = MIN_BLOCK_S, 0.0
    if values is not None and span > 0:
        sums = _autocovariance_sums(_per_second(ts, values))
        length = max(length, _block_length(sums))
        memory = 0.0 if sums is None else max(sums[0] / sums[1], 0.0)  # G / sigma^2, in seconds
    count = int(np.clip(span // length, 1, MAX_BLOCKS))
    if count < MIN_BLOCKS:
        count = max(1, min(MIN_BLOCKS, ts.size // 5))
    seconds = span / count if span > 0 else 0.0
    index = np.zeros(ts.size, dtype="int64") if seconds == 0 else ((ts - ts[0]) // seconds).astype("int64")
    return Blocks(np.minimum(index, count - 1), count, seconds, memory)


def optimal_block_length(series: np.ndarray) -> float:
    """The circular block bootstrap's block length for ``series``, in samples (Patton et al. 2009).

    The autocorrelations are read up to the first run of K_N insignificant
    lags; the long-run variance and its derivative come from Politis and
    Romano's flat-top lag window over twice that many lags.
    """
    return _block_length(_autocovariance_sums(series))


def _block_length(sums: tuple[float, float, int] | None) -> float:
    if sums is None:
        return 1.0
    g, long_run, n = sums
    length = (2 * g**2 / (4 / 3 * long_run**2)) ** (1 / 3) * n ** (1 / 3)
    return float(min(max(length, 1.0), np.ceil(min(3 * np.sqrt(n), n / 3))))


def _autocovariance_sums(series: np.ndarray) -> tuple[float, float, int] | None:
    """``G = sum |k| gamma(k)`` and the long-run variance ``sum gamma(k)`` (flat-top window), and n."""
    x = series[np.isfinite(series)]
    n = x.size
    if n < 10 or np.ptp(x) == 0:
        return None
    x = x - x.mean()
    runs = max(5, int(np.ceil(np.sqrt(np.log10(n)))))
    most = int(np.ceil(np.sqrt(n))) + runs
    most = min(most, n - 1)
    # Zero-padded to at least 2n, so that no lag wraps around; to a power of two, which pocketfft
    # transforms in a tenth of the time of 2n when n has a large prime factor (86,398 s of a day).
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    covariance = np.fft.irfft(spectrum * np.conj(spectrum), size)[: most + 1] / n
    rho = covariance[1:] / covariance[0]
    small = np.abs(rho) < 2 * np.sqrt(np.log10(n) / n)
    lag = next((m for m in range(0, most - runs + 1) if small[m : m + runs].all()), most - runs)
    window = min(2 * max(lag, 1), most)
    k = np.arange(-window, window + 1)
    share = np.abs(k) / window
    flat_top = np.where(share <= 0.5, 1.0, np.where(share <= 1.0, 2 * (1 - share), 0.0))
    autocov = covariance[np.abs(k)]
    long_run = float(np.sum(flat_top * autocov))
    if long_run <= 0:
        return None
    return float(np.sum(flat_top * np.abs(k) * autocov)), long_run, n


def _per_second(ts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean per second of the values (of their log where all are positive); seconds without any left out."""
    keep = np.isfinite(values)
    if not keep.all():  # else no copies of a million values
        ts, values = ts[keep], values[keep]
    if values.size and values.min() > 0:
        values = np.log(values)
    second = (ts - ts[0]).astype("int64") if ts.size else ts.astype("int64")
    counts = np.bincount(second)
    sums = np.bincount(second, values)
    return sums[counts > 0] / counts[counts > 0]


def replicate_weights(blocks: Blocks, salt: int) -> np.ndarray:
    """How often each block is drawn in each replicate: REPLICATES x blocks.count."""
    rng = np.random.default_rng([_SEED, salt])
    drawn = rng.integers(0, blocks.count, size=(REPLICATES, blocks.count))
    cells = (np.arange(REPLICATES)[:, None] * blocks.count + drawn).ravel()
    counts = np.bincount(cells, minlength=REPLICATES * blocks.count)
    return counts.reshape(REPLICATES, blocks.count).astype("float32")


@dataclass(frozen=True)
class Grid:
    """Bin edges spanning the values; log-spaced when every value is positive."""

    edges: np.ndarray
    log: bool

    @classmethod
    def spanning(cls, values: np.ndarray) -> Grid:
        finite = np.isfinite(values)
        if not finite.all():  # else no copy of a million values
            values = values[finite]
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
        if low > 0:
            return cls(np.geomspace(low, high * (1 + 1e-9), _BINS + 1), True)
        return cls(np.linspace(low, high + max(abs(high), 1.0) * 1e-9, _BINS + 1), False)

    def bins(self, values: np.ndarray) -> np.ndarray:
        """Each value's bin, by arithmetic on the evenly spaced (log) edges: no search."""
        low, high = self.edges[0], self.edges[-1]
        if self.log:  # in place, one array: a million values each time
            position = np.maximum(values, low)
            position /= low
            np.log(position, out=position)
            position /= np.log(high / low)
        else:
            position = values - low
            position /= high - low
        position *= _BINS
        found = position.astype("int64")
        return np.clip(found, 0, _BINS - 1, out=found)


class Resampled:
    """One recording's values of a figure, held as block histograms for resampling."""

    def __init__(
        self,
        values: np.ndarray,
        blocks: Blocks,
        weights: np.ndarray,
        sample_weights: np.ndarray | None = None,
    ) -> None:
        keep = np.isfinite(values)
        every = bool(keep.all())  # then no copies of a million values
        self.values = values if every else values[keep]
        self.sample_weights = sample_weights if sample_weights is None or every else sample_weights[keep]
        self._block = blocks.index if every else blocks.index[keep]
        self._blocks = blocks
        self._weights = weights
        self._exact: dict[tuple[float, ...], list[float]] = {}

    def quantile(self, q: float) -> float:
        return self.quantiles([q])[0]

    def quantiles(self, qs: list[float]) -> list[float]:
        """Exact quantiles of the raw values (weighted where the side is re-weighted), in one pass."""
        key = tuple(qs)
        if key not in self._exact:  # asked for again by the replicates' centring
            if self.sample_weights is not None:
                self._exact[key] = weighted_quantiles(self.values, self.sample_weights, qs)
            else:
                self._exact[key] = [float(v) for v in quantiles(self.values, qs)]
        return list(self._exact[key])

    def mean(self) -> float:
        return float(np.average(self.values, weights=self.sample_weights))

    @cached_property
    def _grid(self) -> Grid:
        """Where the replicates' quantiles are read; built only where one is (a mean or a sum needs none)."""
        return Grid.spanning(self.values)

    @cached_property
    def _sums(self) -> np.ndarray:
        """Each block's sum of the (weighted) values: built only where a mean or a sum is resampled."""
        mass = self.sample_weights  # None: every sample counts once
        weighted = self.values if mass is None else mass * self.values
        return np.bincount(self._block, weighted, minlength=self._blocks.count)

    @cached_property
    def _block_mass(self) -> np.ndarray:
        return np.bincount(self._block, self.sample_weights, minlength=self._blocks.count).astype("float64")

    @cached_property
    def _histograms(self) -> np.ndarray:
        """One histogram per block on the shared grid: built only where a quantile is resampled."""
        cells = self._grid.bins(self.values)
        cells += self._block * _BINS
        counts = np.bincount(cells, self.sample_weights, minlength=self._blocks.count * _BINS)
        return counts.reshape(self._blocks.count, _BINS)

    def replicate_quantiles(self, qs: list[float]) -> np.ndarray:
        """len(qs) x REPLICATES, centred so the unresampled histogram gives the exact quantile."""
        # Cumulated per block first: the product then cumulates every replicate at once (one cumsum
        # along a thousand rows took twice the product's time).
        cumulative = self._weights @ np.cumsum(self._histograms, axis=1, dtype="float32")
        full = np.cumsum(self._histograms.sum(axis=0))[None, :]
        out = np.empty((len(qs), REPLICATES))
        for row, (q, exact) in enumerate(zip(qs, self.quantiles(qs), strict=True)):
            boot = _from_cumulative(cumulative, q, self._grid)
            centre = _from_cumulative(full, q, self._grid)[0]
            shifted = self._widened(_shift(boot, centre, exact, self._grid.log), exact)
            out[row] = np.clip(shifted, self._grid.edges[0], self._grid.edges[-1])  # never below the data
        return out

    def replicate_means(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (self._weights @ self._sums) / (self._weights @ self._block_mass)
        return self._widened(means, self.mean())

    def replicate_sums(self) -> np.ndarray:
        return self._widened(self._weights @ self._sums, float(self._sums.sum()))

    def _widened(self, replicates: np.ndarray, centre: float) -> np.ndarray:
        """The replicates' spread about ``centre`` widened by the blocks' factor (see the module's note)."""
        factor = self._blocks.widening
        replicates = replicates.astype("float64")
        with np.errstate(invalid="ignore", divide="ignore"):
            if centre > 0 and np.all(replicates[np.isfinite(replicates)] > 0):
                return centre * (replicates / centre) ** factor
            return centre + (replicates - centre) * factor


def _from_cumulative(cumulative: np.ndarray, q: float, grid: Grid) -> np.ndarray:
    """The q-quantile of each row's binned distribution, linear within its bin."""
    total = cumulative[:, -1]
    target = q * total
    index = np.minimum((cumulative < target[:, None]).sum(axis=1), _BINS - 1)
    rows = np.arange(cumulative.shape[0])
    before = np.where(index > 0, cumulative[rows, index - 1], 0.0)
    inside = cumulative[rows, index] - before
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.clip(np.where(inside > 0, (target - before) / inside, 0.5), 0, 1)
    low, high = grid.edges[index], grid.edges[index + 1]
    if grid.log:
        return np.exp(np.log(low) + fraction * (np.log(high) - np.log(low)))
    return low + fraction * (high - low)


def _shift(boot: np.ndarray, centre: float, exact: float, log: bool) -> np.ndarray:
    if log and centre > 0 and exact > 0:
        return boot * (exact / centre)
    return boot + (exact - centre)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-quantile of values with weights (the inverted weighted empirical distribution)."""
    return weighted_quantiles(values, weights, [q])[0]


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs: list[float]) -> list[float]:
    """Several weighted quantiles from one sort; where every weight is 0 or 1 (requests set aside or
    kept), without one: the q-quantile is then the ceil(q x kept)-th smallest kept value, which a
    partition finds (a day of 8.6 million requests: 0.1 s instead of a 1.7 s sort)."""
    if values.size and 0 < min(qs) and max(qs) <= 1 and np.all((weights == 0) | (weights == 1)):
        kept = values[weights == 1]
        if kept.size == 0:
            return [float("nan")] * len(qs)
        # the first place where the kept count reaches q x kept, as the sorted search below finds it
        ranks = [min(max(int(np.ceil(q * float(kept.size))), 1), kept.size) - 1 for q in qs]
        part = np.partition(kept, sorted(set(ranks)))
        return [float(part[rank]) for rank in ranks]
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    if cumulative.size == 0 or cumulative[-1] <= 0:
        return [float("nan")] * len(qs)
    positions = np.searchsorted(cumulative, np.array(qs) * cumulative[-1], side="left")
    ordered = values[order]
    return [float(ordered[min(p, values.size - 1)]) for p in positions]


def interval(replicates: np.ndarray) -> tuple[float, float]:
    """The central LEVEL interval of a bootstrap distribution (the percentile method)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size < REPLICATES // 2:
        return float("nan"), float("nan")
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)
