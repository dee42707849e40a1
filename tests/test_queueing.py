"""The queueing curve from an engine's own gauges, where no request log times a queue stage: the
arrivals are the completions plus the queue's growth, and the wait is the engine's own queue time
or, without one, Little's law (W = L / λ)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.facts.queueing import queue_windows

T0 = 1_764_460_800.0


def _server(tmp_path, **columns) -> str:
    n = 600
    frame = pd.DataFrame(
        {"ts": T0 + np.arange(n), **{k: v(n) if callable(v) else v for k, v in columns.items()}}
    )
    frame.to_csv(tmp_path / "server.csv", index=False)
    return str(tmp_path)


def test_littles_law_gives_the_wait_from_the_queue_depth_and_the_arrivals(tmp_path):
    # 4 waiting on average while 20 a second complete and the queue neither grows nor drains: 200 ms
    dump = load_dump(_server(tmp_path, queue_depth=lambda n: np.tile([3, 5], n // 2), throughput_rps=20.0))
    found = queue_windows(dump)
    assert found is not None and not isinstance(found, str)
    assert found.wait_ms == pytest.approx(200, rel=0.02) and found.rate_rps == pytest.approx(20, rel=0.02)
    assert "Little's law" in found.source and found.rho is None


def test_a_growing_queue_counts_as_arrivals_not_yet_served(tmp_path):
    # 20 a second completed while the queue grows by 5 a second: 25 a second arrived
    dump = load_dump(_server(tmp_path, queue_depth=lambda n: 5.0 * np.arange(n), throughput_rps=20.0))
    found = queue_windows(dump)
    assert found is not None and not isinstance(found, str)
    assert np.median(found.rate_rps) == pytest.approx(25, rel=0.02)


def test_the_engines_own_queue_time_is_read_before_littles_law(tmp_path):
    dump = load_dump(_server(tmp_path, queue_depth=4.0, throughput_rps=20.0, queue_ms=35.0))
    found = queue_windows(dump)
    assert found is not None and not isinstance(found, str)
    assert found.wait_ms == pytest.approx(35) and "the engine's own mean queue time" in found.source


def test_too_few_engine_samples_say_how_many_the_curve_needs(tmp_path):
    pd.DataFrame({"ts": T0 + np.arange(30), "queue_depth": 1, "throughput_rps": 5}).to_csv(
        tmp_path / "server.csv", index=False
    )
    found = queue_windows(load_dump(str(tmp_path)))
    assert isinstance(found, str) and "needs 60" in found and "30 have both" in found
