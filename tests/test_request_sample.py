"""A request table above the size the analysis holds: counted in full, analysed on a uniform sample.

The cap is lowered here so that a simulated service's ten minutes stand for a busy service's day; the
analysis of the sample is held against the analysis of every request of the same dump."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import diagnose.dump.sample as sample_module
from diagnose.dump import load_dump
from diagnose.facts import compute_facts


def _as_parquet(folder: Path) -> None:
    """The dump's request table as Parquet, the format a busy service's day is kept in."""
    requests = load_dump(str(folder)).tables["requests"]
    for written in folder.glob("requests.*"):
        written.unlink()
    pq.write_table(pa.Table.from_pandas(requests, preserve_index=False), folder / "requests.parquet")


def _scenario(name: str, folder: Path, seed: int = 0) -> Path:
    from fixtures.generate import SCENARIOS, write_scenario

    path = write_scenario({s.name: s for s in SCENARIOS}[name], folder, seed)
    _as_parquet(path)
    return path


def _requests_table(folder: Path, rows: int) -> Path:
    rng = np.random.default_rng(3)
    latency = rng.lognormal(np.log(50), 0.4, rows)
    latency[rows // 2] = 9_000.0  # one request far slower than any other
    status = np.where(rng.random(rows) < 0.01, "error", "ok").astype(object)
    status[[7, 4_000]] = "oom"  # two out-of-memory failures among thousands
    folder.mkdir()
    frame = pd.DataFrame(
        {
            "ts": 1_764_460_800.0 + np.sort(rng.uniform(0, 600, rows)),
            "latency_ms": latency,
            "ttft_ms": latency / 4,
            "status": status,
        }
    )
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "requests.parquet")
    return folder


def test_a_table_above_the_cap_is_counted_in_full_and_analysed_on_a_seeded_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(sample_module, "ANALYSED_REQUESTS", 1_000)
    folder = _requests_table(tmp_path / "big", 10_000)
    dump = load_dump(str(folder))
    requests = dump.tables["requests"]
    assert dump.request_sample is not None and dump.request_sample.total == 10_000
    assert 850 <= len(requests) <= 1_150 and requests["ts"].is_monotonic_increasing
    assert any("10,000 requests; the analysis reads a uniform sample of" in w for w in dump.warnings)
    assert requests.equals(load_dump(str(folder)).tables["requests"])  # the same file, the same sample

    facts = compute_facts(dump)
    truth = pd.read_parquet(folder / "requests.parquet")
    assert facts.get("requests.count") == 10_000
    assert facts.get("requests.oom_count") == 2  # counted over every request, not the sample's
    assert facts.get("requests.error_rate") == pytest.approx((truth["status"] != "ok").mean())
    assert facts.summary.latency_ms["max"] == 9_000.0
    assert facts.get("latency.p50_ms") == pytest.approx(float(truth["latency_ms"].median()), rel=0.05)
    assert sum(w.requests for w in facts.summary.windows) == 10_000
    # a moment is silent only if every request in flight is: not read from 1 in 10 of them
    assert "every request in flight at once" in facts.absent["requests.stream_silence_s"]


def test_a_csv_above_the_cap_is_streamed_and_one_whose_later_rows_change_type_is_read_whole(
    tmp_path, monkeypatch
):
    """A CSV says nothing of its length: its rows are estimated from its first block's, and a block
    whose values do not fit the first block's types sends the file to the whole read, which reads
    damage row by row."""
    monkeypatch.setattr(sample_module, "ANALYSED_REQUESTS", 1_000)
    monkeypatch.setattr(sample_module, "_CSV_BLOCK_BYTES", 64 << 10)
    folder = _requests_table(tmp_path / "csv", 10_000)
    frame = pd.read_parquet(folder / "requests.parquet")
    (folder / "requests.parquet").unlink()
    frame.to_csv(folder / "requests.csv", index=False)
    dump = load_dump(str(folder))
    assert dump.request_sample is not None and dump.request_sample.total == 10_000
    assert 700 <= len(dump.tables["requests"]) <= 1_300  # the estimate from the first block, near enough
    assert compute_facts(dump).get("requests.oom_count") == 2
    frame = frame.astype({"latency_ms": "object"})
    frame.loc[9_000, "latency_ms"] = "slow"  # far past the first block
    frame.to_csv(folder / "requests.csv", index=False)
    dump = load_dump(str(folder))
    assert dump.request_sample is None and len(dump.tables["requests"]) == 10_000
    assert any("'slow'" in w for w in dump.warnings)


def test_a_table_at_or_below_the_cap_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(sample_module, "ANALYSED_REQUESTS", 10_000)
    dump = load_dump(str(_requests_table(tmp_path / "small", 10_000)))
    assert dump.request_sample is None and len(dump.tables["requests"]) == 10_000
    assert dump.requests_per_row() == 1.0


@pytest.mark.parametrize("name", ["co-located-contention", "cpu-bound-stage"])
def test_the_sample_names_the_cause_the_whole_table_names(tmp_path, monkeypatch, name):
    """A third of a simulated service's requests give the diagnosis all of them give: the same cause
    first, its score within 0.1, and the same throughput (counted, not sampled)."""
    from diagnose.pipeline import analyse_path

    folder = _scenario(name, tmp_path / name)
    _, whole = analyse_path(str(folder), helper=False)
    monkeypatch.setattr(
        sample_module, "ANALYSED_REQUESTS", len(pd.read_parquet(folder / "requests.parquet")) // 3
    )
    dump, sampled = analyse_path(str(folder), helper=False)
    assert dump.request_sample is not None
    first, again = whole.report.hypotheses[0], sampled.report.hypotheses[0]
    assert again.id == first.id == name
    assert again.score == pytest.approx(first.score, abs=0.1)
    assert sampled.report.number("requests.throughput_rps") == pytest.approx(
        whole.report.number("requests.throughput_rps"), rel=0.01
    )
    assert sampled.report.fact("requests.count") == whole.report.fact("requests.count")
