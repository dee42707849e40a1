"""Triton's perf_analyzer read as it prints its run (diagnose/importers/perf_analyzer.py), and what its
server statistics prove (diagnose/facts/load_steps.py, queue-saturation's load_test_queue).

The runs below are laid out line for line as perf_analyzer's inference_profiler.cc prints them; their
figures are made consistent with one model: ~9 ms a batch, batches of up to 8.
"""

from __future__ import annotations

import math

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from diagnose.importers.perf_analyzer import PerfAnalyzerImporter, read_steps
from diagnose.pipeline import analyse_path

SETTINGS = """\
*** Measurement Settings ***
  Batch size: 1
  Service Kind: Triton
  Using "time_windows" mode for stabilization
  Measurement window: 5000 msec
  Using synchronous calls for inference
  Stabilizing using average latency

"""


def _step(header: str, client: dict[str, int | float], server: tuple[int, int, int, int, int]) -> str:
    """A step as printed: ``server`` is inferences, executions, latency, queue and infer (usec)."""
    inferences, executions, latency, queue, infer = server
    lines = [header, "  Client: ", f"    Request count: {client['count']}"]
    if "delayed" in client:
        lines.append(f"    Delayed Request Count: {client['delayed']}")
    lines += [
        f"    Throughput: {client['throughput']} infer/sec",
        f"    Avg latency: {client['latency']} usec (standard deviation 1593 usec)",
        f"    p50 latency: {client['latency'] - 200} usec",
        f"    p99 latency: {client['latency'] + 3000} usec",
        f"    Avg HTTP time: {client['latency'] - 30} usec (send/recv 102 usec + response wait 598 usec)",
        "  Server: ",
        f"    Inference count: {inferences}",
        f"    Execution count: {executions}",
        f"    Successful request count: {inferences}",
        f"    Avg request latency: {latency} usec (overhead 50 usec + queue {queue} usec + compute input 300 usec"
        f" + compute infer {infer} usec + compute output 150 usec)",
        "",
    ]
    return "\n".join(lines) + "\n"


# A concurrency sweep past the knee: at 64 outstanding requests, 87 % of a request's time in the server
# is queue while the model computes all along (900 batches of ~19.5 ms in the 18 s window)
SWEEP = (
    SETTINGS
    + _step(
        "Request concurrency: 1",
        {"count": 1800, "throughput": 100, "latency": 10000},
        (1800, 1800, 9500, 50, 8750),
    )
    + _step(
        "Request concurrency: 8",
        {"count": 7020, "throughput": 390, "latency": 20500},
        (7020, 1755, 20000, 10000, 9500),
    )
    + _step(
        "Request concurrency: 64",
        {"count": 7200, "throughput": 400, "latency": 160000},
        (7200, 900, 158000, 138000, 19050),
    )
    + "Inferences/Second vs. Client Average Batch Latency\n"
    "Concurrency: 1, throughput: 100 infer/sec, latency 10000 usec\n"
    "Concurrency: 8, throughput: 390 infer/sec, latency 20500 usec\n"
    "Concurrency: 64, throughput: 400 infer/sec, latency 160000 usec\n"
)
# A batcher holding requests for a batch while the model idles: the queue is 91 % of the server's time,
# but 180 batches of 9 ms in 18 s keep the model busy 9 % of it
HELD_BY_THE_BATCHER = SETTINGS + _step(
    "Request concurrency: 4",
    {"count": 720, "throughput": 40, "latency": 100000},
    (720, 180, 99000, 90000, 8500),
)


def _read(text: str):
    return PerfAnalyzerImporter().read(Source("perf.txt", mend(text).text, 0.0))


def _report(tmp_path, text: str):
    (tmp_path / "perf_analyzer.txt").write_text(text)
    return analyse_path(str(tmp_path), helper=False)[1].report


def test_each_stable_step_with_its_client_and_server_figures():
    assert recognise(mend(SWEEP).text).name == "perf-analyzer"
    steps = _read(SWEEP).tables["load_steps"]
    assert list(steps["concurrency"]) == [1, 8, 64] and steps["rate_rps"].isna().all()
    top = steps.iloc[2]
    assert top["throughput_rps"] == 400 and top["latency_avg_ms"] == 160.0 and top["latency_p99_ms"] == 163.0
    assert (top["server_inferences"], top["server_executions"]) == (7200, 900)
    assert (top["server_latency_ms"], top["server_queue_ms"]) == (158.0, 138.0)
    assert top["server_compute_ms"] == pytest.approx(0.3 + 19.05 + 0.15)
    assert list(steps["line"]) == [9, 23, 37]


def test_a_batch_turns_inferences_into_requests_and_delays_are_counted_in_either_wording():
    old = SETTINGS.replace("Batch size: 1", "Batch size: 4") + _step(
        "Request Rate: 24 inference requests per seconds",  # 2021's wording
        {"count": 1265, "delayed": 253, "throughput": 50.6, "latency": 209294},
        (1529, 1088, 209125, 98779, 110095),
    )
    (step,) = read_steps(old.splitlines())[0]
    assert step.rate_rps == 24 and step.concurrency is None and step.throughput_rps == pytest.approx(12.65)
    assert step.delayed_pct == pytest.approx(20.0)
    new = old.replace(
        "    Delayed Request Count: 253\n",
        "    Avg send request rate: 19.20 infer/sec\n    [WARNING] Perf Analyzer was not able to keep up with "
        "the desired request rate. 99.76% of the requests were delayed. \n",
    )
    assert read_steps(new.splitlines())[0][0].delayed_pct == pytest.approx(99.76)


def test_an_ensembles_and_a_caches_compute_and_an_unstable_step():
    ensemble = (
        SETTINGS
        + "Request concurrency: 2\n  Client: \n    Request count: 100\n    Throughput: 10 infer/sec\n"
        "  Server: \n    Inference count: 180\n    Execution count: 180\n    Successful request count: 180\n"
        "    Avg request latency: 1000 usec (overhead 5 usec + queue 100 usec + compute 895 usec)\n\n"
        "  Composing models: \n  preprocess, version: 1\n      Inference count: 180\n"
        "      Avg request latency: 90 usec (overhead 1 usec + queue 9 usec + compute input 20 usec"
        " + compute infer 50 usec + compute output 10 usec)\n"
        "Request concurrency: 4\n"
        "Failed to obtain stable measurement within 10 measurement windows for concurrency 4. Please try to "
        "increase the --measurement-interval.\n"
        "Request concurrency: 6\n  Client: \n    Request count: 100\n    Throughput: 12 infer/sec\n"
        "  Server: \n    Inference count: 216\n    Execution count: 216\n    Successful request count: 216\n"
        "    Avg request latency: 800 usec (overhead 10 usec + queue 90 usec + cache hit/miss 700 usec)\n"
    )
    result = _read(ensemble)
    steps = result.tables["load_steps"]
    assert list(steps["concurrency"]) == [2, 6]
    assert list(steps["server_queue_ms"]) == [0.1, 0.09]  # the ensemble's own, not its first model's
    assert list(steps["server_compute_ms"]) == [0.895, 0.7]
    assert result.warnings == [
        "1 of perf_analyzer's steps did not stabilise and printed no figures: left out"
    ]


def test_the_closing_summary_alone_and_lines_in_markdown_code_spans():
    summary = (
        "Inferences/Second vs. Client Average Batch Latency\n"
        "Concurrency: 1, throughput: 219.6 infer/sec, latency 4553 usec\n"
        "Concurrency: 2, throughput: 401.2 infer/sec, latency 4985 usec\n"
    )
    steps = _read(summary).tables["load_steps"]
    assert list(steps["concurrency"]) == [1, 2] and list(steps["latency_avg_ms"]) == [4.553, 4.985]
    assert steps["server_queue_ms"].isna().all()
    quoted = "\n".join(f"`{line}`" if line.strip() else line for line in SWEEP.splitlines())
    assert list(_read(quoted).tables["load_steps"]["server_queue_ms"]) == [0.05, 10.0, 138.0]


def test_the_queue_past_the_knee_while_the_model_computes_all_along_is_saturation(tmp_path):
    report = _report(tmp_path, SWEEP)
    first = report.hypotheses[0]
    assert first.id == "queue-saturation" and first.score >= 0.7, [(h.id, h.score) for h in report.hypotheses]
    said = " ".join(e.text for e in first.evidence)
    assert "at concurrency 64" in said and "87%" in said and "0.98 s a second" in said
    assert report.facts["loadtest.queue_share"].source.startswith(
        "perf_analyzer.txt (the step at concurrency 64"
    )


def test_a_batcher_holding_requests_while_the_model_idles_is_the_window_not_saturation(tmp_path):
    report = _report(tmp_path, HELD_BY_THE_BATCHER)
    assert report.facts["loadtest.queue_share"].value == pytest.approx(90 / 99)
    assert report.facts["loadtest.model_busy"].value == pytest.approx(180 * 8.95 / 1000 / 18)
    assert "queue-saturation" in {r.id for r in report.ruled_out}  # the model had idle time: no saturation
    likely = [h for h in report.hypotheses if h.score >= 0.5]
    assert [h.id for h in likely] == ["batch-window-too-long"]
    said = " ".join(e.text for e in likely[0].evidence)
    assert "at concurrency 4" in said and "0.09 s a second" in said and "90.0 ms for its batch" in said


def test_a_closed_loop_that_keeps_the_model_busy_shows_no_batcher_wait(tmp_path):
    """Past the knee requests queue behind one another: a queue share under the model's busy share."""
    report = _report(tmp_path, SWEEP)
    assert not any(name.startswith("loadtest.held") for name in report.facts)


def test_one_request_at_a_time_queues_behind_nothing(tmp_path):
    """perf_analyzer's own quick-start run (docs/quick_start.md): concurrency 1, nothing to weigh."""
    report = _report(tmp_path, PerfAnalyzerImporter().example)
    assert report.facts["loadtest.steps"].value == 1 and "loadtest.queue_share" not in report.facts
    assert not [h.id for h in report.hypotheses if h.score >= 0.5]
    assert math.isclose(report.evidence.tables["load_steps"].rows, 1)
