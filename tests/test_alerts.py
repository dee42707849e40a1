"""diagnose alerts: thresholds from a baseline's own variation, checked by Prometheus's own tools.

``promtool check rules`` must accept what is written; ``promtool test rules``
(Prometheus's rule engine, fed the series a vLLM server would have exported
for the baseline's requests and then for a regression) must fire the P99 rule
on the regression and no rule on the baseline itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from diagnose.alerting import Figure, baseline_series, threshold
from diagnose.alerting.baseline import Series
from diagnose.dump import load_dump

# vLLM's buckets for vllm:e2e_request_latency_seconds (vllm/engine/metrics.py, request_latency_buckets)
BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
BASELINE_MIN = 120
REGRESSION_MIN = 60
INSTANCE = "gpu-node-7:8000"


def _requests(minutes: int, seed: int, slower: float = 1.0, start: float = 1_764_460_800.0) -> pd.DataFrame:
    """Five requests a second, lognormal latencies around 1.2 s whose median wanders by +-10 % over an hour."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(start, start + minutes * 60, size=5 * minutes * 60))
    drift = 1 + 0.1 * np.sin(2 * np.pi * (ts - start) / 3600)
    latency = 1200 * drift * slower * rng.lognormal(0, 0.35, size=len(ts))
    return pd.DataFrame({"ts": ts, "id": np.arange(len(ts)), "latency_ms": latency.round(2)})


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("baseline")
    _requests(BASELINE_MIN, seed=11).to_csv(folder / "requests.csv", index=False)
    (folder / "manifest.yaml").write_text(
        "format: diagnose-dump/1\nhost: gpu-node-7\ninterval_s: 1.0\n"
        "sources:\n  engine: {kind: vllm /metrics, target: 'http://127.0.0.1:8000/metrics', status: ok}\n"
    )
    return folder


def _diagnose(*args):
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args], capture_output=True, text=True, timeout=120
    )


def test_the_threshold_sits_above_the_baseline_by_its_own_spread_and_for_by_its_own_excursions():
    rng = np.random.default_rng(3)
    steady = Series(Figure.P99_LATENCY, 500 + rng.normal(0, 20, size=200), "ms", "test", True)
    wild = Series(Figure.P99_LATENCY, 500 + rng.normal(0, 80, size=200), "ms", "test", True)
    calm, noisy = threshold(steady, 60), threshold(wild, 60)
    assert calm is not None and noisy is not None
    assert 560 < calm.value < 620 and noisy.value > calm.value + 150  # not a fixed percentage: the spread's
    assert calm.value >= steady.values.max() and noisy.value >= wild.values.max()
    burst = np.full(200, 500.0) + rng.normal(0, 5, size=200)
    burst[50:58] = 600.0  # the baseline's own 8-minute excursion
    long_burst = threshold(Series(Figure.P99_LATENCY, burst, "ms", "test", True), 60)
    assert long_burst is not None and long_burst.for_s == 8 * 60 and long_burst.value >= 600
    flat = threshold(Series(Figure.THROUGHPUT, np.r_[np.zeros(10), np.full(90, 3.0)], "req/s", "t", True), 60)
    assert flat is None  # a throughput that reaches zero in the baseline: no lower bound means anything


def test_the_figures_come_from_the_requests_as_the_rule_evaluates_them(baseline):
    series, missing = baseline_series(load_dump(str(baseline)), 300, 60)
    by_figure = {s.figure: s for s in series}
    assert set(by_figure) == {Figure.P99_LATENCY, Figure.THROUGHPUT}
    p99 = by_figure[Figure.P99_LATENCY]
    assert len(p99.values) == BASELINE_MIN - 5 and not p99.exact  # no buckets: not Prometheus's figure
    bucketed, _ = baseline_series(load_dump(str(baseline)), 300, 60, {Figure.P99_LATENCY: BUCKETS})
    interpolated = bucketed[0].values
    assert bucketed[0].exact and np.all(interpolated >= 2000) and np.all(interpolated <= 5000)
    assert np.abs(interpolated - p99.values).max() > 500  # a straight line across a 2.5 s wide bucket
    assert np.allclose(by_figure[Figure.THROUGHPUT].values, 5, rtol=0.1)
    assert any("ttft_p99" in reason for reason in missing) and any("gpu_memory_peak" in r for r in missing)


def test_a_baseline_too_short_for_its_window_is_refused_with_the_reason(baseline, tmp_path):
    result = _diagnose("alerts", str(baseline), "--window", "30m")
    assert result.returncode == 2 and "fewer than 5 windows of 30 min" in result.stderr
    result = _diagnose("alerts", str(baseline), "--selector", "job=vllm")
    assert result.returncode == 2 and "--selector: expected label matchers" in result.stderr
    result = _diagnose("alerts", str(baseline), "--engine", "nope")
    assert result.returncode == 2 and "--engine 'nope': expected one of" in result.stderr


def _counters(frame: pd.DataFrame, minutes: int, start: float) -> dict[str, list[int]]:
    """The cumulative counters vLLM would have exported at the end of each minute."""
    ends = start + 60 * np.arange(minutes + 1)
    done = np.searchsorted(np.sort(frame["ts"].to_numpy()), ends, side="right")
    order = np.argsort(frame["ts"].to_numpy())
    latency_in_time = (frame["latency_ms"].to_numpy() / 1000)[order]
    series = {}
    for bound in [*BUCKETS, float("inf")]:
        below = np.cumsum(latency_in_time <= bound)
        series["+Inf" if bound == float("inf") else f"{bound:g}"] = [
            int(below[d - 1]) if d else 0 for d in done
        ]
    series["count"] = [int(d) for d in done]
    return series


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool is not installed (the prometheus package)"
)
def test_prometheus_fires_the_p99_rule_on_a_regression_and_nothing_on_the_baseline(baseline, tmp_path):
    rules = tmp_path / "rules.yml"
    k8s = tmp_path / "rules.k8s.yaml"
    result = _diagnose(
        "alerts", str(baseline), "--window", "5m", "--every", "1m", "-o", str(rules),
        "--prometheus-rule", str(k8s), "--serve-url", "http://diagnose-serve:9177",
        "--buckets", "p99_latency=" + ",".join(f"{b:g}" for b in BUCKETS),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    checked = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    resource = yaml.safe_load(k8s.read_text())
    assert resource["kind"] == "PrometheusRule" and resource["spec"] == yaml.safe_load(rules.read_text())
    written = yaml.safe_load(rules.read_text())
    names = [rule["alert"] for rule in written["groups"][0]["rules"]]
    assert names == ["DiagnoseP99LatencyHigh", "DiagnoseThroughputLow"]
    assert (
        "/latest?alert=DiagnoseP99LatencyHigh"
        in written["groups"][0]["rules"][0]["annotations"]["diagnose_report"]
    )
    # promtool compares annotations exactly; the test judges the expressions, thresholds and for:
    for rule in written["groups"][0]["rules"]:
        rule.pop("annotations")
    bare = tmp_path / "bare.yml"
    bare.write_text(yaml.safe_dump(written, sort_keys=False))

    start = 1_764_460_800.0
    before = pd.read_csv(baseline / "requests.csv")
    # P99 x2.5: vLLM's buckets are 2.5-5 s and 5-10 s about this P99, and Prometheus's line within one
    # moves its P99 between 2.4 and 4.4 s on the baseline alone; a regression that stays inside the
    # 2.5-5 s bucket (x1.4 to x1.8) is not seen in its histogram at all (measured; docs/serve.md).
    after = _requests(REGRESSION_MIN, seed=12, slower=2.5, start=start + BASELINE_MIN * 60)
    counters_before = _counters(before, BASELINE_MIN, start)
    counters_after = _counters(after, REGRESSION_MIN, start + BASELINE_MIN * 60)
    series = []
    for key, values in counters_before.items():
        carried = [v + values[-1] for v in counters_after[key][1:]]
        text = " ".join(str(v) for v in values + carried)
        name = "vllm:request_success_total" if key == "count" else "vllm:e2e_request_latency_seconds_bucket"
        labels = f'instance="{INSTANCE}"' + ("" if key == "count" else f',le="{key}"')
        series.append({"series": f"{name}{{{labels}}}", "values": text})
    quiet = [
        {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []}
        for minute in range(10, BASELINE_MIN + 1, 5)
        for name in names
    ]
    fired = {
        "eval_time": f"{BASELINE_MIN + 30}m",
        "alertname": "DiagnoseP99LatencyHigh",
        "exp_alerts": [
            {"exp_labels": {"instance": INSTANCE, "severity": "warning", "diagnose_figure": "p99_latency"}}
        ],
    }
    tests = {
        "rule_files": [str(bare)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [*quiet, fired]}],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    ran = subprocess.run(
        ["promtool", "test", "rules", str(tmp_path / "tests.yml")], capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]


def test_an_archived_baseline_whose_dump_is_gone_sets_the_same_thresholds_from_its_kept_requests(
    baseline, tmp_path
):
    copy = tmp_path / "baseline"
    shutil.copytree(baseline, copy)
    archive = tmp_path / "archive.sqlite"
    added = _diagnose("archive", "add", str(copy), "--archive", str(archive), "--label", "v1")
    assert added.returncode == 0, added.stderr
    from_dump = _diagnose("alerts", str(copy), "--engine", "vllm")
    shutil.rmtree(copy)
    from_archive = _diagnose("alerts", "--archive-entry", "1", "--archive", str(archive), "--engine", "vllm")
    assert from_archive.returncode == 0, from_archive.stderr
    assert "its sample of 36,000 of 36,000 requests" in from_archive.stderr  # under the sample's size: all
    rules = [yaml.safe_load(r.stdout)["groups"][0]["rules"] for r in (from_dump, from_archive)]
    assert [r["expr"] for r in rules[0]] == [r["expr"] for r in rules[1]]
    assert [r["for"] for r in rules[0]] == [r["for"] for r in rules[1]]
    gone = _diagnose("alerts", "--archive-entry", "1", "--archive", str(archive))
    assert gone.returncode == 2 and "give --engine" in gone.stderr
