"""Did requests get longer, or did the system get slower?

The dump is split where window-median latency shifts most (the least-squares
single change point of the window medians). A linear latency-vs-input-length
model fitted *before* the split predicts what latency after the split should
have been given the new inputs: if the prediction covers the rise, the inputs
changed; if latency rose beyond it, the system got slower.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.facts.model import Facts

_WINDOW_S = 30.0
_MIN_SIDE_WINDOWS = 3
_MAX_CORR_SAMPLE = 50_000  # Spearman standard error ~0.005 at this size


_SHIFT_FACTS = ("latency.shift_at", "latency.rise_ratio")
_LENGTH_FACTS = (
    "input_len.rise_ratio",
    "input_len.latency_corr",
    "latency.unexplained_ratio",
    "input_len.explained_share",
)


def add_shift_facts(facts: Facts, requests: pd.DataFrame, source: str) -> None:
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    ts = requests["ts"].to_numpy()
    split = _best_split(ts, latency)
    if split is None:
        span = float(ts[-1] - ts[0]) if len(ts) else 0.0
        reason = (
            f"a longer dump: a shift needs {2 * _MIN_SIDE_WINDOWS} windows of {_WINDOW_S:.0f} s and "
            f"40 latencies ({source} spans {span:.0f} s with {int(np.isfinite(latency).sum())})"
        )
        facts.cannot([*_SHIFT_FACTS, *_LENGTH_FACTS], reason)
        return
    late = ts >= split
    early = ~late & np.isfinite(latency)
    late &= np.isfinite(latency)
    early_median, late_median = np.median(latency[early]), np.median(latency[late])
    if early_median <= 0:
        return
    cite = f"{source}: latency_ms before and after {split:.0f} (epoch s)"
    facts.add("latency.shift_at", float(split), cite)
    facts.add("latency.rise_ratio", float(late_median / early_median), cite)
    if "input_len" not in requests.columns:
        return
    length = requests["input_len"].to_numpy(dtype="float64")
    known = np.isfinite(length)
    early &= known
    late &= known
    if early.sum() < 20 or late.sum() < 20:
        facts.cannot(
            _LENGTH_FACTS,
            f"20 requests with input_len on each side of the shift ({source}: "
            f"{int(early.sum())} before, {int(late.sum())} after)",
        )
        return
    cite_len = f"{source}: input_len and latency_ms before and after the shift"
    early_len, late_len = np.median(length[early]), np.median(length[late])
    if early_len > 0:
        facts.add("input_len.rise_ratio", float(late_len / early_len), cite_len)
    facts.add("input_len.latency_corr", spearman(length[known], latency[known]), cite_len)
    slope, intercept = _fit(length[early], latency[early])
    predicted = float(np.median(intercept + slope * length[late]))
    before, after = np.median(latency[early]), np.median(latency[late])
    if predicted > 0:
        facts.add("latency.unexplained_ratio", float(after / predicted), cite_len)
    if after > before:
        explained = (predicted - before) / (after - before)
        facts.add("input_len.explained_share", float(np.clip(explained, 0.0, 1.0)), cite_len)


def _best_split(ts: np.ndarray, latency: np.ndarray) -> float | None:
    valid = np.isfinite(latency)
    if valid.sum() < 40:
        return None
    start = ts[0]
    width = max(_WINDOW_S, (ts[-1] - start) / 2000)
    index = ((ts[valid] - start) // width).astype("int64")
    medians = pd.Series(latency[valid]).groupby(index).median()
    values = medians.to_numpy()
    n = values.size
    if n < 2 * _MIN_SIDE_WINDOWS:
        return None
    cumsum, cumsq = np.cumsum(values), np.cumsum(values**2)
    k = np.arange(_MIN_SIDE_WINDOWS, n - _MIN_SIDE_WINDOWS + 1)
    left_sse = cumsq[k - 1] - cumsum[k - 1] ** 2 / k
    right_sum, right_sq = cumsum[-1] - cumsum[k - 1], cumsq[-1] - cumsq[k - 1]
    right_sse = right_sq - right_sum**2 / (n - k)
    best = int(k[np.argmin(left_sse + right_sse)])
    return float(start + medians.index[best] * width)


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line; flat when the inputs did not vary before the shift."""
    x_mean, y_mean = x.mean(), y.mean()
    spread = np.dot(x - x_mean, x - x_mean)
    if spread == 0:
        return 0.0, float(np.median(y))
    slope = np.dot(x - x_mean, y - y_mean) / spread
    return float(slope), float(y_mean - slope * x_mean)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation; a large sample is subsampled (standard error ~0.005 at 50,000)."""
    if x.size > _MAX_CORR_SAMPLE:
        pick = np.random.default_rng(0).choice(x.size, _MAX_CORR_SAMPLE, replace=False)
        x, y = x[pick], y[pick]
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    if np.std(rx) == 0 or np.std(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])
