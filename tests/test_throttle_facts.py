"""The throttle facts judge each GPU on its own and name the worst one."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump import load_dump
from diagnose.facts import compute_facts


def _facts(tmp_path, gpu_rows: pd.DataFrame):
    gpu_rows.to_csv(tmp_path / "gpu.csv", index=False)
    return compute_facts(load_dump(str(tmp_path)))


def _gpus(seconds: int, gpus: list, capped: dict) -> pd.DataFrame:
    """Every GPU sampled each second; ``capped`` GPUs report a power cap (at 1,500 of 1,980 MHz) in the
    given share of their seconds."""
    rows = []
    for second in range(seconds):
        for gpu in gpus:
            throttled = second < capped.get(gpu, 0.0) * seconds
            rows.append(
                {
                    "ts": 1_764_460_800 + second,
                    "gpu": gpu,
                    "util_pct": 80.0,
                    "sm_clock_mhz": 1500 if throttled else 1980,
                    "max_sm_clock_mhz": 1980,
                    "throttle_reasons": "sw_power_cap" if throttled else "none",
                }
            )
    return pd.DataFrame(rows)


def test_the_gpu_that_throttles_most_is_named_though_the_others_never_do(tmp_path):
    facts = _facts(tmp_path, _gpus(100, list(range(8)), {5: 0.4}))
    assert facts.get("gpu.throttle_gpu") == "GPU 5"
    assert facts.get("gpu.throttled_share") == 0.4
    assert np.isclose(facts.get("gpu.sm_clock_ratio.throttled_p50"), 1500 / 1980)


def test_of_two_gpus_throttled_alike_the_first_seen_is_named(tmp_path):
    facts = _facts(tmp_path, _gpus(50, [2, 7, 1], {7: 0.3, 1: 0.3}))
    assert facts.get("gpu.throttle_gpu") == "GPU 7"


def test_rows_without_a_gpu_index_name_no_gpu(tmp_path):
    rows = _gpus(50, [0, 1], {1: 0.5})
    rows.loc[0, "gpu"] = np.nan  # the first row of all: once enough to be "the worst GPU"
    facts = _facts(tmp_path, rows)
    assert facts.get("gpu.throttle_gpu") == "GPU 1"


def test_no_gpu_index_at_all_judges_the_rows_together(tmp_path):
    rows = _gpus(50, [0], {0: 0.5}).assign(gpu=np.nan)
    facts = _facts(tmp_path, rows)
    assert facts.get("gpu.throttled_share") == 0.5


def _requests(
    seconds: int, gpus: list, slow_gpu: int, slow_until: float, worker: str = "gpu{}"
) -> pd.DataFrame:
    """A request per GPU per second; the slow GPU's forward takes 1.3x while it is capped."""
    rows = []
    for second in range(seconds):
        for gpu in gpus:
            slow = gpu == slow_gpu and second < slow_until * seconds
            rows.append(
                {
                    "ts": 1_764_460_800 + second + 0.5,
                    "latency_ms": 60.0,
                    "stage_forward_ms": 52.0 if slow else 40.0,
                    "worker": worker.format(gpu),
                }
            )
    return pd.DataFrame(rows)


def test_the_forward_cost_of_one_gpu_of_eight_is_read_from_the_requests_it_served(tmp_path):
    """Seven GPUs at full clocks serve most requests in GPU 5's capped seconds: together they read as
    no cost (1.0x), GPU 5's own requests as its 1.3x."""
    _requests(100, list(range(8)), 5, 0.4).to_csv(tmp_path / "requests.csv", index=False)
    facts = _facts(tmp_path, _gpus(100, list(range(8)), {5: 0.4}))
    assert np.isclose(facts.get("gpu.throttle_forward_cost"), 1.3)
    assert "of the requests GPU 5 served" in facts.values["gpu.throttle_forward_cost"].source


def test_without_the_gpu_each_request_ran_on_the_cost_is_not_guessed_from_all_of_them(tmp_path):
    _requests(100, list(range(8)), 5, 0.4, worker="replica-{}").to_csv(tmp_path / "requests.csv", index=False)
    facts = _facts(tmp_path, _gpus(100, list(range(8)), {5: 0.4}))
    assert facts.get("gpu.throttle_forward_cost") is None
    assert "which of the 8 GPUs served them" in facts.absent["gpu.throttle_forward_cost"]
