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

from typing import TypeGuard

import numpy as np

from diagnose.compare.evidence import Evidence
from diagnose.compare.figures import change
from diagnose.compare.measure import LENGTH_COLUMNS, Requests, latency_measures
from diagnose.compare.model import FigureChange, LengthCheck, Traffic
from diagnose.quantiles import median, quantiles

RATE_TOLERANCE = 0.10  # a request rate moving less than 10 % is the same load
KS_ALPHA = 0.01
KS_MIN_STATISTIC = 0.05  # and a length distribution differs only if the two CDFs part by 5 % somewhere
MIN_COVERAGE = 0.8  # re-weighting that covers less of the before mix than this compares little
_BINS = {"input_len": 10, "output_len": 5}


def compare_traffic(before: Evidence, after: Evidence, after_requests: Requests | None) -> Traffic:
    notes: list[str] = []
    rate, work = _changed(before, after, "request_rate"), _changed(before, after, "work_rate")
    rate_differs = _differs(rate)
    if rate_differs and rate is not None:
        notes.append(
            f"the request rate differs ({rate.before:.3g} -> {rate.after:.3g} requests/s, "
            f"{rate.change:+.0%}): under an open-loop load that is other traffic; under a closed loop "
            "(a benchmark at fixed concurrency) it is the service's own speed"
        )
    work_differs = _differs(work) and not rate_differs
    if work_differs and work is not None:
        notes.append(
            f"the offered work differs ({work.before:,.0f} -> {work.after:,.0f} tokens/s, "
            f"{work.change:+.0%}) at the same request rate: the queue waits depend on it"
        )
    columns = [c for c in LENGTH_COLUMNS if c in before.samples and c in after.samples]
    lengths = [check for c in columns if (check := _length_check(before, after, c)) is not None]
    differing = [c.column for c in lengths if c.differs]
    weights, how, coverage, reweighted, service = None, None, None, [], []
    if differing and after_requests is not None:
        weights, coverage = _reweight(before, after_requests, differing)
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
    if differing or rate_differs or work_differs:
        # Re-weighted, the after side is measured anew; otherwise its own measures already hold these.
        measured = (
            {m.name: m for m in latency_measures(after_requests, weights)}
            if weights is not None and after_requests is not None
            else after.measures
        )
        pairs = [(name, m) for name, m in measured.items() if name in before.measures]
        if differing:
            reweighted = [change(before.measures[n], m) for n, m in pairs if not n.startswith("service_")]
        if rate_differs or work_differs:
            service = [change(before.measures[n], m) for n, m in pairs if n.startswith("service_")]
    if service:
        notes.append(
            "latency is judged on the service time (latency less its waiting stages), "
            "which the load moves less"
        )
    return Traffic(rate, rate_differs, work, work_differs, lengths, reweighted, how, coverage, service, notes)


def _changed(before: Evidence, after: Evidence, name: str) -> FigureChange | None:
    if name not in before.measures or name not in after.measures:
        return None
    return change(before.measures[name], after.measures[name])


def _differs(figure: FigureChange | None) -> TypeGuard[FigureChange]:
    return bool(
        figure is not None
        and figure.change is not None
        and figure.interval_excludes_zero
        and abs(figure.change) >= RATE_TOLERANCE
    )


def _length_check(before: Evidence, after: Evidence, column: str) -> LengthCheck | None:
    b = _finite(before.samples[column])
    a = _finite(after.samples[column])
    if b.size < 10 or a.size < 10:
        return None
    statistic, p_value = ks_two_sample(b, a)
    return LengthCheck(
        column,
        float(median(b)),
        float(median(a)),
        statistic,
        p_value,
        bool(p_value < KS_ALPHA and statistic >= KS_MIN_STATISTIC),
    )


def ks_two_sample(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The two-sample Kolmogorov-Smirnov D and its asymptotic p-value (with Stephens' small-sample term).

    Written here rather than taken from scipy.stats, whose import alone costs a second (and
    scipy.special's, for the distribution alone, a quarter of one: a tenth of a day-long comparison's
    own work); tests/test_compare.py checks both against scipy.
    """
    a, b = np.sort(a), np.sort(b)
    points = np.unique(np.concatenate([a, b]))  # lengths are whole numbers: few distinct points
    a_cdf = np.searchsorted(a, points, side="right") / a.size
    b_cdf = np.searchsorted(b, points, side="right") / b.size
    statistic = float(np.max(np.abs(a_cdf - b_cdf)))
    effective = np.sqrt(a.size * b.size / (a.size + b.size))
    return statistic, kolmogorov_sf((effective + 0.12 + 0.11 / effective) * statistic)


_TERMS = np.arange(1, 41)
_SIGNS = np.where(_TERMS % 2 == 1, 1.0, -1.0)


def kolmogorov_sf(x: float) -> float:
    """P(K > x) for the Kolmogorov distribution, by whichever of its two classical series converges fast.

    Above 0.8, ``2 sum (-1)^(k-1) exp(-2 k^2 x^2)``; below, one minus the CDF's theta-function form
    ``sqrt(2 pi) / x sum exp(-(2k-1)^2 pi^2 / (8 x^2))``. Forty terms put both below 1e-16 there.
    """
    if x <= 0:
        return 1.0
    if x >= 0.8:
        return float(min(1.0, max(0.0, 2 * np.sum(_SIGNS * np.exp(-2 * _TERMS**2 * x * x)))))
    odd = 2 * _TERMS - 1
    cdf = np.sqrt(2 * np.pi) / x * np.sum(np.exp(-(odd**2) * np.pi**2 / (8 * x * x)))
    return float(min(1.0, max(0.0, 1.0 - cdf)))


def _reweight(before: Evidence, after: Requests, columns: list[str]) -> tuple[np.ndarray, float]:
    """Weights for the after requests, and the share of the before mix their strata cover."""
    b_code = np.zeros(len(before.samples[columns[0]]), dtype="int64")
    a_code = np.zeros(len(after.frame), dtype="int64")
    width = 1
    for column in columns:
        b_values, a_values = before.samples[column].astype("float64"), after.values(column)
        pooled = np.concatenate([b_values[np.isfinite(b_values)], a_values[np.isfinite(a_values)]])
        edges = np.unique(quantiles(pooled, np.linspace(0, 1, _BINS[column] + 1)[1:-1].tolist()))
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


def _finite(values: np.ndarray) -> np.ndarray:
    values = values.astype("float64")
    return values[np.isfinite(values)]
