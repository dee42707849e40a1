"""The spike detector against signals with known episodes, and the alignment test."""

from __future__ import annotations

import numpy as np
import pytest

from diagnose.detect.alignment import align
from diagnose.detect.episodes import Episode, find_episodes
from diagnose.detect.periodicity import periodicity
from diagnose.detect.shifts import change_points, detect_shifts
from fixtures.episodes import SHAPES, match, periodic_signal, random_bursts


def _detect(truth):
    episodes = find_episodes(truth.values, 0.0, truth.step_s)
    return [e for e in episodes if e.direction > 0]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("period_s", [60, 120, 300, 600])
def test_periodic_episodes_are_found_and_their_period_estimated(shape, period_s):
    truth = periodic_signal(seed=period_s, period_s=period_s, jitter_s=0.02 * period_s, shape=shape)
    found = _detect(truth)
    precision, recall = match([(e.start, e.end) for e in found], truth.episodes)
    assert precision >= 0.9 and recall >= 0.9
    result = periodicity(np.array([e.start for e in found]), (0.0, truth.values.size * truth.step_s))
    assert result.periodic
    assert result.period_s == pytest.approx(period_s, rel=0.05)
    assert result.occurrences >= 0.9 * len(truth.episodes)


def test_episode_bounds_and_peak_are_close_to_the_truth():
    truth = periodic_signal(seed=5, period_s=300, jitter_s=5, shape="square", missing=0.0)
    found = _detect(truth)
    starts = np.array([e.start for e in found])
    for start, end in truth.episodes:
        nearest = found[int(np.argmin(np.abs(starts - start)))]
        assert abs(nearest.start - start) <= 2 and abs(nearest.end - end) <= 2
        assert nearest.baseline == pytest.approx(100, abs=1)
        assert nearest.peak > 104


def test_random_bursts_are_rarely_called_periodic():
    claims = 0
    seeds = range(40)
    for seed in seeds:
        truth = random_bursts(seed=seed, rate_per_hour=15)
        found = _detect(truth)
        precision, recall = match([(e.start, e.end) for e in found], truth.episodes)
        assert precision >= 0.9 and recall >= 0.9
        result = periodicity(np.array([e.start for e in found]), (0.0, truth.values.size))
        claims += bool(result and result.periodic)
    # The test's level is 1 %; 3 or more claims in 40 would happen by chance with p < 0.01.
    assert claims <= 2


def test_too_few_occurrences_make_no_periodicity_claim():
    assert periodicity(np.array([100.0, 340.0, 580.0]), (0.0, 1000.0)) is None


def test_flat_noise_has_no_episodes_and_no_change_points():
    values = np.random.default_rng(3).normal(50, 2, 20_000)
    assert find_episodes(values, 0.0, 1.0) == []
    assert change_points(values, 0.0, 1.0) == []


def test_a_level_shift_is_a_change_point_not_an_episode():
    values = np.random.default_rng(4).normal(50, 2, 20_000)
    values[12_000:] += 20
    points = change_points(values, 0.0, 1.0)
    assert len(points) == 1 and abs(points[0] - 12_000) <= 10
    assert all(e.duration < 60 for e in find_episodes(values, 0.0, 1.0))


def _episodes(starts, length=15.0):
    return [Episode(s, s + length, 10.0, 1.0, 1) for s in starts]


def test_alignment_of_a_locked_signal_is_significant_and_reports_its_lag():
    rng = np.random.default_rng(0)
    latency = np.cumsum(240 + rng.normal(0, 6, 40))
    job = latency - 3.0
    result = align("latency", _episodes(latency), "job", _episodes(job), (0.0, latency[-1] + 300), 1.0)
    assert result.coincidence == 1.0 and result.locked == 1.0
    assert result.lag_s == pytest.approx(-3.0)
    assert result.p_value <= 0.002


def test_an_independent_job_with_the_same_period_is_not_significant():
    rng = np.random.default_rng(1)
    latency = np.cumsum(240 + rng.normal(0, 6, 40))
    job = np.cumsum(240 + rng.normal(0, 6, 40)) + 97.0
    result = align("latency", _episodes(latency), "job", _episodes(job), (0.0, latency[-1] + 300), 1.0)
    assert result.p_value > 0.05


def test_autocorrelated_noise_is_not_cut_into_steps():
    rng = np.random.default_rng(7)
    noise = np.zeros(3000)
    for i in range(1, noise.size):
        noise[i] = 0.9 * noise[i - 1] + rng.normal()
    assert detect_shifts(noise) == []
    shifted = noise.copy()
    shifted[1800:] += 25
    (point,) = detect_shifts(shifted)
    assert abs(point - 1800) <= 10


def test_the_vectorised_null_locks_exactly_as_the_one_shift_version():
    from diagnose.detect.alignment import _locked, locked_shares

    rng = np.random.default_rng(7)
    for case in range(30):
        ref = np.sort(rng.uniform(0, 3600, rng.integers(1, 40)))
        rows = np.sort(rng.uniform(0, 3600, (50, rng.integers(1, 60))), axis=1)
        if case % 3 == 0:  # some starts locked to the reference at a lag, as a cause would be
            rows[:, : min(ref.size, rows.shape[1])] = ref[: rows.shape[1]] + 4.0
            rows.sort(axis=1)
        width = [2.0, 5.0][case % 2]
        shares, lags = locked_shares(ref, rows, width, chunk_cells=500)
        for row, share, lag in zip(rows, shares, lags, strict=True):
            expected_share, expected_lag = _locked(ref, row, width)
            assert share == pytest.approx(expected_share)
            assert (np.isnan(lag) and np.isnan(expected_lag)) or lag == pytest.approx(expected_lag)


def _process_rows(pid, cmdline, start, end, cpu=150.0):
    return [
        {"ts": float(t), "pid": pid, "name": "python", "cmdline": cmdline, "cpu_pct": cpu}
        for t in range(start, end)
    ]


def _cpu_signals(rows):
    import pandas as pd

    from diagnose.detect.signals import build_signals
    from diagnose.dump.model import Dump, Manifest

    system = pd.DataFrame({"ts": np.arange(0.0, 400.0), "cpu_pct": 10.0})
    processes = pd.DataFrame(rows).sort_values("ts", kind="stable")
    dump = Dump("mem", {"system": system, "processes": processes}, {}, Manifest(interval_s=1.0))
    return [s for s in build_signals(dump) if s.name.startswith("processes.cpu_pct")]


def test_runs_of_one_job_with_different_arguments_are_one_signal():
    rows = (
        _process_rows(101, "python -m job --seconds 16.6", 50, 67)
        + _process_rows(102, "python -m job --seconds 17.7", 200, 218)
        + _process_rows(103, "python -m job --seconds 12", 330, 342)
    )
    (job,) = _cpu_signals(rows)
    assert job.meta["pids"] == [101, 102, 103]
    assert np.nansum(job.values > 0) == 17 + 18 + 12


def test_two_servers_that_differ_only_in_a_port_stay_two_signals():
    rows = _process_rows(201, "python serve.py --port 8000", 0, 400, 80.0) + _process_rows(
        202, "python serve.py --port 8001", 0, 400, 60.0
    )
    signals = _cpu_signals(rows)
    assert sorted(s.meta["pids"][0] for s in signals) == [201, 202]


def test_a_job_named_like_the_server_is_told_apart_by_pid_while_they_coexist():
    """The same name and no command line (a GPU's process table): the runs of the job that coexist with
    the server are another process, and the job's runs, one after another, stay one signal."""
    rows = (
        _process_rows(401, "", 0, 400, 80.0)
        + _process_rows(501, "", 60, 90, 40.0)
        + _process_rows(502, "", 300, 330, 40.0)
    )
    signals = sorted(_cpu_signals(rows), key=lambda s: s.meta["pids"])
    assert [s.meta["pids"] for s in signals] == [[401], [501, 502]]
    assert np.nansum(signals[1].values > 0) == 60


def test_kernel_threads_without_a_command_line_that_differ_in_numbers_stay_apart():
    rows = [
        {**row, "name": f"kworker/{cpu}:1-mm_percpu_wq", "cmdline": ""}
        for cpu, pid in ((0, 301), (1, 302))
        for row in _process_rows(pid, "", 0, 400, 30.0 + cpu)
    ]
    assert sorted(s.meta["pids"][0] for s in _cpu_signals(rows)) == [301, 302]
