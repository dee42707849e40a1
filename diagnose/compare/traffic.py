"""Was the traffic the same? The request rate and the length mixes, and a fair comparison when not.

"Faster, or just shorter requests?" When the input or output lengths differ,
the after side's requests are re-weighted to the before side's mix: strata
of input length (deciles of both sides together) and, where logged, output
length (quintiles), each after request weighted by how much more or less
common its stratum was before. The re-weighted percentiles are what the
after side would have shown under the before side's mix, as far as its own
requests cover that mix (the share is said).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.compare.bootstrap import Grid, Resampled
from diagnose.compare.figures import Requests, latency_figures, relative_change, service_figures
from diagnose.compare.model import FigureChange, LengthCheck, Traffic

RATE_TOLERANCE = 0.10  # a request rate moving less than 10 % is the same load
KS_ALPHA = 0.01
KS_MIN_STATISTIC = 0.05  # and a length distribution differs only if the two CDFs part by 5 % somewhere
MIN_COVERAGE = 0.8  # re-weighting that covers less of the before mix than this compares little
_BINS = {"input_len": 10, "output_len": 5}


def compare_traffic(before: Requests, after: Requests) -> Traffic:
    notes: list[str] = []
    rate = _per_second(before, after, None, "request_rate", "request rate (arrivals/s)")
    rate_differs = _differs(rate)
    if rate_differs:
        notes.append(
            f"the request rate differs ({rate.before:.3g} -> {rate.after:.3g} requests/s, "
            f"{rate.change:+.0%}): under an open-loop load that is other traffic; under a closed loop "
            "(a benchmark at fixed concurrency) it is the service's own speed"
        )
    columns = [c for c in _BINS if c in before.frame.columns and c in after.frame.columns]
    work = (
        _per_second(before, after, columns, "work_rate", f"offered work ({' + '.join(columns)} per s)")
        if columns
        else None
    )
    work_differs = _differs(work) and not rate_differs
    if work_differs:
        notes.append(
            f"the offered work differs ({work.before:,.0f} -> {work.after:,.0f} tokens/s, "
            f"{work.change:+.0%}) at the same request rate: the queue waits depend on it"
        )
    lengths = [check for c in columns if (check := _length_check(before, after, c)) is not None]
    differing = [c.column for c in lengths if c.differs]
    weights, how, coverage, reweighted = None, None, None, []
    if differing:
        weights, coverage = _reweight(before, after, differing)
        how = (
            f"after re-weighted to the before mix of {', '.join(differing)} "
            f"(strata of {' x '.join(f'{_BINS[c]} bins' for c in differing)}); "
            f"its requests cover {coverage:.0%} of the before mix"
        )
        if coverage < MIN_COVERAGE:
            notes.append(
                f"the length mixes barely overlap: the after requests cover {coverage:.0%} of the before "
                "mix, so even the re-weighted figures compare different work"
            )
        reweighted = latency_figures(before, after, after_weights=weights)
    service = service_figures(before, after, weights) if rate_differs or work_differs else []
    if (rate_differs or work_differs) and service:
        notes.append(
            "latency is judged on the service time (latency less its waiting stages), "
            "which the load moves less"
        )
    return Traffic(rate, rate_differs, work, work_differs, lengths, reweighted, how, coverage, service, notes)


def _per_second(
    before: Requests, after: Requests, columns: list[str] | None, name: str, label: str
) -> FigureChange | None:
    """Requests (``columns`` None) or the sum of ``columns`` per second, with its interval."""
    if before.duration_s <= 0 or after.duration_s <= 0:
        return None
    b_values, a_values = _amounts(before, columns), _amounts(after, columns)
    grid = Grid.spanning(np.array([0.0, 1.0]))
    b = Resampled(b_values, before.blocks, grid, before.weights)
    a = Resampled(a_values, after.blocks, grid, after.weights)
    return relative_change(
        name,
        label,
        "rps",
        None,
        b_values.sum() / before.duration_s,
        a_values.sum() / after.duration_s,
        b.replicate_sums() / before.duration_s,
        a.replicate_sums() / after.duration_s,
        before.blocks.method,
        f"{before.source} / {after.source}: {', '.join(columns or ['ts'])}",
    )


def _amounts(side: Requests, columns: list[str] | None) -> np.ndarray:
    if columns is None:
        return np.ones(len(side.frame))
    return sum(np.nan_to_num(_numbers(side.frame[c])) for c in columns)


def _differs(figure: FigureChange | None) -> bool:
    return bool(
        figure is not None
        and figure.change is not None
        and figure.low is not None
        and figure.high is not None
        and not (figure.low <= 0 <= figure.high)
        and abs(figure.change) >= RATE_TOLERANCE
    )


def _length_check(before: Requests, after: Requests, column: str) -> LengthCheck | None:
    b = _finite(before.frame[column])
    a = _finite(after.frame[column])
    if b.size < 10 or a.size < 10:
        return None
    statistic, p_value = ks_two_sample(b, a)
    return LengthCheck(
        column,
        float(np.median(b)),
        float(np.median(a)),
        statistic,
        p_value,
        bool(p_value < KS_ALPHA and statistic >= KS_MIN_STATISTIC),
    )


def ks_two_sample(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The two-sample Kolmogorov-Smirnov D and its asymptotic p-value (with Stephens' small-sample term).

    Written here rather than taken from scipy.stats, whose import alone costs a second; the
    Kolmogorov distribution itself is scipy.special's.
    """
    from scipy.special import kolmogorov

    a, b = np.sort(a), np.sort(b)
    points = np.unique(np.concatenate([a, b]))  # lengths are whole numbers: few distinct points
    a_cdf = np.searchsorted(a, points, side="right") / a.size
    b_cdf = np.searchsorted(b, points, side="right") / b.size
    statistic = float(np.max(np.abs(a_cdf - b_cdf)))
    effective = np.sqrt(a.size * b.size / (a.size + b.size))
    return statistic, float(kolmogorov((effective + 0.12 + 0.11 / effective) * statistic))


def _reweight(before: Requests, after: Requests, columns: list[str]) -> tuple[np.ndarray, float]:
    """Weights for the after requests, and the share of the before mix their strata cover."""
    b_code = np.zeros(len(before.frame), dtype="int64")
    a_code = np.zeros(len(after.frame), dtype="int64")
    width = 1
    for column in columns:
        b_values, a_values = _numbers(before.frame[column]), _numbers(after.frame[column])
        pooled = np.concatenate([b_values[np.isfinite(b_values)], a_values[np.isfinite(a_values)]])
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, _BINS[column] + 1)[1:-1]))
        bins = edges.size + 2  # the last for a request without this length
        b_code = b_code * bins + _bin(b_values, edges)
        a_code = a_code * bins + _bin(a_values, edges)
        width *= bins
    b_share = np.bincount(b_code, minlength=width) / b_code.size
    a_share = np.bincount(a_code, minlength=width) / a_code.size
    covered = a_share > 0
    coverage = float(b_share[covered].sum())
    ratio = np.divide(b_share, a_share, out=np.zeros(width), where=covered)
    weights = ratio[a_code]
    return weights * (weights.size / weights.sum()) if weights.sum() > 0 else weights, coverage


def _bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(values), np.searchsorted(edges, values, side="right"), edges.size + 1)


def _numbers(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")


def _finite(column: pd.Series) -> np.ndarray:
    values = _numbers(column)
    return values[np.isfinite(values)]
