"""diagnose.quantiles gives numpy's medians and quantiles to the last bit, and pandas' per-bin ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.quantiles import binned_quantiles, median, quantile, quantiles

_QS = (0.0, 0.01, 0.05, 0.25, 0.3, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)


def _samples(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (1, 2, 3, 4, 5, 10, 11, 100, 101, 1000, 20_001):
        out.append(rng.lognormal(0, 2, n))
        out.append(rng.integers(0, 5, n).astype("float64"))  # many ties
        out.append(np.round(rng.normal(0, 1, n), 1) * -1e6)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_median_and_quantiles_equal_numpys_bit_for_bit(seed):
    for values in _samples(seed):
        assert median(values) == np.median(values)
        for q in _QS:
            assert quantile(values, q) == np.quantile(values, q), (values.size, q)
        assert quantiles(values, _QS) == [float(v) for v in np.quantile(values, _QS)]
        assert quantiles(values, (0.5, 0.99)) == [float(v) for v in np.quantile(values, (0.5, 0.99))]


def test_nan_and_empty_give_nan_as_numpy_does():
    values = np.array([3.0, np.nan, 1.0, 2.0])
    assert np.isnan(median(values)) and np.isnan(np.median(values))
    assert np.isnan(quantile(values, 0.1))
    assert all(np.isnan(quantiles(values, (0.1, 0.5, 0.9))))
    assert np.isnan(median(np.array([])))


def test_the_input_is_left_as_it_was():
    values = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    median(values), quantile(values, 0.9), quantiles(values, (0.1, 0.5, 0.9))
    assert values.tolist() == [5.0, 1.0, 4.0, 2.0, 3.0]


def test_binned_quantiles_match_pandas_grouped_quantiles():
    rng = np.random.default_rng(3)
    bins_of = np.sort(rng.integers(0, 50, 5_000))
    values = rng.lognormal(3, 1, 5_000)
    values[rng.random(5_000) < 0.05] = np.nan
    p50, p95 = binned_quantiles(bins_of, values, 52, (0.5, 0.95))
    grouped = pd.Series(values).groupby(bins_of)
    expected50 = grouped.median().reindex(range(52)).to_numpy()
    expected95 = grouped.quantile(0.95).reindex(range(52)).to_numpy()
    np.testing.assert_allclose(p50, expected50, rtol=1e-9)
    np.testing.assert_allclose(p95, expected95, rtol=1e-9)
    assert np.isnan(p50[50]) and np.isnan(p50[51])  # bins without values


@pytest.mark.parametrize("seed", [0, 1])
def test_the_centred_moving_median_is_pandas_rolling_median(seed):
    from diagnose.detect.robust import centred_moving_median

    rng = np.random.default_rng(seed)
    for _ in range(400):
        n, window = int(rng.integers(0, 90)), int(rng.integers(1, 60)) | 1
        values = rng.normal(size=n)
        values[rng.random(n) < 0.3] = np.nan
        expected = pd.Series(values).rolling(window, center=True, min_periods=1).median().to_numpy()
        assert np.array_equal(centred_moving_median(values, window), expected, equal_nan=True)
