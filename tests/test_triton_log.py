"""Triton's own logs and TensorRT-LLM's iteration statistics, both generations, read by their grammar."""

from __future__ import annotations

import json

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from tests.helpers.samples import FIELD

MTIME = 1_765_000_000.0  # 2025-12-06


def _read(text: str):
    importer = recognise(mend(text).text)
    assert importer is not None and importer.name == "triton-log"
    return importer.read(Source("t.log", mend(text).text, MTIME))


# The batch manager's line, as TensorRT-LLM's performance docs print it (log_iteration_data).
LEGACY = (
    '[TensorRT-LLM][INFO] {{"Active Request Count":{active},"Context Requests":8,"Free KV cache blocks":0,'
    '"Generation Requests":231,"Iteration Counter":{i},"Max KV cache blocks":2448,"Max Request Count":256,'
    '"MicroBatch ID":0,"Runtime CPU Memory Usage":28784,"Runtime GPU Memory Usage":540173600,'
    '"Runtime Pinned Memory Usage":0,"Scheduled Requests":{scheduled},"Timestamp":"12-13-2023 14:55:{s:02d}",'
    '"Tokens per KV cache block":128,"Total Context Tokens":6904,"Used KV cache blocks":{used}}}'
)


def test_the_batch_managers_lines_give_running_waiting_and_kv_usage():
    text = "\n".join(
        LEGACY.format(active=249 + i, i=90 + i, scheduled=239, used=2448 - 10 * i, s=14 + i) for i in range(3)
    )
    server = _read(text).tables["server"]
    assert server["running"].tolist() == [239.0] * 3
    assert server["queue_depth"].tolist() == [10.0, 11.0, 12.0]  # active but not scheduled: waiting
    assert server["kv_cache_usage_pct"].round(2).tolist() == [100.0, 99.59, 99.18]
    assert server["ts"].diff().dropna().tolist() == [1.0, 1.0]


def _executor(i: int, paused: int, used: int = 950) -> dict:
    """An executor IterationStats object as trtllm-serve's /metrics answers and TensorRT-LLM logs it."""
    return {
        "iter": i,
        "iterLatencyMS": 250.0,
        "numActiveRequests": 64,
        "numQueuedRequests": 7,
        "maxNumActiveRequests": 64,
        "gpuMemUsage": 70_000_000_000,
        "kvCacheStats": {"maxNumBlocks": 1000, "freeNumBlocks": 1000 - used, "usedNumBlocks": used,
                         "tokensPerBlock": 64, "cacheHitRate": 0.1},
        "inflightBatchingStats": {"numScheduledRequests": 60, "numContextRequests": 2, "numGenRequests": 58,
                                  "numPausedRequests": paused, "numCtxTokens": 512, "microBatchId": 0},
    }  # fmt: skip


def test_a_metrics_answer_is_placed_by_its_iterations_latencies_and_pauses_are_preemptions():
    answer = json.dumps([_executor(10, 0), _executor(11, 3, 990), _executor(12, 5, 999)], indent=2)
    result = _read(answer)
    server = result.tables["server"]
    assert server["running"].tolist() == [60.0] * 3 and server["queue_depth"].tolist() == [7.0] * 3
    assert server["ts"].tolist() == [MTIME - 0.5, MTIME - 0.25, MTIME]
    assert any("without a time by the iterations' latencies" in w for w in result.warnings)
    preempted = result.tables["events"]
    assert preempted["kind"].tolist() == ["preemption", "preemption"]
    assert preempted["requests"].tolist() == [3.0, 2.0]


def test_kv_pressure_is_found_from_trtllm_statistics_alone(tmp_path, run_cli):
    lines = [
        f"2025-12-06T10:00:{i:02d}Z "
        + json.dumps(_executor(i, min(i - 20, 6) if i > 20 else 0, min(999, 700 + 10 * i)))
        for i in range(40)
    ]
    (tmp_path / "trtllm.log").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli("file", tmp_path / "trtllm.log", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["evidence"]["importers"][0]["importer"] == "triton-log"
    top = report["hypotheses"][0]
    assert top["id"] == "kv-cache-pressure" and top["score"] >= 0.5, report["hypotheses"]


def test_a_busy_engine_with_room_in_its_cache_gets_no_likely_finding(tmp_path, run_cli):
    lines = [f"2025-12-06T10:00:{i:02d}Z " + json.dumps(_executor(i, 0, 600)) for i in range(40)]
    (tmp_path / "trtllm.log").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli("file", tmp_path / "trtllm.log", "--format", "json")
    assert code == 0, err
    assert not [h for h in json.loads(out)["hypotheses"] if h["score"] >= 0.5]


def test_triton_glog_lines_give_starts_readiness_failures_and_crashes():
    text = "\n".join(
        [
            "I0523 04:01:24.654491 1 server.cc:120] Initializing Triton Inference Server",
            "I0523 04:01:24.909014 1 pinned_memory_manager.cc:197] Pinned memory pool is created at '0x7f'",
            "E0523 04:01:30.100000 1 model_repository_manager.cc:1186] failed to load 'llama' version 1: "
            "Internal: unexpected error",
            "I0523 04:01:31.000000 1 grpc_server.cc:4117] Started GRPCInferenceService at 0.0.0.0:8001",
            "I0523 04:01:31.000100 1 http_server.cc:2815] Started HTTPService at 0.0.0.0:8000",
            "I0523 04:01:31.000200 1 http_server.cc:167] Started Metrics Service at 0.0.0.0:8002",
            "Signal (11) received.",
        ]
    )
    events = _read(text).tables["events"]
    assert events["kind"].tolist() == ["restart", "engine_start_failed", "warmup_end", "engine_dead"]
    assert events["ts"].iloc[0] == pytest.approx(1_747_972_884.654491)  # 2025: the file's year


@pytest.mark.skipif(not FIELD.is_dir(), reason="../shared/data/real-samples is not here")
@pytest.mark.parametrize("name", ["01.log", "02.log", "03.log"])
def test_the_real_triton_start_up_logs_are_read_as_starts(name):
    path = FIELD / "triton" / name
    events = recognise(mend(path.read_text()).text).read(Source.from_path(path)).tables["events"]
    assert events["kind"].iloc[0] == "restart"


def _trtllm_scrape(ts_ms: int, scheduled: int, active: int, used: int) -> str:
    """Triton's /metrics with the TensorRT-LLM backend of 2024: what a sample counts is in a label."""
    return f"""\
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="tensorrt_llm",version="1"}} 0 {ts_ms}
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="context",version="1"}} 1 {ts_ms}
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="scheduled",version="1"}} {scheduled} {ts_ms}
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="max",version="1"}} 512 {ts_ms}
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="active",version="1"}} {active} {ts_ms}
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="used",model="tensorrt_llm",version="1"}} {used} {ts_ms}
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="max",model="tensorrt_llm",version="1"}} 1000 {ts_ms}
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"}} 64 {ts_ms}
"""


def test_triton_scrapes_of_the_tensorrt_llm_backend_give_its_batch_queue_and_kv_usage():
    from diagnose.importers.prometheus_text import PrometheusTextImporter

    text = _trtllm_scrape(1_765_000_000_000, 60, 64, 980) + _trtllm_scrape(1_765_000_001_000, 62, 62, 990)
    server = PrometheusTextImporter().read(Source("metrics.txt", text, MTIME)).tables["server"]
    assert server["running"].tolist() == [60.0, 62.0]
    assert server["queue_depth"].tolist() == [4.0, 0.0]  # active less scheduled, not Triton's own queue
    assert server["kv_cache_usage_pct"].tolist() == [98.0, 99.0]


def _engine_and_row(page: str) -> tuple[str | None, dict]:
    """The engine a scrape is recognised as, and the server row its map makes of it."""
    from diagnose.engines.metrics import detect_engine, engine_maps, engine_row, parse_samples

    samples = parse_samples(page)
    engine = detect_engine(samples)
    return engine, engine_row(engine_maps()[engine], 0.0, samples) if engine else {}


def test_vllm_under_ray_serve_is_read_as_vllm_and_ray_serve_alone_by_its_own_map():
    served = (
        'ray_serve_deployment_queued_queries{application="llm",deployment="LLMServer"} 3\n'
        'ray_vllm_num_requests_running{model_name="llama"} 12\n'
        'ray_vllm_num_requests_waiting{model_name="llama"} 5\n'
        'ray_vllm_kv_cache_usage_perc{model_name="llama"} 0.97\n'
    )
    engine, row = _engine_and_row(served)
    assert engine == "vllm"
    assert (row["running"], row["queue_depth"], row["kv_cache_usage_pct"]) == (12.0, 5.0, 97.0)

    plain = (
        'ray_serve_deployment_queued_queries{deployment="Model"} 2\n'
        'ray_serve_replica_processing_queries{deployment="Model",replica="a"} 3\n'
        'ray_serve_replica_processing_queries{deployment="Model",replica="b"} 4\n'
    )
    engine, row = _engine_and_row(plain)
    assert engine == "ray-serve"
    assert (row["running"], row["queue_depth"]) == (7.0, 2.0)


def test_kserve_model_servers_give_their_rate_and_predict_time():
    from diagnose.engines.metrics import detect_engine, engine_maps, engine_row, parse_samples

    def page(count: int, seconds: float) -> str:
        return (
            "# TYPE request_predict_seconds histogram\n"
            f'request_predict_seconds_bucket{{model_name="m",le="+Inf"}} {count}\n'
            f'request_predict_seconds_count{{model_name="m"}} {count}\n'
            f'request_predict_seconds_sum{{model_name="m"}} {seconds}\n'
        )

    before, after = parse_samples(page(100, 2.0)), parse_samples(page(300, 10.0))
    assert detect_engine(after) == "kserve"
    row = engine_row(engine_maps()["kserve"], 10.0, after, before, elapsed=10.0)
    assert row["throughput_rps"] == 20.0 and row["compute_ms"] == 40.0
