"""`diagnose compare`: verdicts on pairs with a known effect, the traffic and environment checks, the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from scipy.stats import ks_2samp

from benchmarks.bench_compare_coverage import coverage
from diagnose.bootstrap import (
    Blocks,
    Grid,
    optimal_block_length,
    t_quantile,
    time_blocks,
    weighted_quantile,
)
from diagnose.compare.traffic import kolmogorov_sf, ks_two_sample
from diagnose.compare.verdict import parse_gate
from diagnose.errors import InputError
from tests.conftest import ROOT

PAIRS = ROOT / "fixtures" / "pairs"
PAIR_NAMES = sorted(path.name for path in PAIRS.iterdir() if (path / "expected.yaml").exists())
_CACHE: dict[str, dict] = {}


@pytest.fixture
def compared(run_cli):
    """The JSON comparison of a committed pair, computed once per test run."""

    def compare(name: str) -> dict:
        if name not in _CACHE:
            code, out, err = run_cli(
                "compare", str(PAIRS / name / "before"), str(PAIRS / name / "after"), "--format", "json"
            )
            assert code == 0, err
            _CACHE[name] = json.loads(out)
        return _CACHE[name]

    return compare


def _figure(report: dict, name: str, where: str = "figures") -> dict:
    figures = report[where] if where == "figures" else report["traffic"][where]
    return next(f for f in figures if f["name"] == name)


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_each_pair_gets_its_known_verdict(compared, name):
    expected = yaml.safe_load((PAIRS / name / "expected.yaml").read_text())
    report = compared(name)
    assert report["format"] == "diagnose-compare/1"
    assert report["verdict"] == expected["verdict"], report["headline"]


def test_a_real_p99_improvement_is_measured_with_an_interval_that_excludes_no_change(compared):
    report = compared("improved-p99")
    p99 = _figure(report, "p99")
    assert p99["verdict"] == "better"
    assert p99["high"] < 0 and p99["low"] < p99["change"] < p99["high"]
    assert "block bootstrap over time" in p99["method"]
    assert _figure(report, "stage_forward_p99")["verdict"] == "better"  # where the gain came from
    assert report["traffic"]["same"] is True
    assert any(d["what"] == "setting cuda_graphs" and not d["blocks"] for d in report["differences"])


def test_shorter_requests_look_faster_until_compared_at_the_same_mix(compared):
    report = compared("shorter-mix")
    assert _figure(report, "p99")["verdict"] == "better"  # the naive comparison is fooled
    lengths = {check["column"]: check for check in report["traffic"]["lengths"]}
    assert lengths["input_len"]["differs"] and not lengths["output_len"]["differs"]
    assert report["traffic"]["reweighting"].startswith("after re-weighted to the before mix of input_len")
    assert report["traffic"]["work_differs"] is True
    service = {f["name"]: f for f in report["traffic"]["service"]}
    assert service["service_p99"]["verdict"] == "no significant change"
    assert report["verdict"] == "no significant change"
    assert "since the load differed" in report["headline"]


def test_a_median_gain_bought_with_the_tail_is_a_regression(compared):
    report = compared("pseudo-optimisation")
    assert _figure(report, "p50")["verdict"] == "better"
    assert _figure(report, "p99")["verdict"] == "worse"
    assert (
        report["headline"].startswith("regressed: P99 latency")
        and "although P50 latency" in report["headline"]
    )


def test_another_gpu_or_a_job_beside_the_service_makes_two_dumps_not_comparable(compared):
    gpu = {d["what"]: d for d in compared("different-gpu")["differences"]}
    assert gpu["GPU model"]["blocks"] and gpu["GPU model"]["after"] == "NVIDIA L4"
    background = [d for d in compared("background-job")["differences"] if d["kind"] == "background"]
    assert {d["what"] for d in background} >= {
        "other processes' CPU (p95 over time)",
        "other processes' GPU memory (peak)",
    }
    assert all(d["blocks"] for d in background)


def test_two_draws_of_the_same_service_change_nothing(compared):
    report = compared("no-change")
    decisive = [f for f in report["figures"] if f["name"] in ("p50", "p99", "throughput", "error_rate")]
    assert all(f["verdict"] == "no significant change" for f in decisive)
    assert report["differences"] == [] and report["diagnosis"] == []


def test_a_warm_up_is_left_out_of_the_comparison(compared):
    report = compared("restart-in-after")
    assert report["before"]["cold_excluded"] == 0
    assert report["after"]["cold_excluded"] > 10
    assert report["verdict"] == "no significant change"


def test_the_gate_fails_the_regressed_pair_and_passes_the_improved_one(run_cli):
    gate = ("--fail-on-regression", "p99:+5%,throughput:-3%,gpu_mem_peak:+10%")
    code, _, err = run_cli(
        "compare",
        str(PAIRS / "pseudo-optimisation" / "before"),
        str(PAIRS / "pseudo-optimisation" / "after"),
        *gate,
    )
    assert code == 1
    assert "--fail-on-regression: P99 latency +" in err and "beyond +5%" in err
    code, _, err = run_cli(
        "compare",
        str(PAIRS / "improved-p99" / "before"),
        str(PAIRS / "improved-p99" / "after"),
        *gate,
        "--format",
        "json",
    )
    assert code == 0, err


def test_the_gate_names_what_it_could_not_read(run_cli):
    code, out, err = run_cli(
        "compare",
        str(PAIRS / "no-change" / "before"),
        str(PAIRS / "no-change" / "after"),
        "--fail-on-regression",
        "ttft_p99:+5%",
        "--format",
        "json",
    )
    assert code == 0
    assert "ttft_p99 (not in both dumps): not gated" in err
    assert json.loads(out)["gate"] == {"tripped": []}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("p99", "expected FIGURE:[+|-]PERCENT"),
        ("p98:+5%", "'p98' is not a figure"),
        (",", "no figure given"),
    ],
)
def test_a_bad_gate_is_an_input_error_before_anything_is_read(spec, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("|", r"\|").replace("+", r"\+")):
        parse_gate(spec)


def test_gate_tolerances_read_signs_and_percentages():
    tolerances = parse_gate("p99:+5%, throughput:-3%,stage_forward_p99:10")
    assert [(t.figure, t.limit, t.direction) for t in tolerances] == [
        ("p99", 0.05, 1),
        ("throughput", 0.03, -1),
        ("stage_forward_p99", 0.10, 0),
    ]


def test_missing_dumps_and_bad_gates_exit_2_with_one_line(run_cli, tmp_path):
    code, _, err = run_cli("compare", str(tmp_path / "nope"), str(PAIRS / "no-change" / "after"))
    assert code == 2 and "nope: no such file or folder" in err
    code, _, err = run_cli(
        "compare",
        str(PAIRS / "no-change" / "before"),
        str(PAIRS / "no-change" / "after"),
        "--fail-on-regression",
        "p99:lots",
    )
    assert code == 2 and "expected FIGURE" in err and "bug" not in err


def test_two_dumps_with_nothing_in_common_to_compare_exit_2(run_cli, tmp_path):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "events.jsonl").write_text('{"ts": 1764547200, "kind": "restart"}\n')
    code, _, err = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 2 and "nothing to compare" in err


def test_markdown_and_text_carry_the_verdict_and_the_figures(run_cli, tmp_path):
    out = tmp_path / "review.md"
    code, _, err = run_cli(
        "compare",
        str(PAIRS / "improved-p99" / "before"),
        str(PAIRS / "improved-p99" / "after"),
        "-o",
        str(out),
    )
    assert code == 0, err
    markdown = out.read_text()
    assert markdown.startswith("# Comparison: improved")
    assert "| P99 latency |" in markdown and "## Traffic" in markdown and "## Environment" in markdown
    code, text, _ = run_cli(
        "compare", str(PAIRS / "improved-p99" / "before"), str(PAIRS / "improved-p99" / "after")
    )
    assert text.startswith("verdict: IMPROVED") and "P99 latency" in text


def test_the_same_pair_always_gives_the_same_comparison(run_cli):
    args = (
        "compare",
        str(PAIRS / "no-change" / "before"),
        str(PAIRS / "no-change" / "after"),
        "--format",
        "json",
    )
    assert run_cli(*args)[1] == run_cli(*args)[1]


def test_intervals_hold_the_true_change_about_95_percent_of_the_time():
    """Simulated pairs with a known shift (benchmarks/bench_compare_coverage.py runs the full set)."""
    found = coverage(pairs=120, requests=2000, seconds=300, shift=-0.2, tau=1.0, seed=3)
    # 120 pairs: the binomial standard error at 0.95 is 0.02, so these bounds are about 3 of them
    # below and 2 above (an interval widened too much is wrong too).
    for name in ("p50", "p99", "mean"):
        assert 0.88 <= found[name] <= 0.99, found


def test_intervals_hold_where_slow_spells_last_ten_seconds_of_a_five_minute_recording():
    """Few, correlated blocks: unwidened, these intervals held the change 82-87 % of the time."""
    found = coverage(pairs=120, requests=2000, seconds=300, shift=-0.2, tau=10.0, seed=4)
    for name in ("p50", "p99", "mean"):
        assert 0.88 <= found[name] <= 0.99, found


def test_the_t_quantile_is_scipys():
    from scipy.special import stdtrit

    for df in range(1, 100):
        for p in (0.9, 0.95, 0.975):  # the tails of 80 %, 90 % and 95 % intervals
            assert t_quantile(p, df) == pytest.approx(float(stdtrit(df, p)), rel=2e-3)


def test_the_widening_grows_with_fewer_blocks_and_with_memory_against_their_length():
    index = np.zeros(1, dtype="int64")
    many, few = Blocks(index, 100, 10.0), Blocks(index, 10, 30.0)
    # Memory 0: only the t correction, sqrt(b / (b - 1)) t_{b-1} / z; about 1.02 for 100 blocks.
    assert 1.0 < many.widening < 1.05 < few.widening < 1.25
    remembering = Blocks(index, 10, 30.0, memory_s=10.0)  # a third of the variance lost between blocks
    assert remembering.widening == pytest.approx(few.widening / np.sqrt(1 - 1 / 3))
    assert Blocks(index, 10, 30.0, memory_s=1e6).widening == pytest.approx(few.widening / np.sqrt(0.5))


def test_the_two_sample_ks_statistic_is_scipys():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 300, 800).astype(float), rng.integers(20, 320, 600).astype(float)
    statistic, p_value = ks_two_sample(a, b)
    reference = ks_2samp(a, b, method="asymp")
    assert statistic == pytest.approx(reference.statistic)
    assert p_value == pytest.approx(reference.pvalue, rel=0.2)


def test_the_kolmogorov_distribution_is_scipys():
    from scipy.special import kolmogorov

    for x in [0.0, 0.05, 0.2, 0.5, 0.79, 0.8, 0.81, 1.0, 1.36, 2.0, 3.0, 6.0, 30.0]:
        assert kolmogorov_sf(x) == pytest.approx(float(kolmogorov(x)), rel=1e-9, abs=1e-15), x


def test_the_block_length_grows_with_the_series_memory():
    rng = np.random.default_rng(1)
    white = rng.normal(size=2000)
    slow = np.empty(2000)
    slow[0] = 0
    for i in range(1, 2000):
        slow[i] = 0.95 * slow[i - 1] + rng.normal()
    assert optimal_block_length(white) < 3 < 10 < optimal_block_length(slow)
    ts = np.arange(2000.0)
    assert time_blocks(ts, np.exp(slow)).seconds > time_blocks(ts, np.exp(white)).seconds


def test_grid_bins_agree_with_a_search_of_the_edges():
    values = np.random.default_rng(2).lognormal(3, 1, 5000)
    for grid in (Grid.spanning(values), Grid.spanning(values - values.min())):
        searched = np.clip(
            np.searchsorted(grid.edges, values - (0 if grid.log else values.min()), "right") - 1,
            0,
            grid.edges.size - 2,
        )
        computed = grid.bins(values - (0 if grid.log else values.min()))
        assert np.mean(np.abs(searched - computed) <= 1) == 1.0  # the same bin, or its neighbour at an edge


def test_weighted_quantiles_match_repeated_values():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    weights = np.array([1.0, 3.0, 1.0, 5.0])
    repeated = np.repeat(values, weights.astype(int))
    for q in (0.1, 0.5, 0.9):
        assert weighted_quantile(values, weights, q) == np.quantile(repeated, q, method="inverted_cdf")


def test_compare_help_names_the_gate(run_cli, capsys):
    with pytest.raises(SystemExit) as stopped:
        run_cli("compare", "--help")
    assert stopped.value.code == 0 and "--fail-on-regression" in capsys.readouterr().out


def test_pairs_regenerate_to_the_same_bytes(tmp_path):
    from fixtures.pairs import main as write_pairs

    write_pairs(["--out", str(tmp_path)])
    for path in sorted(PAIRS.rglob("*")):
        if path.is_file():
            assert (tmp_path / path.relative_to(PAIRS)).read_bytes() == path.read_bytes(), path


def test_a_real_change_on_the_real_testbed_service_is_an_improvement(run_cli):
    """fixtures/recorded-pairs: the testbed service recorded with an 80 ms and then a 5 ms batch window."""
    pair = ROOT / "fixtures" / "recorded-pairs" / "batch-window"
    code, out, err = run_cli("compare", pair / "before", pair / "after", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == yaml.safe_load((pair / "expected.yaml").read_text())["verdict"]
    assert _figure(report, "stage_batch_wait_p50")["verdict"] == "better"
    assert report["traffic"]["same"] is True
    settings = {d["what"]: d for d in report["differences"] if d["kind"] == "settings"}
    assert settings["setting batch_window_ms"]["before"] == "80"
    assert settings["setting batch_window_ms"]["after"] == "5"
    assert report["comparable"] is True


def test_a_before_side_measured_in_a_second_process_gives_the_same_comparison(monkeypatch):
    from diagnose.compare import compare_dumps, parallel
    from diagnose.processes import beside

    before, after = str(PAIRS / "shorter-mix" / "before"), str(PAIRS / "shorter-mix" / "after")
    monkeypatch.setattr(parallel, "MIN_BYTES", 10**15)
    here = compare_dumps(before, after).to_dict()
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    started = []
    original = beside.subprocess.Popen
    monkeypatch.setattr(beside.subprocess, "Popen", lambda *a, **k: started.append(a) or original(*a, **k))
    assert compare_dumps(before, after).to_dict() == here
    assert len(started) == 1 and "diagnose.compare.side_process" in started[0][0]


def test_evidence_survives_its_json_form(run_cli):
    from diagnose.compare import measure_path
    from diagnose.compare.side_process import from_json, to_json

    evidence, _ = measure_path(str(PAIRS / "no-change" / "before"))
    again = from_json(json.loads(json.dumps(to_json(evidence))))
    assert again.measures.keys() == evidence.measures.keys()
    for name, measure in evidence.measures.items():
        assert again.measures[name].value == measure.value
        if measure.replicates is not None:
            assert np.array_equal(again.measures[name].replicates, measure.replicates)
    assert np.array_equal(again.samples["input_len"], evidence.samples["input_len"])
    assert again.hypotheses == evidence.hypotheses and again.environment == evidence.environment


def test_a_second_process_that_fails_costs_only_time(monkeypatch):
    from diagnose.compare import compare_dumps, parallel
    from diagnose.processes import beside

    before, after = str(PAIRS / "no-change" / "before"), str(PAIRS / "no-change" / "after")
    expected = compare_dumps(before, after).to_dict()
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(beside.sys, "executable", "/bin/false")
    assert compare_dumps(before, after).to_dict() == expected


def test_the_second_process_launcher_needs_only_the_standard_library():
    probe = "import sys, diagnose.compare.parallel; print(sorted({'numpy', 'pandas'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_diagnose_compare_starts_the_second_process_before_it_imports_pandas():
    """So that the two processes' imports overlap: the before side is then ready as soon as the after side."""
    before, after = str(PAIRS / "no-change" / "before"), str(PAIRS / "no-change" / "after")
    probe = (
        "import sys\n"
        "import diagnose.compare.parallel as parallel\n"
        "seen = []\n"
        "start = parallel.start_if_worth_it\n"
        "parallel.MIN_BYTES = 0\n"
        "parallel.start_if_worth_it = lambda *a: seen.append('pandas' in sys.modules) or start(*a)\n"
        "from diagnose.cli import main\n"
        f"code = main(['compare', {before!r}, {after!r}, '--format', 'json', '-o', {os.devnull!r}])\n"
        "print(code, seen)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    assert result.stdout.strip().splitlines()[-1] == "0 [False]", result.stderr
