"""Did requests get longer, or did the system get slower?

The dump is split where window-median latency shifts most (the least-squares
single change point of the window medians). A linear latency-vs-input-length
model fitted *before* the split predicts what latency after the split should
have been given the new inputs: if the prediction covers the rise, the inputs
changed; if latency rose beyond it, the system got slower.

The same question is asked of the tail, at its own split (where window-P95
latency shifts most): longer prompts for one request in ten double the P95
and leave the median where it was, so a median split cannot see them. There
the model predicts a distribution, not a point: each request after the split
gets the line's value for its length plus a residual drawn from before, and
the P95 of that is what the new lengths alone would give.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.schema import stage_columns
from diagnose.facts.model import Facts, StageKind
from diagnose.facts.ranks import spearman
from diagnose.facts.stages import stage_kind
from diagnose.quantiles import binned_quantiles, median, quantile

_WINDOW_S = 30.0
_MIN_SIDE_WINDOWS = 3


_TAIL_Q = 0.95  # P99 moves on a handful of requests per window; P95 is the tail a window can estimate
_MAX_TAIL_SAMPLE = 50_000  # after-split requests drawn for the predicted tail (P95 error ~0.1 %)
_TAIL_FACTS = (
    "latency.tail_shift_at",
    "latency.tail_rise_ratio",
    "latency.median_at_tail_ratio",
    "input_len.tail_rise_ratio",
    "input_len.tail_explained_share",
    "latency.tail_unexplained_ratio",
)
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
    median_split, tail_split = _best_splits(ts, latency, (0.5, _TAIL_Q))
    shift = _shift(ts, latency, median_split)
    if shift is None:
        span = float(ts[-1] - ts[0]) if len(ts) else 0.0
        reason = (
            f"a longer dump: a shift needs {2 * _MIN_SIDE_WINDOWS} windows of {_WINDOW_S:.0f} s and "
            f"40 latencies ({source} spans {span:.0f} s with {int(np.isfinite(latency).sum())})"
        )
        facts.cannot([*_SHIFT_FACTS, *_LENGTH_FACTS, *_TAIL_FACTS], reason)
        return
    # Longer inputs also make requests queue behind each other, which a per-request line cannot
    # predict: the length models are fitted to the time the request was served, its waits removed.
    served, waits = _served(requests, latency)
    _add_tail_shift_facts(facts, requests, source, ts, latency, (served, waits), tail_split)
    split, early, late, ratio = shift
    cite = f"{source}: latency_ms before and after {split:.0f} (epoch s)"
    facts.add("latency.shift_at", split, cite)
    facts.add("latency.rise_ratio", ratio, cite)
    if "input_len" not in requests.columns:
        return
    explained = _explained(served, _column(requests, "input_len"), early, late)
    if isinstance(explained, str):
        facts.cannot(
            _LENGTH_FACTS, f"20 requests with input_len on each side of the shift ({source}: {explained})"
        )
        return
    minus = f" minus {', '.join(waits)}" if waits else ""
    cite_len = f"{source}: input_len and latency_ms{minus} before and after the shift"
    facts.add("input_len.rise_ratio", explained.length_rise, cite_len)
    facts.add("input_len.latency_corr", explained.corr, cite_len)
    facts.add("latency.unexplained_ratio", explained.unexplained, cite_len)
    facts.add("input_len.explained_share", explained.share, cite_len)
    if "output_len" in requests.columns:  # text generation: did the answers get longer?
        by_output = _explained(latency, _column(requests, "output_len"), early, late)
        if not isinstance(by_output, str):
            cite_out = f"{source}: output_len and latency_ms before and after the shift"
            facts.add("output_len.rise_ratio", by_output.length_rise, cite_out)
            facts.add("output_len.explained_share", by_output.share, cite_out)


def _add_tail_shift_facts(
    facts: Facts,
    requests: pd.DataFrame,
    source: str,
    ts: np.ndarray,
    latency: np.ndarray,
    served_waits: tuple[np.ndarray, list[str]],
    split: float | None,
) -> None:
    """The P95's own shift (at ``split``), and how much of it the new input lengths predict (see the
    module's note)."""
    shift = _shift(ts, latency, split)
    if shift is None:
        return
    split, early, late, median_ratio = shift
    before = quantile(latency[early], _TAIL_Q)
    if before <= 0:
        return
    cite = f"{source}: latency_ms P95 and median before and after {split:.0f} (epoch s)"
    facts.add("latency.tail_shift_at", split, cite)
    facts.add("latency.tail_rise_ratio", float(quantile(latency[late], _TAIL_Q) / before), cite)
    facts.add("latency.median_at_tail_ratio", median_ratio, cite)
    if "input_len" not in requests.columns:
        return
    served, waits = served_waits
    length = _column(requests, "input_len")
    known = np.isfinite(length) & np.isfinite(served)
    early, late = early & known, late & known
    if early.sum() < 20 or late.sum() < 20:
        facts.cannot(
            _TAIL_FACTS[3:],
            f"20 requests with input_len on each side of the tail's shift ({int(early.sum())} before, "
            f"{int(late.sum())} after)",
        )
        return
    slope, intercept = _fit(length[early], served[early])
    residuals = served[early] - (intercept + slope * length[early])
    rng = np.random.default_rng(0)  # the same dump gives the same facts
    after_len = length[late]
    if after_len.size > _MAX_TAIL_SAMPLE:
        after_len = rng.choice(after_len, _MAX_TAIL_SAMPLE, replace=False)
    predicted = quantile(intercept + slope * after_len + rng.choice(residuals, after_len.size), _TAIL_Q)
    served_before, served_after = quantile(served[early], _TAIL_Q), quantile(served[late], _TAIL_Q)
    minus = f" minus {', '.join(waits)}" if waits else ""
    cite_len = f"{source}: input_len and latency_ms{minus}, P95 before and after the tail's shift"
    early_len = quantile(length[early], _TAIL_Q)
    if early_len > 0:
        length_ratio = quantile(length[late], _TAIL_Q) / early_len
        facts.add("input_len.tail_rise_ratio", float(length_ratio), cite_len)
    if served_after > served_before:
        share = (predicted - served_before) / (served_after - served_before)
        facts.add("input_len.tail_explained_share", float(np.clip(share, 0.0, 1.0)), cite_len)
    if predicted > 0:
        facts.add("latency.tail_unexplained_ratio", float(served_after / predicted), cite_len)


@dataclass(frozen=True)
class LengthModel:
    """The input-length model as the facts fit it: what a picture of the shift draws."""

    split: float  # epoch s
    tail: bool  # split where the P95 shifted, not the median
    before: np.ndarray  # bool per request
    after: np.ndarray
    input_len: np.ndarray
    served_ms: np.ndarray  # latency less the waiting stages
    slope: float  # ms per token, fitted before the split
    intercept: float


def length_model(requests: pd.DataFrame, tail: bool = False) -> LengthModel | None:
    """The shift (the median's, or with ``tail`` the P95's) and the line fitted before it."""
    if "input_len" not in requests.columns:
        return None
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    ts = requests["ts"].to_numpy()
    (split,) = _best_splits(ts, latency, (_TAIL_Q if tail else 0.5,))
    shift = _shift(ts, latency, split)
    if shift is None:
        return None
    split, early, late, _ = shift
    served, _ = _served(requests, latency)
    length = _column(requests, "input_len")
    known = np.isfinite(length)
    if (early & known).sum() < 20 or (late & known).sum() < 20:
        return None
    slope, intercept = _fit(length[early & known], served[early & known])
    return LengthModel(
        split, tail, early & known, late & known, length, served, float(slope), float(intercept)
    )


def _served(requests: pd.DataFrame, latency: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Latency less the waiting stages (queue, batch_wait, network, ...), and which were taken off."""
    waits = [column for name, column in stage_columns(requests).items() if stage_kind(name) == StageKind.WAIT]
    if not waits:
        return latency, []
    waited = np.nansum(np.column_stack([_column(requests, column) for column in waits]), axis=1)
    return np.maximum(latency - waited, 0.0), waits


def add_generation_shift_facts(
    facts: Facts, requests: pd.DataFrame, source: str, ttft: np.ndarray | None, tpot: np.ndarray | None
) -> None:
    """The same question of an LLM's two latencies: did TTFT rise with the prompts, and did TPOT rise?

    TTFT is set by queueing and prefill, so longer prompts raise it without
    the system changing; TPOT is per token, so a lasting rise in it means the
    engine got slower per step (or its batches bigger), whatever the lengths.
    """
    ts = requests["ts"].to_numpy()
    if ttft is not None and (shift := _shift(ts, ttft, _best_splits(ts, ttft, (0.5,))[0])) is not None:
        split, early, late, ratio = shift
        cite = f"{source}: time to first token before and after {split:.0f} (epoch s)"
        facts.add("ttft.rise_ratio", ratio, cite)
        if "input_len" in requests.columns:
            explained = _explained(ttft, _column(requests, "input_len"), early, late)
            if not isinstance(explained, str):
                cite_len = f"{source}: input_len and time to first token before and after the shift"
                facts.add("ttft.input_rise_ratio", explained.length_rise, cite_len)
                facts.add("ttft.unexplained_ratio", explained.unexplained, cite_len)
                facts.add("ttft.input_explained_share", explained.share, cite_len)
    if tpot is not None and (shift := _shift(ts, tpot, _best_splits(ts, tpot, (0.5,))[0])) is not None:
        facts.add(
            "tpot.rise_ratio", shift[3], f"{source}: time per output token before and after {shift[0]:.0f}"
        )


@dataclass(frozen=True)
class _Explained:
    length_rise: float | None  # median length after / before
    corr: float  # Spearman of length and the metric
    unexplained: float | None  # metric after / what a line fitted before predicts for the new lengths
    share: float | None  # share of the metric's rise the new lengths predict (0-1)


def _shift(
    ts: np.ndarray, values: np.ndarray, split: float | None
) -> tuple[float, np.ndarray, np.ndarray, float] | None:
    """(split, before, after, median after / before) at ``split`` (from :func:`_best_splits`)."""
    if split is None:
        return None
    late = ts >= split
    early = ~late & np.isfinite(values)
    late &= np.isfinite(values)
    before = median(values[early])
    if before <= 0:
        return None
    return float(split), early, late, float(median(values[late]) / before)


def _explained(
    metric: np.ndarray, length: np.ndarray, early: np.ndarray, late: np.ndarray
) -> _Explained | str:
    """How much of the metric's shift a metric-vs-length line fitted before it predicts (or why not)."""
    known = np.isfinite(length)
    early, late = early & known, late & known
    if early.sum() < 20 or late.sum() < 20:
        return f"{int(early.sum())} before, {int(late.sum())} after"
    early_len, late_len = median(length[early]), median(length[late])
    slope, intercept = _fit(length[early], metric[early])
    predicted = float(median(intercept + slope * length[late]))
    before, after = median(metric[early]), median(metric[late])
    share = float(np.clip((predicted - before) / (after - before), 0.0, 1.0)) if after > before else None
    both = known & np.isfinite(metric)
    return _Explained(
        float(late_len / early_len) if early_len > 0 else None,
        spearman(length[both], metric[both]),
        float(after / predicted) if predicted > 0 else None,
        share,
    )


def _column(requests: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(requests[name], errors="coerce").to_numpy(dtype="float64")


def _best_splits(ts: np.ndarray, values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Where the windows' ``q``-quantile shifts most, for each of ``qs``: least-squares, one split each.

    Every quantile comes from one sort of the windows (see diagnose.quantiles).
    """
    valid = np.isfinite(values)
    if valid.sum() < 40:
        return [None] * len(qs)
    start = ts[0]
    width = max(_WINDOW_S, (ts[-1] - start) / 2000)
    index = ((ts[valid] - start) // width).astype("int64")
    return [
        _split_of(levels, start, width)
        for levels in binned_quantiles(index, values[valid], int(index.max()) + 1, qs)
    ]


def _split_of(levels: np.ndarray, start: float, width: float) -> float | None:
    """The start of the window that best splits the windows' levels into two flat parts."""
    windows = np.flatnonzero(np.isfinite(levels))  # the windows that hold requests
    values = levels[windows]
    n = values.size
    if n < 2 * _MIN_SIDE_WINDOWS:
        return None
    cumsum, cumsq = np.cumsum(values), np.cumsum(values**2)
    k = np.arange(_MIN_SIDE_WINDOWS, n - _MIN_SIDE_WINDOWS + 1)
    left_sse = cumsq[k - 1] - cumsum[k - 1] ** 2 / k
    right_sum, right_sq = cumsum[-1] - cumsum[k - 1], cumsq[-1] - cumsq[k - 1]
    right_sse = right_sq - right_sum**2 / (n - k)
    best = int(k[np.argmin(left_sse + right_sse)])
    return float(start + windows[best] * width)


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line; flat when the inputs did not vary before the shift."""
    x_mean, y_mean = x.mean(), y.mean()
    spread = np.dot(x - x_mean, x - x_mean)
    if spread == 0:
        return 0.0, float(median(y))
    slope = np.dot(x - x_mean, y - y_mean) / spread
    return float(slope), float(y_mean - slope * x_mean)
