"""Text-generation serving benchmarks read as they print their results (diagnose/importers/bench_serving.py),
what the figures prove (diagnose/facts/load_steps.py, queue-saturation's first_token_queued), and the same
prints as ``diagnose load --results`` points.

The blocks below are laid out with the writers' own format strings: ``"{:<40} {:<10}"`` lines under a
centred header (vLLM's serve.py and benchmark_serving.py, SGLang's bench_serving.py, LMDeploy's copy of
it), or plain ``print(f"...")`` lines (vLLM before 2024-03, JetStream).
"""

from __future__ import annotations

import math

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.bench_serving import BenchServingImporter
from diagnose.load.results import read_results
from diagnose.pipeline import analyse_path


def _boxed(*lines: tuple[str, object] | str) -> str:
    """A result block as the writers print it: a (label, value) pair is a figure line, a string a
    section's title centred in dashes."""
    out = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    for line in lines:
        if isinstance(line, str):
            out.append("{s:{c}^{n}}".format(s=line, n=50, c="-"))
        else:
            out.append("{:<40} {:<10}".format(*line))
    out.append("=" * 50)
    return "\n".join(out) + "\n"


# vllm bench serve at its default rate (inf) on 1,000 prompts: the median request waits 18.5 s for a first
# token while the engine completes one every 41 ms and decodes a step in 41 ms
VLLM = (
    "Traffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\nMaximum request concurrency: None\n"
    + _boxed(
        ("Successful requests:", 1000),
        ("Failed requests:", 0),
        ("Benchmark duration (s):", "41.45"),
        ("Total input tokens:", 1024000),
        ("Total generated tokens:", 128000),
        ("Request throughput (req/s):", "24.13"),
        ("Output token throughput (tok/s):", "3088.37"),
        ("Peak concurrent requests:", "1000.00"),
        ("Total token throughput (tok/s):", "27795.31"),
        "Time to First Token",
        ("Mean TTFT (ms):", "18734.22"),
        ("Median TTFT (ms):", "18512.90"),
        ("P90 TTFT (ms):", "33001.15"),
        ("P99 TTFT (ms):", "37801.15"),
        "Time per Output Token (excl. 1st token)",
        ("Mean TPOT (ms):", "41.83"),
        ("Median TPOT (ms):", "41.02"),
        ("P99 TPOT (ms):", "58.37"),
        "Inter-token Latency",
        ("Mean ITL (ms):", "41.51"),
        ("Median ITL (ms):", "33.96"),
        ("P99 ITL (ms):", "143.27"),
        "End-to-end Latency",
        ("Mean E2EL (ms):", "24050.10"),
        ("Median E2EL (ms):", "23800.00"),
        ("P99 E2EL (ms):", "43620.77"),
    )
)

# SGLang's bench_serving of mid-2025 with a concurrency limit, spelt as it was until 2025-05: no TPOT
# section (removed 2025-03), ITL the decoding pace; 32 outstanding, served at their prefill's pace
SGLANG = "\n" + _boxed(
    ("Backend:", "sglang"),
    ("Traffic request rate:", "inf"),
    ("Max reqeuest concurrency:", 32),
    ("Successful requests:", 500),
    ("Benchmark duration (s):", "52.10"),
    ("Total input tokens:", 256000),
    ("Total generated tokens:", 64000),
    ("Total generated tokens (retokenized):", 63870),
    ("Request throughput (req/s):", "9.60"),
    ("Input token throughput (tok/s):", "4913.63"),
    ("Output token throughput (tok/s):", "1228.41"),
    ("Total token throughput (tok/s):", "6142.03"),
    ("Concurrency:", "31.62"),
    "End-to-End Latency",
    ("Mean E2E Latency (ms):", "3293.60"),
    ("Median E2E Latency (ms):", "3240.11"),
    "Time to First Token",
    ("Mean TTFT (ms):", "61.20"),
    ("Median TTFT (ms):", "48.31"),
    ("P99 TTFT (ms):", "180.52"),
    "Inter-Token Latency",
    ("Mean ITL (ms):", "25.44"),
    ("Median ITL (ms):", "25.10"),
    ("P95 ITL (ms):", "27.90"),
    ("P99 ITL (ms):", "31.02"),
    ("Max ITL (ms):", "95.31"),
)

# JetStream's benchmark_serving (2024): plain lines copied from vLLM's, two runs pasted one after the
# other, the first of 1,780 requests sent at once (TPOT there is latency over output tokens)
JETSTREAM = """\
LLAMA 3:
Traffic request rate: inf
Successful requests: 1780
Benchmark duration: 294.101467 s
Total input tokens: 214914
Total generated tokens: 415416
Request throughput: 6.05 requests/s
Input token throughput: 730.75 tokens/s
Output token throughput: 1412.49 tokens/s
Mean TTFT: 114960.78 ms
Median TTFT: 115488.55 ms
P99 TTFT: 243659.12 ms
Mean TPOT: 4429.77 ms
Median TPOT: 611.68 ms
P99 TPOT: 132710.43 ms

LLAMA 2:
Benchmarking with a total number of 100 requests
Benchmarking with request rate of 4.0
Successful requests: 100
Benchmark duration: 29.060651 s
Total input tokens: 12503
Total generated tokens: 30175
Request throughput: 3.44 requests/s
Input token throughput: 430.24 tokens/s
Output token throughput: 1038.35 tokens/s
Overall token throughput: 1468.59 tokens/s
Mean ttft: 1274.09 ms
Median ttft: 1273.70 ms
P99 ttft: 1276.27 ms
Mean TPOT: 58.04 ms
Median TPOT: 34.34 ms
P99 TPOT: 358.49 ms
"""


def _read(text: str):
    return BenchServingImporter().read(Source("bench.txt", mend(text).text, 0.0)).tables["load_steps"]


def _report(tmp_path, text: str):
    (tmp_path / "bench.txt").write_text(text)
    return analyse_path(str(tmp_path), helper=False)[1].report


def test_vllm_block_gives_each_figure_in_its_column_and_the_load_said_before_it():
    assert recognise(mend(VLLM).text).name == "bench-serving"
    (run,) = _read(VLLM).to_dict("records")
    assert run["tool"] == "vllm" and run["sent_at_once"] == 1 and math.isnan(run["concurrency"])
    assert (run["requests"], run["failed_requests"], run["duration_s"]) == (1000, 0, 41.45)
    assert (run["ttft_p50_ms"], run["ttft_p90_ms"], run["ttft_p99_ms"]) == (18512.90, 33001.15, 37801.15)
    assert (run["tpot_p50_ms"], run["itl_p50_ms"], run["latency_p50_ms"]) == (41.02, 33.96, 23800.00)
    assert run["ttft_avg_ms"] == 18734.22 and run["concurrency_peak"] == 1000 and run["tpot_with_first"] == 0


def test_sglang_block_gives_its_limit_its_mean_concurrency_and_e2e_latency():
    (run,) = _read(SGLANG).to_dict("records")
    assert run["tool"] == "sglang" and run["concurrency"] == 32 and run["sent_at_once"] == 1
    assert run["concurrency_mean"] == 31.62 and run["latency_p50_ms"] == 3240.11
    assert "tpot_p50_ms" not in run and run["itl_p95_ms"] == 27.90


def test_plain_runs_one_after_another_are_rows_each_with_its_own_load():
    runs = _read(JETSTREAM)
    assert list(runs["requests"]) == [1780, 100] and list(runs["line"]) == [3, 20]
    assert list(runs["sent_at_once"].fillna(0)) == [1, 0] and math.isnan(runs["rate_rps"][0])
    assert runs["rate_rps"][1] == 4.0
    # JetStream's 2025 lines write the metric's name lower-case; its TPOT includes the first token
    assert list(runs["ttft_p50_ms"]) == [115488.55, 1273.70] and set(runs["tpot_with_first"]) == {1}
    assert list(runs["throughput_rps"]) == [6.05, 3.44]


def test_the_command_pasted_before_a_block_gives_the_runs_load():
    """As people paste it: the command, continued over lines, then what it printed (without the lines it
    printed before the block)."""
    command = (
        "python3 vllm/benchmarks/benchmark_serving.py \\\n  --backend vllm \\\n  --max-concurrency 8 \\\n"
        "  --request-rate 2.5 \\\n  --num-prompts 1000\n\n"
    )
    block = VLLM[VLLM.index("====") :]
    (run,) = _read(command + block).to_dict("records")
    assert (run["concurrency"], run["rate_rps"]) == (8, 2.5) and "sent_at_once" not in run
    (run,) = _read(command.replace("--request-rate 2.5", "--request-rate inf") + block).to_dict("records")
    assert run["sent_at_once"] == 1 and math.isnan(run.get("rate_rps", math.nan))


def test_jetstream_rate_zero_is_every_request_at_once():
    text = JETSTREAM.replace("request rate of 4.0", "request rate of 0.0")
    assert list(_read(text)["sent_at_once"]) == [1, 1]


@pytest.mark.parametrize("wrap", ["> ", "    ", "`"], ids=["quoted", "indented", "code-span"])
def test_a_block_pasted_inside_markdown_reads_alike(wrap):
    pasted = "".join(f"{wrap}{line}{'`' if wrap == '`' else ''}\n" for line in VLLM.splitlines())
    assert _read(pasted).drop(columns="line").equals(_read(VLLM).drop(columns="line"))


def test_a_block_cut_before_its_latencies_gives_no_run():
    cut = VLLM.split("-----")[0]
    assert BenchServingImporter().read(Source("bench.txt", cut, 0.0)).tables == {}


def test_a_queue_of_requests_sent_at_once_is_named_saturation_with_its_figures(tmp_path):
    """The median first token waited 18.5 s; two decode steps and the mean interval between completions
    (41 ms each) bound the request's own share: 99 % of it was spent behind other requests."""
    report = _report(tmp_path, VLLM)
    share = report.facts["loadtest.first_token_wait_share"].value
    assert math.isclose(share, 1 - (2 * 41.02 + 1000 / 24.13) / 18512.90)
    assert (
        report.facts["loadtest.first_token_load"].value
        == "1,000 requests, all sent at once (request rate inf)"
    )
    assert math.isclose(report.facts["loadtest.completed_while_waiting"].value, 18.5129 * 24.13)
    (first,) = [h for h in report.hypotheses if h.score >= 0.5]
    assert first.id == "queue-saturation" and "spent behind other requests" in first.evidence[0].text


def test_a_limit_the_engine_serves_at_its_pace_is_no_queue(tmp_path):
    """SGLang at 32 outstanding: first tokens in 48 ms, within two 25 ms steps and 104 ms a completion."""
    report = _report(tmp_path, SGLANG)
    assert report.facts["loadtest.first_token_wait_share"].value == 0
    assert "queue-saturation" in {r.id for r in report.ruled_out}
    assert not [h for h in report.hypotheses if h.score >= 0.5]


def test_two_runs_are_judged_by_the_one_that_queued(tmp_path):
    report = _report(tmp_path, JETSTREAM)
    assert report.facts["loadtest.first_token_ms"].value == 115488.55
    assert (
        report.facts["loadtest.first_token_load"].value
        == "1,780 requests, all sent at once (request rate inf)"
    )


def test_load_reads_the_printed_runs_as_points(tmp_path):
    path = tmp_path / "runs.txt"
    path.write_text(JETSTREAM + SGLANG)
    points = read_results(path)
    assert [p.throughput_rps for p in points] == [6.05, 3.44, 9.60]
    assert [p.rate_rps for p in points] == [None, 4.0, None] and points[2].concurrency == 32
    assert points[2].latency_p50_ms == 3240.11 and points[0].ttft_p50_ms == 115488.55
    assert points[2].tool == "SGLang bench_serving" and math.isnan(points[0].failed_share)
