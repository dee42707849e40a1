"""Batching facts: the batch-wait share and the throughput-versus-batch-size knee."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.facts.batching import add_batch_facts
from diagnose.facts.model import Facts
from fixtures.simulate import Service, simulate


def _requests(sizes: np.ndarray, forward_ms: np.ndarray, wait_ms: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": np.arange(sizes.size, dtype="float64"),
            "latency_ms": wait_ms + forward_ms + 5.0,
            "stage_batch_wait_ms": wait_ms,
            "stage_forward_ms": forward_ms,
            "batch_size": sizes,
        }
    )


def _facts(frame: pd.DataFrame) -> Facts:
    facts = Facts()
    add_batch_facts(facts, frame, "requests.csv")
    return facts


def test_knee_is_where_throughput_stops_rising():
    """Memory-bound up to 8 items (80 ms a batch), then 10 ms an item: the knee is 8."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 33, 5000).astype("float64")
    forward = np.maximum(80.0, 10.0 * sizes) * rng.lognormal(0, 0.03, sizes.size)
    facts = _facts(_requests(sizes, forward, np.full(sizes.size, 10.0)))
    assert facts.get("batch.knee_size") in (8.0, 9.0)
    assert facts.get("batch.capacity_items_per_s") == pytest.approx(100, rel=0.05)
    assert facts.get("batch.throughput_gain_past_knee") < 0.1
    assert facts.get("batch.forward_cost_past_knee") > 1.5
    assert facts.get("batch.share_oversized") == pytest.approx(
        (sizes >= 2 * facts.get("batch.knee_size")).mean()
    )
    assert "size 1:" in facts.get("batch.curve")


def test_no_knee_while_throughput_keeps_rising():
    sizes = np.tile(np.arange(1, 33, dtype="float64"), 100)
    facts = _facts(_requests(sizes, np.full(sizes.size, 80.0), np.zeros(sizes.size)))
    assert facts.get("batch.knee_size") >= 29
    assert facts.get("batch.share_oversized") == 0
    assert facts.get("batch.throughput_gain_past_knee") is None


def test_wait_share_is_the_batch_waits_part_of_mean_latency():
    sizes = np.full(100, 2.0)
    facts = _facts(_requests(sizes, np.full(100, 20.0), np.full(100, 15.0)))
    assert facts.get("batch.wait.share_mean") == pytest.approx(15 / 40)
    assert facts.get("batch.wait_to_forward") == pytest.approx(0.75)


def test_requests_without_batch_columns_give_no_batch_facts():
    frame = pd.DataFrame({"ts": np.arange(100.0), "latency_ms": np.full(100, 30.0)})
    assert not [name for name in _facts(frame).values if name.startswith("batch.")]


def test_simulated_batcher_respects_its_window_and_maximum():
    service = Service(duration_s=60, rate_rps=40, gpu_parallelism=1.0, batch_window_ms=50, max_batch=4)
    requests = simulate(service, seed=3).frames["requests"]
    assert requests["batch_size"].between(1, 4).all()
    assert (requests["stage_batch_wait_ms"] >= 0).all() and (requests["stage_queue_ms"] >= 0).all()
    assert requests["stage_batch_wait_ms"].max() <= 50.01
    stages = requests.filter(like="stage_").sum(axis=1)
    assert (requests["latency_ms"] >= stages - 0.05).all()
