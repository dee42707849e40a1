"""SGLang server logs: every generation of the batch line, retractions, capacity, and the findings they make.

The lines below are written in the forms SGLang's scheduler printed in each
release, as they appear in public issue threads (the threads are named; the
figures here are ours, not copied):

- 0.1 (2024, sgl-project/sglang#938): ``[gpu=0] Decode batch. #running-req: ..., token usage: ...``;
- 0.3 (2024, #1612, #1270): ``[16:43:29 TP0] Prefill batch. ... cache hit rate: 2.76%, ...``, no date;
- 0.4 (2025, #3909, #4184): ``[2025-02-27 04:46:39 TP0] Decode batch. ...`` and
  ``Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: a -> b`` on every TP rank;
- 0.5 (2025-26, #14972, #22166, #10053): ``Decode batch, ... cuda graph: True, ...`` (a trailing comma),
  prefill lines with ``input throughput (token/s)`` and ``#cached-token`` but no hit rate, stamps with
  no rank;
- hybrid models (2026, #26248): ``#full token: N, full token usage: 1.00, #swa token: ..., swa token usage``;
- under Ray (#44 of OpenClaw-RL): every line behind ``(SGLangEngine pid=41820)``.
"""

from __future__ import annotations

import json

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import Source, recognise

V01 = """\
[gpu=0] Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, gen throughput (token/s): 1397.13, #queue-req: 12279
[gpu=0] Decode batch. #running-req: 1008, #token: 55120, token usage: 0.94, gen throughput (token/s): 1390.02, #queue-req: 12281
"""
V03 = """\
[16:43:29] Prompts loaded.
[16:43:29 TP0] Prefill batch. #new-seq: 1, #new-token: 2062, #cached-token: 0, cache hit rate: 0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0
[16:43:30 TP0] Prefill batch. #new-seq: 4, #new-token: 8192, #cached-token: 291, cache hit rate: 2.76%, token usage: 0.04, #running-req: 1, #queue-req: 38
[16:43:31 TP0] Decode batch. #running-req: 5, #token: 10480, token usage: 0.05, gen throughput (token/s): 512.40, #queue-req: 38
"""
V04 = """\
[2025-03-07 21:49:30 TP0] Decode batch. #running-req: 64, #token: 250000, token usage: 0.98, gen throughput (token/s): 1811.20, #queue-req: 17
[2025-03-07 21:49:30 TP1] Decode batch. #running-req: 64, #token: 250000, token usage: 0.98, gen throughput (token/s): 1811.20, #queue-req: 17
[2025-03-07 21:49:33 TP1] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845
[2025-03-07 21:49:33 TP0] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845
[2025-03-07 21:49:45 TP0] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.0980 -> 0.1919
[2025-03-07 21:49:45 TP1] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.0980 -> 0.1919
"""
V05 = """\
[2025-12-12 08:43:59 TP0] Decode batch, #running-req: 6, #token: 1920, token usage: 0.94, cuda graph: True, gen throughput (token/s): 446.45, #queue-req: 5,
[2026-04-05 20:02:51] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK
[2026-04-05 20:02:52] Prefill batch, #new-seq: 1, #new-token: 300, #cached-token: 100, token usage: 0.08, #running-req: 31, #queue-req: 0, cuda graph: True, input throughput (token/s): 559.53
"""
HYBRID = """\
[2026-05-24 03:51:45 TP0] Decode batch, #running-req: 4, #full token: 2642688, full token usage: 1.00, #swa token: 14592, swa token usage: 0.06, cuda graph: True, gen throughput (token/s): 429.52, #queue-req: 3
"""
RAY = "".join(
    f"(SGLangEngine pid=41820) [2026-03-22 13:53:{37 + i:02d} TP0] Decode batch, #running-req: 6, "
    f"#token: {42414 + 240 * i}, token usage: 0.04, cuda graph: True, gen throughput (token/s): 1374.02, "
    "#queue-req: 0,\n"
    for i in range(5)
)


def _read(tmp_path, text: str, name: str = "sglang.log"):
    path = tmp_path / name
    path.write_text(text)
    source = Source.from_path(path)
    importer = recognise(source.text[:65536])
    assert importer is not None and importer.name == "sglang-log"
    return importer.read(source)


@pytest.mark.parametrize(
    ("text", "running", "queue", "kv_pct"),
    [
        (V01, 1010, 12279, 93.0),
        (V03, 0, 0, 0.0),
        (V04, 64, 17, 98.0),
        (V05, 6, 5, 94.0),
        (HYBRID, 4, 3, 100.0),
    ],
    ids=["0.1", "0.3", "0.4", "0.5", "hybrid"],
)
def test_every_generation_of_the_batch_line_gives_the_engines_gauges(tmp_path, text, running, queue, kv_pct):
    server = _read(tmp_path, text).tables["server"]
    first = server.iloc[0]
    assert (first["running"], first["queue_depth"]) == (running, queue)
    assert first["kv_cache_usage_pct"] == pytest.approx(kv_pct)


def test_decode_lines_give_the_token_rate_and_prefill_lines_the_prompt_rate_and_hits(tmp_path):
    v03 = _read(tmp_path, V03).tables["server"]
    assert list(v03["prefix_cache_hit_pct"].iloc[:2]) == [0.0, 2.76]
    assert v03["tokens_per_s"].iloc[2] == pytest.approx(512.4)
    v05 = _read(tmp_path, V05).tables["server"]
    prefill = v05.iloc[1]
    assert prefill["prompt_tokens_per_s"] == pytest.approx(559.53)
    assert prefill["prefix_cache_hit_pct"] == pytest.approx(25.0)  # 100 cached of 400
    assert prefill["tokens_per_s"] != prefill["tokens_per_s"]  # NaN: a prefill line says no decode rate


def test_only_the_lowest_rank_is_read_and_the_report_says_so(tmp_path):
    result = _read(tmp_path, V04)
    assert len(result.tables["server"]) == 1
    events = result.tables["events"]
    retractions = events[events["kind"] == "preemption"]
    assert list(retractions["requests"]) == [1, 2]
    assert all("TP0]" in message for message in retractions["message"])
    assert any("rank TP0" in w and "2 ranks" in w for w in result.warnings)


def test_a_time_without_a_date_is_put_on_the_files_date_and_said(tmp_path):
    import os

    path = tmp_path / "old.log"
    path.write_text(V03)
    os.utime(path, (1_722_000_000, 1_722_000_000))  # 2024-07-26
    result = recognise(V03).read(Source.from_path(path))
    first = result.tables["server"]["ts"].iloc[0]
    assert first == pytest.approx(1_721_952_000 + 16 * 3600 + 43 * 60 + 29)
    assert any("no date" in w and "2024-07-26" in w for w in result.warnings)


def test_lines_behind_a_ray_process_tag_are_read(tmp_path):
    server = _read(tmp_path, RAY).tables["server"]
    assert len(server) == 5
    assert server["ts"].is_monotonic_increasing


def test_start_up_lines_give_the_caches_capacity_and_the_events_of_a_start(tmp_path):
    log = (
        "[2026-06-28 15:16:30] server_args=ServerArgs(model_path='m', tp_size=1, mem_fraction_static=0.88)\n"
        "[2026-06-28 15:16:44 TP0] KV Cache is allocated. #tokens: 2086558, K size: 20.1 GB, V size: 20.1 GB\n"
        "[2026-06-28 15:16:45] max_total_num_tokens=2086558, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=33, context_len=256000, available_gpu_mem=17.22 GB\n"
        "[2026-06-28 15:17:10] The server is fired up and ready to roll!\n"
    )
    events = _read(tmp_path, log).tables["events"]
    assert list(events["kind"]) == ["restart", "kv_cache_config", "kv_cache_config", "warmup_end"]
    facts = compute_facts(load_dump(str(tmp_path)))
    assert facts.get("engine.kv_capacity_tokens") == 2086558
    assert facts.get("engine.max_concurrency") == pytest.approx(2086558 / 256000)


def test_a_scheduler_exception_is_the_engines_death_and_a_watchdog_timeout_a_stall(tmp_path):
    log = (
        "[2025-06-26 02:16:20 TP0] Decode batch. #running-req: 1, #token: 2102, token usage: 0.51, "
        "cuda graph: True, gen throughput (token/s): 93.51, #queue-req: 0\n"
        "[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "[2025-06-26 02:21:20 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n"
    )
    kinds = list(_read(tmp_path, log).tables["events"]["kind"])
    assert kinds == ["engine_dead", "engine_stall"]


def _hypotheses(run_cli, folder) -> dict[str, float]:
    code, out, err = run_cli("file", folder, "--format", "json")
    assert code == 0, err
    return {h["id"]: h["score"] for h in json.loads(out)["hypotheses"]}


def test_retractions_alone_settle_kv_cache_pressure(tmp_path, run_cli):
    (tmp_path / "sglang.log").write_text(V04)
    assert _hypotheses(run_cli, tmp_path).get("kv-cache-pressure", 0) >= 0.7


def test_a_busy_engine_with_room_in_its_cache_gets_no_likely_finding(tmp_path, run_cli):
    # near miss: many requests running, a full-looking token count, a short queue, the pool 40 % used
    lines = "".join(
        f"[2025-02-27 04:46:{s:02d} TP0] Decode batch. #running-req: 48, #token: {62531 + 320 * s}, "
        f"token usage: 0.{40 + s % 3}, gen throughput (token/s): {1850 + s:.2f}, #queue-req: {s % 2}\n"
        for s in range(0, 60)
    )
    (tmp_path / "sglang.log").write_text(lines)
    scores = _hypotheses(run_cli, tmp_path)
    assert not {name for name, score in scores.items() if score >= 0.5}
