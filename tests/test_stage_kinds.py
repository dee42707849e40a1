"""Stage kinds follow the dump contract: decode is LLM token generation, and the manifest has the last word."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.facts.model import StageKind
from diagnose.facts.stages import stage_kind


def _llm_log(folder, manifest: str | None = None):
    rng = np.random.default_rng(3)
    n = 2000
    prefill = rng.lognormal(np.log(40), 0.3, n)
    decode = rng.lognormal(np.log(900), 0.3, n)  # generation dominates an LLM request
    detokenize = rng.lognormal(np.log(2), 0.2, n)
    pd.DataFrame(
        {
            "ts": 1.7e9 + np.sort(rng.uniform(0, 1800, n)),
            "latency_ms": prefill + decode + detokenize,
            "stage_prefill_ms": prefill,
            "stage_decode_ms": decode,
            "stage_detokenize_ms": detokenize,
            "output_len": rng.integers(50, 400, n),
        }
    ).to_csv(folder / "requests.csv", index=False)
    if manifest:
        (folder / "manifest.yaml").write_text(manifest)
    return folder


def test_the_contracts_conventional_stages_have_their_kinds():
    assert [stage_kind(n) for n in ("decode", "prefill", "forward")] == ["gpu"] * 3
    assert [stage_kind(n) for n in ("image_decode", "tokenize", "detokenize")] == ["cpu"] * 3
    assert [stage_kind(n) for n in ("queue", "batch_wait", "network")] == ["wait"] * 3
    assert stage_kind("rerank") == "other" and stage_kind("rerank", {"rerank": StageKind.GPU}) == "gpu"


def test_an_llm_request_log_is_never_called_cpu_bound_for_its_decode(report_of, tmp_path):
    report = report_of(_llm_log(tmp_path))
    stages = report["summary"]["stages"]
    assert stages["decode"]["kind"] == "gpu" and stages["prefill"]["kind"] == "gpu"
    assert "cpu-bound-stage" not in {h["id"] for h in report["hypotheses"]}
    assert report["facts"]["cpu_stage.name"]["value"] == "detokenize"


def test_the_manifest_declares_a_stages_kind_and_a_bad_kind_is_a_warning(report_of, tmp_path):
    report = report_of(_llm_log(tmp_path, "stages: {decode: cpu, detokenize: sideways}\n"))
    assert report["summary"]["stages"]["decode"]["kind"] == "cpu"
    assert any("detokenize: 'sideways' is not cpu, gpu or wait" in w for w in report["evidence"]["warnings"])


def test_ttft_and_tpot_are_in_every_form_of_the_summary(run_cli, tmp_path):
    import json

    folder = _llm_log(tmp_path)
    _, raw, _ = run_cli("file", folder, "--format", "json")
    llm = json.loads(raw)["summary"]["llm"]
    frame = pd.read_csv(folder / "requests.csv")
    expected_ttft = np.percentile(frame["latency_ms"] - frame["stage_decode_ms"], 99)
    expected_tpot = np.percentile(frame["stage_decode_ms"] / (frame["output_len"] - 1), 50)
    assert llm["ttft"]["p99"] == pytest.approx(expected_ttft, rel=1e-3)
    assert llm["tpot"]["p50"] == pytest.approx(expected_tpot, rel=1e-3)
    assert llm["tpot"]["source"] == "stage_decode_ms / (output_len - 1)"
    _, text, _ = run_cli("file", folder)
    assert "TTFT     P50" in text and "TPOT     P50" in text
    _, markdown, _ = run_cli("file", folder, "--format", "markdown")
    assert "| time to first token |" in markdown and "| time per output token |" in markdown


def test_logged_ttft_and_tpot_columns_are_used_as_they_are(report_of, tmp_path):
    n = 100
    pd.DataFrame(
        {
            "ts": 1.7e9 + np.arange(n),
            "latency_ms": 500.0,
            "ttft_ms": np.arange(n, dtype=float),
            "tpot_ms": 20.0,
        }
    ).to_csv(tmp_path / "requests.csv", index=False)
    llm = report_of(tmp_path)["summary"]["llm"]
    assert llm["ttft"]["p50"] == pytest.approx(49.5) and llm["ttft"]["source"] == "ttft_ms"
    assert llm["tpot"]["p99"] == pytest.approx(20.0)


def test_latency_in_no_stage_is_a_figure_of_its_own(report_of, run_cli, tmp_path):
    n = 300
    pd.DataFrame(
        {"ts": 1.7e9 + np.arange(n), "latency_ms": 100.0, "stage_tokenize_ms": 10.0, "stage_forward_ms": 6.0}
    ).to_csv(tmp_path / "requests.csv", index=False)
    report = report_of(tmp_path)
    assert report["summary"]["unaccounted_share"] == pytest.approx(0.84)
    assert report["facts"]["stages.unaccounted_share"]["value"] == pytest.approx(0.84)
    _, text, _ = run_cli("file", tmp_path)
    assert "in no stage" in text and "84%" in text


def _tokenizer_log(folder, waited: bool):
    """A service whose tokenizer thread is the bottleneck: requests queue in front of it."""
    rng = np.random.default_rng(5)
    n = 2000
    tokenize = rng.lognormal(np.log(12), 0.5, n)
    tokenize_queue = rng.lognormal(np.log(20), 0.9, n)  # the wait for the tokenizer thread
    forward = rng.lognormal(np.log(15), 0.3, n)
    columns = {
        "ts": 1.7e9 + np.sort(rng.uniform(0, 1800, n)),
        "stage_tokenize_ms": tokenize,
        "stage_forward_ms": forward,
        ("stage_tokenize_queue_ms" if waited else "stage_rpc_ms"): tokenize_queue,
    }
    frame = pd.DataFrame(columns)
    frame["latency_ms"] = tokenize + tokenize_queue + forward
    frame.to_csv(folder / "requests.csv", index=False)
    return folder


def test_waiting_for_a_stages_worker_counts_as_that_stages_cost(report_of, tmp_path):
    assert stage_kind("tokenize_queue") == "wait" and stage_kind("preprocess_wait") == "wait"
    report = report_of(_tokenizer_log(tmp_path, waited=True))
    facts = {name: fact["value"] for name, fact in report["facts"].items()}
    assert facts["cpu_stage.name"] == "tokenize"
    assert facts["cpu_stage.share_mean"] < 0.3 <= facts["cpu_stage.cost_share"]
    own, waited = facts["cpu_stage.share_mean"], facts["cpu_stage.wait_share"]
    assert facts["cpu_stage.cost_share"] == pytest.approx(own + waited)
    assert report["hypotheses"][0]["id"] == "cpu-bound-stage"


def test_a_wait_that_names_no_stage_is_not_counted_for_one(report_of, tmp_path):
    report = report_of(_tokenizer_log(tmp_path, waited=False))
    facts = {name: fact["value"] for name, fact in report["facts"].items()}
    assert facts["cpu_stage.wait_share"] == 0 and facts["cpu_stage.cost_share"] < 0.3
    assert "cpu-bound-stage" not in {h["id"] for h in report["hypotheses"] if h["score"] >= 0.5}


def test_time_in_no_stage_is_set_against_the_cpu_work_that_arrived_just_before():
    """On an event loop, a request waits for the CPU work of those that came just before it: with
    prompts of very different costs and steady arrivals, that work predicts the wait and their number
    does not."""
    import numpy as np
    import pandas as pd

    from diagnose.facts.model import Facts
    from diagnose.facts.stages import add_stage_facts

    rng = np.random.default_rng(3)
    n = 2000
    ts = 1_700_000_000 + np.arange(n) * 0.1  # ten a second, evenly: the count in any second is the same
    tokenize = rng.lognormal(np.log(20), 1.0, n)  # ms, on the loop
    done = np.concatenate(([0.0], np.cumsum(tokenize)))
    first = np.searchsorted(ts, ts - 1.0, side="left")
    ahead = done[np.arange(n)] - done[first]
    waited = 0.5 * ahead + rng.normal(0, 5, n).clip(0)  # what the loop had left to do of that work
    forward = np.full(n, 10.0)
    requests = pd.DataFrame(
        {
            "ts": ts,
            "stage_tokenize_ms": tokenize,
            "stage_forward_ms": forward,
            "latency_ms": tokenize + forward + waited,
        }
    )
    facts = Facts()
    add_stage_facts(facts, requests, "requests.csv")
    assert facts.values["stages.unaccounted_load_corr"].value > 0.8
    assert "stage_tokenize_ms" in facts.values["stages.unaccounted_load_corr"].source

    facts = Facts()  # without a CPU stage logged, only the arrivals' number is there to go by
    add_stage_facts(facts, requests.drop(columns=["stage_tokenize_ms"]), "requests.csv")
    assert abs(facts.values["stages.unaccounted_load_corr"].value) < 0.2
