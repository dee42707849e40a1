"""TGI and TEI logs: the router's per-request timings, the launcher's starts and failures.

The lines are written in the forms TGI prints (its router's tracing spans, the
launcher's messages), as they appear in public issue threads; the figures are
ours: huggingface/text-generation-inference#832 (1.0 launcher, ``Args {``),
#2572 (2.x shards, "Shard ready in 218.6s rank=4"), #1067 (warm-up error and
traceback), #1763 (a log shipped through syslog, colours written out as
``#033[2m``), #3203 (2.x router, "Connected"), text-embeddings-inference#305
(TEI ``openai_embed{total_time=... tokenization_time=...}``).
"""

from __future__ import annotations

import json

import pytest

from diagnose.importers import Source, recognise

ROUTER = """\
2024-05-01T10:00:02.100000Z  INFO generate{parameters=GenerateParameters { best_of: None, temperature: None, do_sample: false, max_new_tokens: Some(100), stop: [], seed: None } total_time="2.31s" validation_time="527.5µs" queue_time="80.7µs" inference_time="2.309391s" time_per_token="23.09391ms" seed="None"}: text_generation_router::server: router/src/server.rs:289: Success
2024-05-01T10:00:03.500000Z  INFO compat_generate{default_return_full_text=true compute_type=Extension(ComputeType("1-nvidia-a10g"))}:generate_stream{parameters=GenerateParameters { max_new_tokens: Some(20) } total_time="1.2s" validation_time="1.1ms" queue_time="600ms" inference_time="598.9ms" time_per_token="29.945ms" seed="Some(1)"}: text_generation_router::server: router/src/server.rs:511: Success
"""
JSON_LINE = (
    '{"timestamp":"2024-05-01T10:00:04.000000Z","level":"INFO","message":"Success",'
    '"target":"text_generation_router::server","filename":"router/src/server.rs","line_number":289,'
    '"span":{"inference_time":"400ms","queue_time":"10ms","seed":"None","time_per_token":"40ms",'
    '"total_time":"411ms","validation_time":"1ms","name":"generate"},"spans":[]}\n'
)
TEI = (
    '2025-08-09T19:36:02.798333Z  INFO openai_embed{total_time="1.207716998s" tokenization_time="11.232786ms" '
    'queue_time="686.203µs" inference_time="1.195713965s"}: text_embeddings_router::http::server: '
    "router/src/http/server.rs:1290: Success\n"
)
LAUNCH = """\
2023-08-22T18:32:21.740739Z  INFO text_generation_launcher: Args { model_id: "m", num_shard: Some(4), max_concurrent_requests: 128 }
2023-08-22T18:32:21.740761Z  INFO text_generation_launcher: Sharding model on 4 processes
2023-08-22T18:36:00.420621Z  INFO shard-manager: text_generation_launcher: Shard ready in 218.618910525s rank=4
2023-08-22T18:36:00.426690Z  INFO shard-manager: text_generation_launcher: Shard ready in 218.622944116s rank=7
2023-08-22T18:36:20.842858Z  INFO text_generation_router::server: router/src/server.rs:2266: Connected
"""
WARMUP_FAILED = """\
2023-09-26T21:48:00.969056Z ERROR text_generation_launcher: Method Warmup encountered an error.
Traceback (most recent call last):
  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/flash_causal_lm.py", line 753, in warmup
    _, batch = self.generate_token(batch)
Error: ShardCannotStart
2023-09-26T21:48:01.032737Z ERROR text_generation_launcher: Shard 0 failed to start
"""


def _read(tmp_path, text: str):
    path = tmp_path / "tgi.log"
    path.write_text(text, encoding="utf-8")
    source = Source.from_path(path)
    importer = recognise(source.text[:65536])
    assert importer is not None and importer.name == "tgi-log"
    return importer.read(source)


def test_each_successful_request_becomes_a_row_with_its_stages(tmp_path):
    requests = _read(tmp_path, ROUTER).tables["requests"]
    assert len(requests) == 2
    first = requests.iloc[0]
    assert first["latency_ms"] == pytest.approx(2310.0)
    assert first["stage_validation_ms"] == pytest.approx(0.5275)
    assert first["stage_queue_ms"] == pytest.approx(0.0807)
    assert first["tpot_ms"] == pytest.approx(23.09391)
    assert (
        first["output_len"] == 100
    )  # inference_time / time_per_token, as TGI computed the one from the other
    # the line is written when the answer is done: the request arrived total_time before it
    assert first["ts"] == pytest.approx(1714557602.1 - 2.31)
    assert requests.iloc[1]["stage_queue_ms"] == pytest.approx(600.0)


def test_the_json_output_and_tei_forms_give_the_same_columns(tmp_path):
    row = _read(tmp_path, JSON_LINE).tables["requests"].iloc[0]
    assert (row["latency_ms"], row["stage_inference_ms"], row["output_len"]) == (411.0, 400.0, 10)
    tei = _read(tmp_path, TEI).tables["requests"].iloc[0]
    assert tei["stage_tokenize_ms"] == pytest.approx(11.232786)
    assert "output_len" not in tei or tei["output_len"] != tei["output_len"]


def test_the_launchers_lines_give_one_start_and_the_end_of_warm_up(tmp_path):
    events = _read(tmp_path, LAUNCH).tables["events"]
    assert list(events["kind"]) == ["restart", "warmup_end"]
    assert events["ts"].iloc[0] == pytest.approx(1692729141.740739)


def test_a_shard_ready_line_alone_dates_the_start_before_it(tmp_path):
    events = _read(tmp_path, LAUNCH.splitlines(keepends=True)[2]).tables["events"]
    assert list(events["kind"]) == ["restart"]
    assert events["ts"].iloc[0] == pytest.approx(1692729360.420621 - 218.618910525)


def test_a_failed_warm_up_is_one_failed_start_however_many_lines_say_it(tmp_path):
    events = _read(tmp_path, WARMUP_FAILED).tables["events"]
    assert list(events["kind"]) == ["engine_start_failed"]


def test_colour_codes_written_out_by_syslog_are_undone(tmp_path):
    line = (
        "2024-04-18T18:44:03.144-04:00   #033[2m2024-04-18T22:43:58.111453Z#033[0m #033[32m INFO#033[0m "
        "#033[1mshard-manager#033[0m: #033[2mtext_generation_launcher#033[0m#033[2m:#033[0m Shard ready in "
        "12.5s #033[2m#033[3mrank#033[0m#033[2m=#033[0m0#033[0m\n"
    )
    path = tmp_path / "tgi.log"
    path.write_text(line)
    source = Source.from_path(path)
    assert "#033" not in source.text
    assert any("colour code" in what for what in source.mended)
    assert recognise(source.text).read(source).tables["events"]["kind"].tolist() == ["restart"]


def _router_log(inference_ms: list[float], start: float = 1714557600.0) -> str:
    lines = []
    for i, inference in enumerate(inference_ms):
        done = start + 2.0 * i + (inference + 5) / 1000
        stamp = f"{_iso(done)}"
        lines.append(
            f"{stamp}  INFO generate{{parameters=GenerateParameters {{ max_new_tokens: Some(64) }} "
            f'total_time="{inference + 5:.3f}ms" validation_time="2ms" queue_time="3ms" '
            f'inference_time="{inference:.3f}ms" time_per_token="{inference / 64:.4f}ms" seed="None"}}: '
            "text_generation_router::server: router/src/server.rs:289: Success"
        )
    return "\n".join(lines) + "\n"


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_steady_tgi_service_gets_no_likely_finding(tmp_path, run_cli):
    import numpy as np

    rng = np.random.default_rng(3)
    (tmp_path / "tgi.log").write_text(_router_log(list(1500 + rng.normal(0, 60, 400))))
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    used = {e["importer"]: e["rows"] for e in report["evidence"]["importers"]}
    assert used == {"tgi-log": 400}
    assert not [h["id"] for h in report["hypotheses"] if h["score"] >= 0.5]
