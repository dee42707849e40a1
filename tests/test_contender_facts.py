"""Latency while another process runs: asked from the process's own episodes, not only the latency's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.pipeline import analyse
from diagnose.report import Report

T0 = 1_764_460_800.0
RUNS = [(100.0 + 150 * i, 120.0 + 150 * i) for i in range(6)]  # a job every 150 s, 20 s each


def _write(folder, slowdown: float, surge: float = 1.0) -> None:
    """15 minutes of sparse requests (8/s) and a job on the host; latency x ``slowdown`` and arrivals
    x ``surge`` while it runs."""
    rng = np.random.default_rng(7)
    arrivals = np.sort(rng.uniform(0, 900, 7200))
    running = np.zeros(arrivals.size, dtype=bool)
    for a, b in RUNS:
        running |= (arrivals >= a) & (arrivals < b)
    extra = np.concatenate([rng.uniform(a, b, int((surge - 1) * 8 * (b - a))) for a, b in RUNS])
    arrivals = np.sort(np.concatenate([arrivals, extra]))
    running = np.zeros(arrivals.size, dtype=bool)
    for a, b in RUNS:
        running |= (arrivals >= a) & (arrivals < b)
    latency = 20 * rng.lognormal(0, 0.8, arrivals.size) * np.where(running, slowdown, 1.0)
    pd.DataFrame({"ts": T0 + arrivals, "latency_ms": latency.round(2)}).to_csv(
        folder / "requests.csv", index=False
    )
    (folder / "manifest.yaml").write_text("format: diagnose-dump/1\nserver_pids: [1000]\n")
    rows = []
    for second in range(900):
        busy = any(a <= second < b for a, b in RUNS)
        rows.append(
            {
                "ts": T0 + second,
                "pid": 1000,
                "name": "python",
                "cmdline": "python -m serve --port 8000",
                "cpu_pct": 150.0 + rng.normal(0, 5),
                "max_thread_cpu_pct": 60.0 + rng.normal(0, 3),
            }
        )
        rows.append(
            {
                "ts": T0 + second,
                "pid": 4242,
                "name": "python3",
                "cmdline": "python3 /opt/jobs/nightly_export.py",
                "cpu_pct": 95.0 if busy else 0.5,
                "max_thread_cpu_pct": 90.0 if busy else 0.5,
            }
        )
    pd.DataFrame(rows).to_csv(folder / "processes.csv", index=False)


def _colocated(report: Report) -> tuple[float | None, dict]:
    score = next((h.score for h in report.hypotheses if h.id == "co-located-contention"), None)
    facts = {k: v.value for k, v in report.facts.items() if k.startswith("spikes.contender.")}
    return score, facts


def test_latency_doubled_in_every_run_of_a_job_is_found_from_the_jobs_side(tmp_path):
    _write(tmp_path, slowdown=2.0)
    score, facts = _colocated(analyse(str(tmp_path)))
    assert facts["spikes.contender.runs"] == len(RUNS)
    assert 1.6 <= facts["spikes.contender.latency_ratio"] <= 2.5
    assert facts["spikes.contender.p_value"] <= 0.05
    assert score is not None and score >= 0.5


def test_a_job_that_latency_does_not_notice_is_not_blamed(tmp_path):
    # Near miss: the same job, the same runs, and latency as before.
    _write(tmp_path, slowdown=1.0)
    score, facts = _colocated(analyse(str(tmp_path)))
    assert facts["spikes.contender.latency_ratio"] < 1.3
    assert score is None


def test_a_process_that_runs_with_the_load_is_not_taken_for_a_contender(tmp_path):
    # Near miss: arrivals triple while it runs (the client sending a burst) and latency rises with them.
    _write(tmp_path, slowdown=2.0, surge=3.0)
    score, facts = _colocated(analyse(str(tmp_path)))
    assert facts["spikes.contender.throughput_ratio"] >= 2
    assert score is None or score < 0.5
