"""Time as sets of intervals: a GPU's busy time, the host's time in each kind of call, the gaps
between them. Every set is disjoint and sorted (starts and ends, in µs); each operation is a few
vectorised passes, so a trace of a million kernels costs milliseconds, not a loop in Python."""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]  # disjoint, sorted: starts and ends, in µs


def union_of(a: Intervals, b: Intervals) -> Intervals:
    return union(np.concatenate((a[0], b[0])), np.concatenate((a[1], b[1])))


def difference(a: Intervals, b: Intervals) -> Intervals:
    """The time in ``a`` and not in ``b`` (both disjoint and sorted)."""
    if not a[0].size or not b[0].size:
        return a
    points = np.unique(np.concatenate((a[0], a[1], b[0], b[1])))
    low, high = points[:-1], points[1:]
    middle = (low + high) / 2
    keep = inside(a, middle) & ~inside(b, middle)
    return union(low[keep], high[keep])


def inside(intervals: Intervals, at: np.ndarray) -> np.ndarray:
    starts, ends = intervals
    index = np.searchsorted(starts, at, side="right") - 1
    return (index >= 0) & (at < ends[np.clip(index, 0, None)]) if starts.size else np.zeros(at.shape, bool)


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Disjoint, sorted intervals covering the same time as the given ones."""
    if not starts.size:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.concatenate(([True], starts[1:] > reach[:-1]))
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [starts.size - 1]))
    return starts[first], reach[last]


def covered_before(union: Intervals, at: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint intervals ``union`` before each instant of ``at``."""
    starts, ends = union
    if not starts.size:
        return np.zeros(at.shape)
    lengths = np.concatenate(([0.0], np.cumsum(ends - starts)))
    index = np.searchsorted(starts, at, side="right")  # intervals starting at or before the instant
    previous = np.clip(index - 1, 0, None)
    inside = np.clip(at - starts[previous], 0, None)
    partial = np.where(index > 0, np.minimum(inside, (ends - starts)[previous]), 0.0)
    return lengths[previous] * (index > 0) + partial


def overlap(a: Intervals, b: Intervals) -> float:
    """Total time in both ``a`` and ``b``."""
    return float((covered_before(b, a[1]) - covered_before(b, a[0])).sum())


def gaps(busy: Intervals, begin: float, end: float) -> Intervals:
    """The time from ``begin`` to ``end`` that ``busy`` leaves free."""
    starts, ends = busy
    gap_starts = np.concatenate(([begin], ends))
    gap_ends = np.concatenate((starts, [end]))
    keep = gap_ends > gap_starts
    return gap_starts[keep], gap_ends[keep]
