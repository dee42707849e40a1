"""Which signals move at the same moments as the latency spikes, beyond chance?

Two numbers describe an alignment of episodes in signal ``b`` with the latency
episodes of ``a``:

- coincidence: the share of latency episodes that overlap an episode of ``b``
  (with a few seconds' tolerance); easy to read, but generous.
- locked: the share of latency episodes whose nearest ``b`` episode starts at
  one common lag (within +-LOCK_WIDTH_S, the lag searched within
  +-MAX_LAG_S). A cause starts its effect at a consistent delay; chance
  overlaps do not.

Significance comes from circular shifts: ``b``'s episodes are shifted by random
offsets around the dump's span, which keeps their number, lengths and spacing
(and their own periodicity) but breaks any link in time with ``a``. Shifts
shorter than the lag search (+-MAX_LAG_S, either way round the circle) are
left out: they would only move the lag, not break the link. The p-value is the
share of shifts whose *locked* share is at least as high, so two independent
jobs that merely share a period are not taken as linked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.detect.episodes import Episode

SHIFTS = 999
OVERLAP_TOLERANCE_S = 5.0
MAX_LAG_S = 30.0
LOCK_WIDTH_S = 2.0


@dataclass(frozen=True)
class Alignment:
    a: str
    b: str
    coincidence: float
    locked: float
    lag_s: float
    p_value: float
    matched: int


def align(
    name_a: str,
    reference: list[Episode],
    name_b: str,
    other: list[Episode],
    span: tuple[float, float],
    step: float,
    seed: int = 0,
) -> Alignment | None:
    if not reference or not other:
        return None
    tolerance = max(OVERLAP_TOLERANCE_S, 2 * step)
    width = max(LOCK_WIDTH_S, step)
    ref_start = np.array([e.start for e in reference])
    ref_end = np.array([e.end for e in reference])
    starts = np.array([e.start for e in other])
    ends = np.array([e.end for e in other])
    overlapping = _overlaps(ref_start - tolerance, ref_end + tolerance, starts, ends)
    locked, lag = _locked(ref_start, starts, width)
    rng = np.random.default_rng(seed)
    length = span[1] - span[0]
    shortest = 2 * (MAX_LAG_S + width)
    if length <= 2 * shortest:
        return None
    offsets = rng.uniform(shortest, length - shortest, SHIFTS)
    shifted = np.sort((starts[None, :] - span[0] + offsets[:, None]) % length + span[0], axis=1)
    null_locked, null_lag = locked_shares(ref_start, shifted, width)
    as_extreme = int(
        np.sum((null_locked > locked) | ((null_locked == locked) & (np.abs(null_lag) <= abs(lag))))
    )
    return Alignment(
        name_a,
        name_b,
        float(overlapping.mean()),
        locked,
        lag,
        (1 + as_extreme) / (1 + SHIFTS),
        int(overlapping.sum()),
    )


def _overlaps(lo: np.ndarray, hi: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether some episode [start, end) overlaps each interval [lo, hi]; episodes sorted by start."""
    last = np.searchsorted(starts, hi, side="right") - 1
    running_end = np.maximum.accumulate(ends)
    hits = np.zeros(lo.size, dtype=bool)
    valid = last >= 0
    hits[valid] = running_end[last[valid]] >= lo[valid]
    return hits


def locked_shares(
    ref_start: np.ndarray, starts: np.ndarray, width: float, chunk_cells: int = 2_000_000
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_locked` for each row of ``starts`` (rows sorted), all rows at once.

    The circular-shift null runs this for 999 shifted copies; one vectorised pass
    over row-offset keys replaces 999 Python calls. Rows are done in chunks of
    about ``chunk_cells`` cells to bound memory.
    """
    rows = starts.shape[0]
    per_chunk = max(1, chunk_cells // max(1, ref_start.size, starts.shape[1]))
    shares, lags = np.empty(rows), np.empty(rows)
    for lo in range(0, rows, per_chunk):
        hi = min(rows, lo + per_chunk)
        shares[lo:hi], lags[lo:hi] = _locked_rows(ref_start, starts[lo:hi], width)
    return shares, lags


def _locked_rows(ref_start: np.ndarray, starts: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    rows, m = starts.shape
    n = ref_start.size
    origin = min(float(starts.min()), float(ref_start.min()))
    stride = 2.0 * (max(float(starts.max()), float(ref_start.max())) - origin) + 1.0
    row_offset = np.arange(rows)[:, None] * stride
    keys = (starts - origin + row_offset).ravel()
    queries = ref_start[None, :] - origin + row_offset
    right = np.searchsorted(keys, queries.ravel()).reshape(rows, n) - np.arange(rows)[:, None] * m
    right = np.clip(right, 0, m - 1)
    left = np.clip(right - 1, 0, m - 1)
    picked = np.arange(rows)[:, None]
    after, before = starts[picked, right] - ref_start, starts[picked, left] - ref_start
    nearest = np.where(np.abs(before) < np.abs(after), before, after)
    valid = np.abs(nearest) <= MAX_LAG_S + width
    # Lags sort within their row; lags out of range go last (a value past any lag, still in the row).
    beyond = 4.0 * (MAX_LAG_S + width)
    lag_rows = np.sort(np.where(valid, nearest, beyond), axis=1)
    lag_stride = 4.0 * beyond
    lag_keys = (lag_rows + np.arange(rows)[:, None] * lag_stride).ravel()
    ends = np.searchsorted(lag_keys, lag_keys + 2 * width, side="right").reshape(rows, n)
    within = ends - (np.arange(rows)[:, None] * n + np.arange(n)[None, :])
    # A window from a lag in range never reaches ``beyond`` (lag + 2 width < beyond), so it counts
    # only lags in range; out-of-range entries count nothing.
    within = np.where(lag_rows < beyond, within, 0)
    best = np.argmax(within, axis=1)
    count = within[picked[:, 0], best]
    middle = (
        lag_rows[picked[:, 0], best + np.maximum(count - 1, 0) // 2]
        + lag_rows[picked[:, 0], best + count // 2]
    ) / 2
    return count / n, np.where(count > 0, middle, np.nan)


def _locked(ref_start: np.ndarray, starts: np.ndarray, width: float) -> tuple[float, float]:
    """Largest share of reference starts whose nearest other start sits at one common lag."""
    right = np.clip(np.searchsorted(starts, ref_start), 0, starts.size - 1)
    left = np.clip(right - 1, 0, starts.size - 1)
    after, before = starts[right] - ref_start, starts[left] - ref_start
    nearest = np.where(np.abs(before) < np.abs(after), before, after)
    lags = np.sort(nearest[np.abs(nearest) <= MAX_LAG_S + width])
    if lags.size == 0:
        return 0.0, float("nan")
    within = np.searchsorted(lags, lags + 2 * width, side="right") - np.arange(lags.size)
    best = int(np.argmax(within))
    window = lags[best : best + within[best]]
    return float(within[best] / ref_start.size), float(np.median(window))
