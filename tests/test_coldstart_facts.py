"""Which requests a (re)start made cold, when the start's stamp is not the new process's first request."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.facts.coldstart import cold_requests
from diagnose.pipeline import analyse

T0 = 1_764_460_800.0


def _dump(tmp_path, rows: list[tuple[float, float]], starts: list[float]):
    """A dump of requests at ``(seconds after T0, latency ms)`` and the server's starts (seconds after T0)."""
    frame = pd.DataFrame(rows, columns=["ts", "latency_ms"])
    frame["ts"] += T0
    frame.to_csv(tmp_path / "requests.csv", index=False)
    stamps = "".join(f"  - {T0 + s}\n" for s in starts)
    (tmp_path / "manifest.yaml").write_text(f"format: diagnose-dump/1\nprocess_start:\n{stamps}")
    return load_dump(str(tmp_path))


def _steady(
    begin: float, end: float, rng: np.random.Generator, rate: float = 10.0
) -> list[tuple[float, float]]:
    times = np.arange(begin, end, 1 / rate)
    return list(zip(times.tolist(), rng.uniform(15, 25, times.size).tolist(), strict=True))


def test_the_old_process_serving_past_the_stamp_does_not_hide_the_new_ones_cold_requests(tmp_path):
    # The restart is stamped at 100 s (psutil dates a birth from the boot clock, to the second); the old
    # process answers warm until 100.7 s, the new one listens from 102.7 s and its first eight are slow.
    rng = np.random.default_rng(0)
    rows = _steady(0, 100.7, rng)
    rows += [(102.7 + 0.05 * i, 900.0 - 50 * i) for i in range(8)]
    rows += _steady(103.2, 200, rng)
    dump = _dump(tmp_path, rows, starts=[-1.0, 100.0])
    cold, _ = cold_requests(dump, dump.table("requests"))
    latency = dump.table("requests")["latency_ms"].to_numpy()
    assert cold.sum() >= 8 and (latency[cold] > 100).sum() == 8
    assert not cold[(dump.table("requests")["ts"].to_numpy() - T0) < 100.7].any()
    facts = compute_facts(dump)
    assert facts.get("coldstart.cold_requests") == int(cold.sum())
    assert facts.get("coldstart.worst_share") == 1.0


def test_a_restart_served_warm_at_once_has_no_cold_requests_though_one_request_is_slow(tmp_path):
    # Near miss: a single slow request two seconds after the stamp is not a cold run (the median of
    # the next five stays settled), and the rule is ruled out, not fired.
    rng = np.random.default_rng(1)
    rows = _steady(0, 100, rng) + [(102.0, 900.0)] + _steady(102.05, 200, rng)
    dump = _dump(tmp_path, rows, starts=[-1.0, 100.0])
    cold, _ = cold_requests(dump, dump.table("requests"))
    assert cold.sum() == 0
    report = analyse(str(tmp_path))
    assert "cold-start-contamination" not in [h.id for h in report.hypotheses]


def test_a_slow_stretch_long_after_the_stamp_is_not_the_starts_doing(tmp_path):
    rng = np.random.default_rng(2)
    # Forty seconds after the restart, well within the first half of its run: something else.
    rows = _steady(0, 140, rng)
    rows += [(140.0 + 0.1 * i, 800.0) for i in range(10)]
    rows += _steady(141.0, 400, rng)
    dump = _dump(tmp_path, rows, starts=[-1.0, 100.0])
    cold, _ = cold_requests(dump, dump.table("requests"))
    assert cold.sum() == 0


def test_the_worst_share_asks_about_the_cold_requests_that_reach_the_tail(tmp_path):
    # A start whose first requests are slow (5 of them past warm traffic's P99), followed by a
    # settling stretch the cold window sweeps in: those cold-but-ordinary requests do not dilute the
    # question. Then the same start where warm traffic has slower requests still: the share falls.
    rng = np.random.default_rng(3)
    times = np.arange(1.1, 300, 0.1)
    warm = list(zip(times.tolist(), (20 * rng.lognormal(0, 0.4, times.size)).tolist(), strict=True))
    p99_warm = np.percentile([latency for _, latency in warm], 99)  # about 50 ms; the median 20
    first = [(0.1 * i, 600.0 - 40 * i) for i in range(5)] + [(0.5 + 0.1 * i, 35.0) for i in range(6)]
    assert 35.0 < p99_warm
    rows = first + warm
    dump = _dump(tmp_path, rows, starts=[0.0])
    facts = compute_facts(dump)
    assert facts.get("coldstart.cold_in_tail") == 5
    assert facts.get("coldstart.worst_share") == 1.0

    bursts = [(100.0 + 20 * i, 2000.0) for i in range(5)]  # warm, and slower than any cold request
    dump = _dump(tmp_path, sorted(rows + bursts), starts=[0.0])
    facts = compute_facts(dump)
    assert facts.get("coldstart.worst_share") <= 0.5
    report = analyse(str(tmp_path))
    assert "cold-start-contamination" not in [h.id for h in report.hypotheses if h.score >= 0.5]
