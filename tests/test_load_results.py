"""Load tests already run, read as their tools write them (the keys and quirks of each tool's own
writer: diagnose/load/results.py cites them) and placed on one curve."""

from __future__ import annotations

import json
import math

import pytest

from diagnose.errors import InputError
from diagnose.load.results import read_results
from diagnose.load.results_knee import analyse, render_text, to_json


def _vllm(rate, throughput, failed=0, **extra):
    return {
        "date": "20251201-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 1000,
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 100.0,
        "completed": 1000 - failed,
        "failed": failed,
        "request_throughput": throughput,
        "median_ttft_ms": 120.0,
        "p99_ttft_ms": 400.0,
        "median_tpot_ms": 20.0,
        "p99_tpot_ms": 30.0,
        **extra,
    }


def test_a_vllm_rate_sweep_gives_an_open_loop_knee(tmp_path):
    for rate, throughput, failed in ((2.0, 2.0, 0), (4.0, 3.98, 0), (8.0, 6.1, 0), (16.0, 6.2, 40)):
        (tmp_path / f"openai-{rate}qps-llama-20251201.json").write_text(
            json.dumps(_vllm(rate, throughput, failed))
        )
    points = [p for f in sorted(tmp_path.iterdir()) for p in read_results(f)]
    assert {p.tool for p in points} == {"vLLM bench serve"}
    curve = analyse(points, share=0.7)
    assert curve.open_knee is not None
    assert (curve.open_knee.kept_up_rps, curve.open_knee.fell_behind_rps) == (4.0, 8.0)
    assert curve.open_knee.capacity_rps == pytest.approx(6.2)
    assert "throughput 6.1 req/s of 8 offered" in curve.open_knee.why
    assert curve.setting == ["2.8 req/s"]
    sixteen = next(p for p in points if p.rate_rps == 16.0)
    assert sixteen.failed_share == pytest.approx(40 / 1000) and math.isnan(sixteen.latency_p50_ms)
    text = render_text(curve)
    assert "Open loop: knee between 4 req/s (kept up) and 8 req/s" in text
    assert "no end-to-end latency" in text  # vLLM's default percentile metrics leave e2el out
    assert json.loads(json.dumps(to_json(curve), allow_nan=False))["open_loop_knee"]["kept_up_rps"] == 4.0


def test_vllm_quirks_unlimited_rate_appended_runs_and_the_2024_swap(tmp_path):
    appended = tmp_path / "sweep.json"
    appended.write_text(
        json.dumps(_vllm("inf", 9.0, max_concurrency=16, median_e2el_ms=1700.0))
        + "\n"
        + json.dumps(_vllm("inf", 10.0, max_concurrency=32, median_e2el_ms=3100.0))
    )
    first, second = read_results(appended)
    assert first.source.endswith("sweep.json:1") and second.source.endswith("sweep.json:2")
    assert first.rate_rps is None and (first.concurrency, second.concurrency) == (16, 32)
    assert first.latency_p50_ms == 1700.0
    old = _vllm(4.0, 4.0, best_of=1, mean_e2el_ms=800.0, median_e2el_ms=950.0)
    del old["burstiness"], old["failed"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    (point,) = read_results(tmp_path / "old.json")
    assert point.latency_p50_ms == 800.0, "the 2024 script wrote the median under mean_e2el_ms"
    assert point.failed_share == 0.0, "no failed key: num_prompts less completed"


def test_sglang_lines_with_a_bare_infinity_make_a_closed_loop_knee(tmp_path):
    lines = []
    for concurrency, throughput, latency in (
        (1, 0.5, 2000.0),
        (4, 1.9, 2100.0),
        (16, 6.0, 2650.0),
        (64, 8.0, 8000.0),
    ):
        line = json.dumps(
            {
                "backend": "sglang",
                "dataset_name": "random",
                "request_rate": math.inf,
                "max_concurrency": concurrency,
                "duration": 120.0,
                "completed": 500,
                "request_throughput": throughput,
                "median_e2e_latency_ms": latency,
                "p99_e2e_latency_ms": latency * 1.5,
                "median_ttft_ms": 90.0,
                "concurrency": concurrency * 0.98,
            }
        )
        assert "Infinity" in line  # what Python's json writes, as SGLang's benchmark does
        lines.append(line)
    (tmp_path / "sglang_1201_500_random.jsonl").write_text("\n".join(lines) + "\n")
    points = read_results(tmp_path / "sglang_1201_500_random.jsonl")
    assert [p.concurrency for p in points] == [1, 4, 16, 64] and all(p.rate_rps is None for p in points)
    curve = analyse(points, share=0.7)
    knee = curve.closed_knee
    assert knee is not None and knee.capacity_rps == 8.0
    assert knee.clients == pytest.approx(8.0 * 1 / 0.5)  # X_max times N / X at one client: 16
    assert (knee.below, knee.above) == (16, 64)
    assert curve.setting == ["11 requests in flight"]  # 70 % of 16
    assert "SGLang bench_serving count no failures" in " ".join(curve.notes)


def test_genai_perf_and_aiperf_exports_carry_their_load_in_their_config(tmp_path):
    latency = {
        "unit": "ms",
        "avg": 650.0,
        "p50": 640.0,
        "p90": 700.0,
        "p99": 900.0,
        "min": 500.0,
        "max": 950.0,
    }
    genai = {
        "request_throughput": {"unit": "requests/sec", "avg": 12.5},
        "request_latency": latency,
        "time_to_first_token": {**latency, "p50": 80.0, "p99": 150.0},
        "input_config": {"perf_analyzer": {"stimulus": {"concurrency": 8}}},
    }
    (tmp_path / "g.json").write_text(json.dumps(genai))
    (g,) = read_results(tmp_path / "g.json")
    assert (g.tool, g.concurrency, g.throughput_rps, g.latency_p99_ms, g.ttft_p50_ms) == (
        "genai-perf",
        8,
        12.5,
        900.0,
        80.0,
    )
    old = {**genai, "input_config": {"concurrency": None, "request_rate": 5.0, "streaming": True}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert read_results(tmp_path / "old.json")[0].rate_rps == 5.0
    folder = tmp_path / "artifacts" / "llama-openai-chat-concurrency24"
    folder.mkdir(parents=True)
    aiperf = {
        "request_throughput": {"unit": "requests/sec", "avg": 20.0},
        "request_latency": latency,
        "request_count": {"unit": "requests", "avg": 196},
        "error_request_count": {"unit": "requests", "avg": 4},
        "input_config": {"cli_command": "aiperf profile -m llama --url localhost:8000"},
        "was_cancelled": False,
    }
    (folder / "profile_export_aiperf.json").write_text(json.dumps(aiperf))
    (a,) = read_results(folder / "profile_export_aiperf.json")
    assert a.tool == "AIPerf" and a.concurrency == 24, "left unset, the load is in the artifact folder's name"
    assert a.failed_share == pytest.approx(4 / 196)


def test_locust_history_levels_are_points_and_its_totals_have_no_load(tmp_path):
    header = (
        "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,"
        "100%,Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,"
        "Total Min Response Time,Total Max Response Time,Total Average Content Size"
    )
    rows = [header]
    t = 1_764_590_000
    for users, rps in ((10, 50.0), (20, 98.0), (40, 120.0)):
        for second in range(40):
            current = rps * min(1.0, (second + 1) / 8)  # Locust's ~10 s window fills
            rows.append(
                f"{t},{users},,Aggregated,{current:2f},0.000000,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,"
                f"{second},0,0,0,0,0,0"
            )
            t += 1
    history = tmp_path / "run_stats_history.csv"
    history.write_text("\n".join(rows) + "\n")
    points = read_results(history)
    assert [(p.concurrency, p.throughput_rps) for p in points] == [(10, 50.0), (20, 98.0), (40, 120.0)]
    knee = analyse(points, share=0.7).closed_knee
    assert knee is not None and knee.clients == pytest.approx(120.0 * 10 / 50.0)
    stats = tmp_path / "run_stats.csv"
    stats.write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
        "Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%\n"
        "POST,/generate,1200,3,850,912.4,310,4100,1532.0,19.9,0.05,850,930,990,1000,1200,1500,2100,2900,4100,4100,4100\n"
        ",Aggregated,1200,3,850,912.4,310,4100,1532.0,19.9,0.05,850,930,990,1000,1200,1500,2100,2900,4100,4100,4100\n"
    )
    (total,) = read_results(stats)
    assert (total.throughput_rps, total.latency_p99_ms, total.concurrency) == (19.9, 2900.0, None)
    assert total.failed_share == pytest.approx(3 / 1200)
    assert "1 run without an offered load" in " ".join(analyse([total], 0.7).notes)


@pytest.mark.parametrize("form", ["summary-export", "handle-summary", "machine-readable"])
def test_k6_summaries_in_each_of_their_forms(tmp_path, form):
    duration = {
        "avg": 412.3,
        "min": 98.1,
        "med": 380.0,
        "max": 2210.7,
        "p(90)": 640.2,
        "p(95)": 790.4,
        "p(99)": 1500.0,
    }
    if form == "summary-export":
        doc = {
            "metrics": {
                "http_req_duration": duration,
                "http_reqs": {"count": 6000, "rate": 99.8},
                "http_req_failed": {"passes": 12, "fails": 5988, "value": 0.002},
                "vus_max": {"value": 50, "min": 50, "max": 50},
            }
        }
    elif form == "handle-summary":
        doc = {
            "metrics": {
                "http_req_duration": {"type": "trend", "contains": "time", "values": duration},
                "http_reqs": {
                    "type": "counter",
                    "contains": "default",
                    "values": {"count": 6000, "rate": 99.8},
                },
                "http_req_failed": {
                    "type": "rate",
                    "contains": "default",
                    "values": {"rate": 0.002, "passes": 12, "fails": 5988},
                },
                "vus_max": {
                    "type": "gauge",
                    "contains": "default",
                    "values": {"value": 50, "min": 50, "max": 50},
                },
            }
        }
    else:
        doc = {
            "version": "1.0.0",
            "config": {"duration": 60.12, "execution": "local"},
            "results": {
                "metrics": [
                    {"name": "http_req_duration", "type": "trend", "contains": "time", "values": duration},
                    {
                        "name": "http_reqs",
                        "type": "counter",
                        "contains": "default",
                        "values": {"count": 6000},
                    },
                    {
                        "name": "http_req_failed",
                        "type": "rate",
                        "contains": "default",
                        "values": {"matches": 12, "total": 6000, "rate": 0.002},
                    },
                    {
                        "name": "vus_max",
                        "type": "gauge",
                        "contains": "default",
                        "values": {"value": 50, "min": 50, "max": 50},
                    },
                ]
            },
        }
    (tmp_path / "summary.json").write_text(json.dumps(doc))
    (point,) = read_results(tmp_path / "summary.json")
    assert point.tool == "k6" and point.concurrency == 50 and point.failed_share == pytest.approx(0.002)
    assert point.throughput_rps == pytest.approx(99.8, rel=0.001) and point.latency_p50_ms == 380.0


def _perf_analyzer_step(concurrency: int, throughput: float, p50_us: int, p99_us: int) -> str:
    """One step as perf_analyzer prints it (src/concurrency_manager.cc, src/inference_profiler.cc)."""
    return (
        f"Request concurrency: {concurrency}\n"
        "  Client: \n"
        "    Request count: 72262\n"
        f"    Throughput: {throughput} infer/sec\n"
        f"    Avg latency: {p50_us + 2000} usec (standard deviation 9319 usec)\n"
        f"    p50 latency: {p50_us} usec\n"
        f"    p90 latency: {p99_us - 1000} usec\n"
        f"    p95 latency: {p99_us - 500} usec\n"
        f"    p99 latency: {p99_us} usec\n"
        f"    Avg gRPC time: {p50_us + 1990} usec ((un)marshal request/response 11 usec + response wait 1 usec)\n"
        "  Server: \n"
        "    Inference count: 72262\n"
        "    Execution count: 4518\n"
        "    Successful request count: 72262\n"
        f"    Avg request latency: {p50_us} usec (overhead 844 usec + queue {p50_us - 4000} usec + "
        "compute input 2241 usec + compute infer 1613 usec + compute output 137 usec)\n\n"
    )


def test_perf_analyzers_report_gives_a_point_per_stable_step_in_requests(tmp_path):
    report = (
        "*** Measurement Settings ***\n  Batch size: 2\n  Service Kind: Triton\n"
        '  Using "time_windows" mode for stabilization\n  Measurement window: 5000 msec\n\n'
        + _perf_analyzer_step(1, 400.0, 4900, 5200)
        + _perf_analyzer_step(2, 780.0, 5100, 5600)
        + "Request concurrency: 4\n"
        "Failed to obtain stable measurement within 10 measurement windows for concurrency 4. "
        "Please try to increase the --measurement-interval.\n"
        + _perf_analyzer_step(8, 1210.0, 13100, 15900)
        + "Inferences/Second vs. Client Average Batch Latency\n"
        "Concurrency: 1, throughput: 400 infer/sec, latency 6900 usec\n"
    )
    (tmp_path / "pa.txt").write_text(report)
    points = read_results(tmp_path / "pa.txt")
    assert [(p.concurrency, p.throughput_rps) for p in points] == [(1, 200.0), (2, 390.0), (8, 605.0)]
    assert (points[0].latency_p50_ms, points[0].latency_p99_ms) == (4.9, 5.2)
    assert points[0].rate_rps is None and points[0].tool == "perf_analyzer"
    assert math.isnan(points[0].failed_share)  # perf_analyzer counts none: a failure ends its run


def test_perf_analyzers_csv_at_rates_is_an_open_loop_curve(tmp_path):
    header = (
        "Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
        "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
        "p50 latency,p90 latency,p95 latency,p99 latency"
    )
    rows = [
        "100,99.8,30,210,40,120,4100,90,12,4700,5100,5300,6100",
        "200,199.1,31,220,160,121,4150,92,12,4900,5600,6000,7200",
        "400,301.5,33,260,90400,125,4120,95,13,95000,120000,131000,150000",
    ]
    (tmp_path / "pa.csv").write_text("\n".join([header, *rows]) + "\n")
    points = read_results(tmp_path / "pa.csv")
    assert [(p.rate_rps, p.throughput_rps, p.latency_p99_ms) for p in points] == [
        (100.0, 99.8, 6.1),
        (200.0, 199.1, 7.2),
        (400.0, 301.5, 150.0),
    ]
    knee = analyse(points, share=0.7).open_knee
    assert knee is not None and (knee.kept_up_rps, knee.fell_behind_rps) == (200.0, 400.0)


def test_a_file_of_another_kind_is_named_with_what_was_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("p99 was bad yesterday\n")
    with pytest.raises(
        InputError, match=r"notes.txt: not a load test's results diagnose load reads \(vLLM's"
    ):
        read_results(tmp_path / "notes.txt")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(InputError, match="other.json: a JSON object, but not"):
        read_results(tmp_path / "other.json")
    (tmp_path / "broken.jsonl").write_text(json.dumps(_vllm(2.0, 2.0)) + '\n{"request_rate": \n')
    with pytest.raises(InputError, match=r"broken.jsonl:2, column \d+: not JSON"):
        read_results(tmp_path / "broken.jsonl")
