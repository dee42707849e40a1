"""The expected gain of removing a cause, a counterfactual on the dump, judged against the run where the
cause was really absent: the same simulated service, the same draws, without the cold start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from diagnose.dump import load_dump
from diagnose.gain import expected_gain
from fixtures.simulate import T0, Service, simulate

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "dumps"


def _write(tables, folder: Path, starts: tuple[float, ...]) -> Path:
    """The requests, and the server's starts as the manifest states them."""
    folder.mkdir(parents=True, exist_ok=True)
    tables.frames["requests"].to_csv(folder / "requests.csv", index=False)
    stated = ", ".join(f"{T0 + start}" for start in starts)
    (folder / "manifest.yaml").write_text(f"format: diagnose-dump/1\nprocess_start: [{stated}]\n")
    return folder


@pytest.mark.parametrize("seed", [3, 4])
def test_the_p99_without_the_cold_requests_is_the_p99_of_the_same_service_warm(tmp_path, seed):
    cold = Service(starts=(0.0, 300.0), cold_factor=12.0, cold_tau_s=15.0)
    dump = load_dump(str(_write(simulate(cold, seed), tmp_path / "c", cold.starts)))
    gain = expected_gain("cold-start-contamination", dump)
    assert gain is not None
    warm = simulate(replace(cold, cold_factor=1.0), seed).frames["requests"]["latency_ms"].to_numpy()
    p99 = next(f for f in gain.figures if f.name == "p99")
    assert p99.expected_ms < p99.now_ms * 0.7  # the cold requests were the tail
    truth = float(np.quantile(warm, 0.99))
    assert p99.low_ms <= truth <= p99.high_ms, (truth, p99)


def test_no_counterfactual_without_a_start_nor_for_a_cause_that_has_none():
    healthy = load_dump(str(DUMPS / "healthy-steady"))
    assert expected_gain("cold-start-contamination", healthy) is None
    assert expected_gain("over-parallelism", load_dump(str(DUMPS / "over-parallelism"))) is None


def test_the_report_shows_the_gain_beside_the_hypothesis(report_of):
    report = report_of(DUMPS / "cold-start-contamination")
    first = report["hypotheses"][0]
    assert first["id"] == "cold-start-contamination"
    figures = {f["name"]: f for f in first["expected_gain"]["figures"]}
    assert figures["p99"]["low_ms"] <= figures["p99"]["expected_ms"] <= figures["p99"]["high_ms"]
    assert figures["p99"]["now_ms"] == pytest.approx(report["summary"]["latency_ms"]["p99"], rel=0.01)
    assert "served cold set aside" in first["expected_gain"]["how"]
    assert all("expected_gain" not in h for h in report_of(DUMPS / "memory-swapping")["hypotheses"])


@pytest.mark.parametrize("seed", [0, 6])
def test_the_latency_without_the_job_runs_is_the_latency_of_the_same_service_with_a_harmless_job(
    tmp_path, seed
):
    """The co-located job's runs set aside (as the spike analysis finds them) against the same draws
    with a job that takes nothing from the service."""
    from diagnose.pipeline import analyse_path
    from fixtures.generate import SCENARIOS, _stable_hash, write_scenario

    scenario = {s.name: s for s in SCENARIOS}["co-located-contention"]
    _, analysis = analyse_path(str(write_scenario(scenario, tmp_path / "c", seed)))
    gain = next(h.expected_gain for h in analysis.report.hypotheses if h.id == "co-located-contention")
    assert gain is not None and "runs of `python3 /opt/jobs/refresh_features.py" in gain.how
    harmless = replace(scenario.service, job_slowdown=1.0)
    truth = simulate(harmless, seed + _stable_hash(scenario.name)).frames["requests"]["latency_ms"].to_numpy()
    for figure in gain.figures:
        expected = float(np.quantile(truth, 0.5 if figure.name == "p50" else 0.99))
        assert figure.low_ms <= expected <= figure.high_ms, (figure, expected)
    p99 = next(f for f in gain.figures if f.name == "p99")
    assert p99.expected_ms < p99.now_ms * 0.9
