"""A text-generation engine's own evidence: KV-cache pressure and stalls, on real logs and on made ones."""

from __future__ import annotations

import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from tests.conftest import SHARED_DATA

SAMPLES = SHARED_DATA / "real-samples"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/data/real-samples is not here")

# What each real vLLM log shows, read by a person (see SOURCES.tsv / the files' own headers).
SHOWN = {
    "field-2026-12/vllm/08.log": "kv-cache-pressure",  # KV 99.2 %, 137 swapped, 9,832 pending, a preemption
    "formats/vllm_log/07.txt": "kv-cache-pressure",  # V1: KV 95-98 %, 23-43 waiting, running flat at 18-21
    "field-2026-12/vllm/11.log": "engine-stall",  # Engine iteration timed out, then the engine's death
    "field-2026-12/vllm/14.log": "engine-stall",  # 27 running at 0 tokens/s for 30 s, then the timeout
    "formats/vllm_log/12.txt": "engine-stall",  # MQLLMEngine is already dead, 500s to clients
    # the engine's own warning and nothing else: "preempted by PreemptionMode.RECOMPUTE mode because
    # there is not enough KV cache space" (06: without its log prefix, cumulative count 101)
    "formats/vllm_log/05.txt": "kv-cache-pressure",
    "formats/vllm_log/06.txt": "kv-cache-pressure",
}
ENGINE_CAUSES = {"kv-cache-pressure", "engine-stall"}


def _vllm_logs() -> list[str]:
    if not SAMPLES.is_dir():
        return []
    found = [
        *(SAMPLES / "field-2026-12" / "vllm").glob("*.log"),
        *(SAMPLES / "formats" / "vllm_log").glob("*"),
    ]
    return sorted(str(p.relative_to(SAMPLES)) for p in found)


@needs_samples
@pytest.mark.parametrize("name", sorted(SHOWN))
def test_a_real_engine_log_ranks_what_it_shows_first(name, run_cli):
    import json

    code, out, err = run_cli("file", SAMPLES / name, "--format", "json")
    assert code == 0, err
    top = json.loads(out)["hypotheses"][0]
    assert top["id"] == SHOWN[name]
    assert top["score"] >= 0.5
    assert all(line["sources"] for line in top["evidence"])


@needs_samples
@pytest.mark.parametrize("name", [n for n in _vllm_logs() if n not in SHOWN])
def test_no_other_real_engine_log_gets_a_likely_engine_finding(name, run_cli):
    import json

    code, out, err = run_cli("file", SAMPLES / name, "--format", "json")
    if code == 2:  # a log holding nothing diagnose reads (a traceback cut by the index)
        return
    likely = {h["id"] for h in json.loads(out)["hypotheses"] if h["score"] >= 0.5}
    assert not likely & ENGINE_CAUSES


def _facts(tmp_path, server: dict | None = None, log: str = ""):
    if server is not None:
        pd.DataFrame(server).to_csv(tmp_path / "server.csv", index=False)
    if log:
        (tmp_path / "engine.log").write_text(log)
    return compute_facts(load_dump(str(tmp_path)))


def test_requests_running_without_tokens_count_as_no_progress(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 10, 20, 30, 40, 50],
            "running": [5, 5, 5, 5, 0, 3],
            "tokens_per_s": [900, 0, 0, 0, 0, 400],
            "prompt_tokens_per_s": [0, 0, 0, 0, 0, 0],
        },
    )
    assert facts.get("engine.no_progress_s") == 30  # three samples 10 s apart; the idle one is not stuck


def test_requests_waiting_while_nothing_runs_and_nothing_is_prefilled_count_as_no_progress(tmp_path):
    """vLLM V0 "Running: 0 reqs, Pending: 12 reqs" then "Pending: 22 reqs" at 0 tokens/s: the scheduler
    took no step while requests waited all through the window."""
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 5, 10, 15, 20],
            "running": [2, 0, 0, 0, 0],
            "queue_depth": [0, 12, 22, 30, 0],
            "tokens_per_s": [0.4, 5.6, 0.0, 0.0, 0.0],
            "prompt_tokens_per_s": [67.0, 70.6, 0.0, 0.0, 0.0],
        },
    )
    assert facts.get("engine.no_progress_s") == 10  # 5-10 and 10-15 s; 15-20 s ends with nobody held


def test_a_request_that_arrives_as_an_idle_sample_closes_was_not_held_in_it(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 10, 20, 30],
            "running": [0, 0, 1, 1],
            "queue_depth": [0, 0, 0, 0],
            "tokens_per_s": [0, 0, 0, 40],  # idle until a request was admitted as the third sample closed
            "prompt_tokens_per_s": [0, 0, 0, 300],
        },
    )
    assert facts.get("engine.no_progress_s") == 0


def test_prefilling_is_progress(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 10, 20],
            "running": [4, 4, 4],
            "tokens_per_s": [0, 0, 0],
            "prompt_tokens_per_s": [5e3] * 3,
        },
    )
    assert facts.get("engine.no_progress_s") == 0


def test_a_sample_with_prompts_prefilled_and_fewer_tokens_than_requests_running_had_no_decode_step(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 5, 10, 15, 20],
            "running": [20, 22, 24, 24, 0],
            # 5 s at 1.2 tokens/s is 6 tokens for 22 running requests: the first tokens of the prompts
            # prefilled, no decode step; 122 tokens/s is decode running; an idle engine pauses nobody
            "tokens_per_s": [122.2, 1.2, 0.0, 130.0, 0.0],
            "prompt_tokens_per_s": [0.0, 1032.4, 1096.2, 900.0, 500.0],
        },
    )
    assert facts.get("engine.decode_paused_s") == 10
    assert facts.get("engine.no_progress_s") == 0  # prefilling is progress: no stall


def test_a_burst_admitted_as_a_sample_closes_paused_nobody_in_it(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 10, 20, 30],
            # 200 requests arrive at the end of the second window: 17 admitted, their prompts begun
            "running": [0, 17, 40, 0],
            "tokens_per_s": [0.0, 0.2, 2559.7, 2559.9],
            "prompt_tokens_per_s": [0.0, 51.2, 10188.3, 10239.7],
        },
    )
    assert facts.get("engine.decode_paused_s") == 0


def test_decode_running_beside_a_prefill_is_no_pause(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 1, 2],
            "running": [40, 40, 40],
            "tokens_per_s": [45, 41, 60],
            "prompt_tokens_per_s": [9e3] * 3,
        },
    )
    assert facts.get("engine.decode_paused_s") == 0  # 41 tokens in a second: one step for each of 40


def test_swapped_out_requests_are_the_most_the_engine_held_swapped(tmp_path):
    facts = _facts(tmp_path, {"ts": [0, 1, 2], "kv_cache_usage_pct": [99, 99, 98], "swapped": [0, 3, 1]})
    assert facts.get("engine.swapped.max") == 3


def test_waiting_counts_against_the_cache_only_while_it_is_full(tmp_path):
    facts = _facts(
        tmp_path,
        {
            "ts": [0, 1, 2, 3],
            "kv_cache_usage_pct": [97, 60, 92, 99],
            "queue_depth": [4, 30, 0, 2],
            "running": [20, 20, 20, 20],
        },
    )
    assert facts.get("engine.queued_while_full_share") == 0.5  # 0 s and 3 s; at 1 s the cache had room
    assert facts.get("engine.kv_full_share") == 0.5
    assert facts.get("engine.waiting.max") == 30


def test_preemptions_are_the_most_any_evidence_shows(tmp_path):
    log = (
        "WARNING 06-16 21:24:15 scheduler.py:1089] Sequence group 165 is preempted by PreemptionMode.SWAP mode "
        "because there is not enough KV cache space. total_num_cumulative_preemption=151\n"
    )
    facts = _facts(tmp_path, log=log)
    assert facts.get("engine.preemptions") == 151
    assert "cumulative" in facts.values["engine.preemptions"].source


def test_the_preemption_counter_is_integrated(tmp_path):
    facts = _facts(tmp_path, {"ts": [0, 10, 20], "preemptions_per_s": [0, 0.5, 0.2], "running": [1, 1, 1]})
    assert facts.get("engine.preemptions") == pytest.approx(7.0)


def test_stall_death_and_failed_start_lines_are_told_apart(tmp_path):
    log = (
        "INFO 08-29 02:12:02 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "0.0 tokens/s, Running: 27 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.9%\n"
        "ERROR 08-29 02:12:22 async_llm_engine.py:658] Engine iteration timed out. This should never happen!\n"
        "ERROR 08-29 02:12:22 async_llm_engine.py:45] Engine background task failed\n"
        'ERROR 08-29 02:12:22 async_llm_engine.py:45]   File "/x/async_llm_engine.py", line 1, in '
        "AsyncEngineDeadError\n"
        "(EngineCore_DP0 pid=563) ERROR 12-23 23:34:23 [core.py:708] EngineCore failed to start.\n"
    )
    (tmp_path / "engine.log").write_text(log)
    kinds = list(load_dump(str(tmp_path)).tables["events"]["kind"])
    assert kinds.count("engine_stall") == 1
    assert (
        kinds.count("engine_dead") == 1
    )  # the traceback's frame repeats the error; it is not a second death
    assert kinds.count("engine_start_failed") == 1


def test_the_start_up_lines_give_the_cache_capacity(tmp_path):
    log = (
        "(EngineCore_DP0 pid=1) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens\n"
        "(EngineCore_DP0 pid=1) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum concurrency for 32,768 "
        "tokens per request: 1.30x\n"
    )
    facts = _facts(tmp_path, log=log)
    assert facts.get("engine.kv_capacity_tokens") == 42656
    assert facts.get("engine.max_concurrency") == 1.3


def test_every_engine_metric_is_in_the_map_of_what_it_feeds():
    from pathlib import Path

    from diagnose.engines.metrics import engine_maps

    doc = (Path(__file__).resolve().parents[1] / "docs" / "llm-serving.md").read_text(encoding="utf-8")
    names = {
        n.removesuffix("_sum").removesuffix("_count")
        for mapping in engine_maps().values()
        for n in mapping.sample_names()
    }
    missing = sorted(n for n in names if f"`{n}" not in doc and n.removesuffix("_total") not in doc)
    assert missing == []


def test_the_engine_start_and_its_warm_up_are_events(tmp_path):
    log = (
        "INFO 09-03 16:28:10 [api_server.py:1882] vLLM API server version 0.10.2\n"
        "INFO 09-03 16:28:23 [core.py:75] Initializing a V1 LLM engine (v0.10.2) with config: model='m'\n"
        "INFO 09-03 16:29:04 [gpu_model_runner.py:3480] Graph capturing finished in 7 secs, took 0.95 GiB\n"
        "INFO 09-03 16:29:04 [core.py:210] init engine (profile, create kv cache, warmup model) took 25.99 seconds\n"
        "INFO 09-03 16:30:00 [loggers.py:271] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
        "throughput: 40.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%\n"
    )
    (tmp_path / "engine.log").write_text(log)
    events = load_dump(str(tmp_path)).tables["events"]
    assert list(events["kind"]) == ["restart", "warmup_end", "warmup_end"]  # one start: two lines, 13 s apart
