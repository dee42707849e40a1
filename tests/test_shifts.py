"""Change points: the piecewise-linear search, the choice between levels and lines, and TCPD."""

from __future__ import annotations

import numpy as np
import pytest
import ruptures as rpt
from ruptures.base import BaseCost

from benchmarks.bench_changepoint import DEFAULT_DATA, PUBLISHED_BINSEG_DEFAULT_F1, load_tcpd
from benchmarks.changepoint_metrics import tcpd_f1
from diagnose.detect.shifts import LEVELS, LINES, change_points, detect_shifts


class _LineCost(BaseCost):
    """ruptures' own way to a piecewise-linear cost: a least-squares line per segment."""

    model = "line"
    min_size = 2

    def fit(self, signal):
        self.signal = np.asarray(signal, dtype=float).reshape(-1, 1)
        return self

    def error(self, start, end):
        y = self.signal[start:end, 0]
        t = np.arange(y.size)
        return float(np.sum((y - np.polyval(np.polyfit(t, y, 1), t)) ** 2))


@pytest.mark.parametrize("seed", range(6))
def test_the_line_search_finds_what_ruptures_pelt_finds_with_the_same_cost(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 160))
    y = rng.normal(0, 1, n)
    for knee in rng.integers(10, n - 10, size=int(rng.integers(0, 4))):
        y[knee:] += rng.normal(0, 4) + rng.normal(0, 0.3) * np.arange(n - knee)
    min_size = int(rng.integers(3, 7))
    penalty = 4 * np.log(n)
    expected = rpt.Pelt(custom_cost=_LineCost(), min_size=min_size, jump=1).fit(y).predict(pen=penalty)
    assert LINES.search(y, penalty, min_size) == expected[:-1]


def _ramp_then_flat(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = np.concatenate((np.linspace(0, 60, 300), np.full(200, 60.0)))
    return level + rng.normal(0, 2, level.size)


def test_a_change_of_slope_is_one_change_point_not_a_staircase():
    series = _ramp_then_flat(1)
    assert len(detect_shifts(series, models=[LEVELS])) > 1  # what levels alone make of a ramp
    (point,) = detect_shifts(series)
    assert abs(point - 300) <= 10


def test_a_steady_trend_has_no_change_point():
    rng = np.random.default_rng(2)
    assert detect_shifts(np.linspace(0, 40, 600) + rng.normal(0, 2, 600)) == []


def test_memory_that_starts_growing_is_dated_where_it_starts():
    rng = np.random.default_rng(3)
    used = np.full(7200, 20e9) + rng.normal(0, 5e6, 7200)
    used[3600:] += np.arange(3600) * 2e6  # a leak from t = 3600 s: 2 MB/s
    points = change_points(used, 0.0, 1.0)
    assert len(points) == 1 and abs(points[0] - 3600) <= 60


def test_tcpd_mean_f1_beats_binseg_with_default_parameters():
    folder = DEFAULT_DATA / "tcpd"
    if not folder.is_dir():
        pytest.skip(f"{folder}: the shared change-point data is not here")
    scores = [tcpd_f1(truth, detect_shifts(values)) for _, values, truth in load_tcpd(folder)]
    assert len(scores) >= 30
    assert np.mean(scores) > PUBLISHED_BINSEG_DEFAULT_F1
