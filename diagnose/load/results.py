"""Load tests people already ran, read into points of one latency-throughput curve.

Each format is read as its writer writes it (the field names, units and quirks below are from each
tool's own source; docs/load.md cites the files):

- vLLM's serving benchmark (``vllm bench serve --save-result``, ``benchmarks/benchmark_serving.py``): one
  JSON object a run, or one a line with ``--append-result``. ``request_rate`` is the string ``"inf"``
  when unlimited; E2E latency keys exist only where ``--percentile-metrics`` asked for ``e2el``; the
  2024 script swapped ``mean_e2el_ms`` and ``median_e2el_ms`` (its results have ``best_of`` and no
  ``burstiness``); ``failed`` only in today's script. Its printed result (and SGLang's, and JetStream's
  plain lines) is read as ``diagnose file`` reads it (diagnose/importers/bench_serving.py).
- SGLang's ``bench_serving --output-file``: one JSON line a run, ``request_rate`` a bare ``Infinity``
  (or ``"trace"``); no failure count; before 0.2.15 the latency keys had no ``_ms`` (still ms).
- genai-perf's ``profile_export_genai_perf.json`` and AIPerf's ``profile_export_aiperf.json``: metric
  objects ``{unit, avg, p50, p99, ...}`` in ms; the stimulus in ``input_config`` (genai-perf:
  ``perf_analyzer.stimulus`` or, before 2025-03, flat ``concurrency``/``request_rate``; AIPerf:
  ``loadgen``, written only where set, else its ``cli_command``); AIPerf alone counts errors.
- Locust's ``--csv`` files: ``*_stats_history.csv`` (one ``Aggregated`` row a second, its ``User Count``
  the closed-loop load; its percentiles cumulative since the start) and ``*_stats.csv`` (the run's
  totals; no user count).
- k6's summary: ``--summary-export`` (each metric flattened to its values, a rate's ``rate`` renamed
  ``value``), the ``handleSummary`` data (values under ``values``), or the machine-readable summary
  (``results.metrics`` a list, no counter rates). The offered load is ``vus_max``.
- Triton's perf_analyzer: its console report (src/concurrency_manager.cc prints ``Request concurrency:
  N`` and src/inference_profiler.cc ``Request Rate: R inference requests per second`` before each step;
  a stable step's ``Client:`` block has ``Throughput: X infer/sec`` and ``pNN latency: U usec``; a step
  that never stabilised says ``Failed to obtain stable measurement`` instead and reports nothing), and
  its ``-f`` CSV (src/report_writer.cc: ``Concurrency`` or ``Request Rate`` first, ``Inferences/Second``,
  then the stages and ``pNN latency`` in microseconds). Its throughput counts inferences: the console's
  ``Batch size: B`` turns it into requests; the CSV does not say B (read as 1). It counts no failures
  (a failed request stops the run).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.errors import InputError
from diagnose.importers.bench_serving import BenchServingImporter, read_runs
from diagnose.importers.perf_analyzer import PerfAnalyzerImporter, read_steps

_NAN = math.nan
_LEVEL_S = 20  # seconds a Locust user count must be held to make a point of the curve


@dataclass(frozen=True)
class Point:
    """One run of a load test: what it offered, what the service answered, and how fast."""

    source: str  # the file, and the line where a file holds several runs
    tool: str
    rate_rps: float | None  # an open-loop rate offered (None: unlimited, or a closed loop)
    concurrency: float | None  # clients (users, VUs, max concurrency) of a closed loop
    throughput_rps: float
    latency_p50_ms: float = _NAN
    latency_p99_ms: float = _NAN
    ttft_p50_ms: float = _NAN
    ttft_p99_ms: float = _NAN
    tpot_p50_ms: float = _NAN
    failed_share: float = _NAN  # nan: the tool does not count failures


def read_results(path: Path) -> list[Point]:
    """Every run a result file holds; an InputError naming the file where it is none of the formats."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if text.lstrip().startswith(("{", "[")):
        return _json_points(path, text)
    header = text.splitlines()[0] if text.strip() else ""
    if header.startswith("Timestamp,User Count"):
        return _locust_history(path, text)
    if header.startswith("Type,Name,Request Count"):
        return _locust_stats(path, text)
    if header.startswith(("Concurrency,Inferences/Second", "Request Rate,Inferences/Second")):
        return _perf_analyzer_csv(path, text)
    if PerfAnalyzerImporter().recognise(text) is not None:
        return _perf_analyzer_console(path, text)
    if BenchServingImporter().recognise(text) is not None:
        return _bench_console(path, text)
    raise InputError(
        f"{path}: not a load test's results diagnose load reads (vLLM's or SGLang's benchmark JSON or "
        "printed result, genai-perf's or AIPerf's profile export, Locust's --csv files, k6's summary JSON, "
        "perf_analyzer's report or -f CSV)"
    )


def _json_points(path: Path, text: str) -> list[Point]:
    try:
        documents = [json.loads(text)]
        sources = [str(path)]
    except json.JSONDecodeError:  # a file of one run a line (vLLM's --append-result, SGLang's)
        documents, sources = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append(json.loads(line))  # Python's reader takes SGLang's bare Infinity
            except json.JSONDecodeError as error:
                raise InputError(f"{path}:{number}, column {error.colno}: not JSON ({error.msg})") from None
            sources.append(f"{path}:{number}")
    points = []
    for source, document in zip(sources, documents, strict=True):
        if not isinstance(document, dict):
            raise InputError(f"{source}: expected a JSON object of results")
        points.append(_point(source, document, path))
    return points


def _point(source: str, doc: dict[str, Any], path: Path) -> Point:
    throughput = doc.get("request_throughput")
    if isinstance(throughput, dict):
        return _profile_export(source, doc, path)
    if "metrics" in doc or "results" in doc:
        return _k6(source, doc)
    if "dataset_name" in doc or "median_e2e_latency_ms" in doc or "median_e2e_latency" in doc:
        return _sglang(source, doc)
    if "request_throughput" in doc or "model_id" in doc:
        return _vllm(source, doc)
    raise InputError(
        f"{source}: a JSON object, but not a load test's results diagnose load reads "
        "(no request_throughput, no k6 metrics)"
    )


def _vllm(source: str, doc: dict[str, Any]) -> Point:
    swapped = "best_of" in doc and "burstiness" not in doc  # the 2024 script: mean and median swapped
    median_key = "mean_e2el_ms" if swapped else "median_e2el_ms"
    completed = _number(doc.get("completed"))
    failed = _number(doc.get("failed"))
    if math.isnan(failed) and isinstance(doc.get("errors"), list):
        failed = float(sum(1 for error in doc["errors"] if error))
    if math.isnan(failed) and not math.isnan(_number(doc.get("num_prompts"))):
        failed = _number(doc.get("num_prompts")) - completed
    return Point(
        source,
        "vLLM bench serve",
        _rate(doc.get("request_rate")),
        _positive(doc.get("max_concurrency")),
        _required(source, doc, "request_throughput"),
        _number(doc.get(median_key)),
        _number(doc.get("p99_e2el_ms")),
        _number(doc.get("median_ttft_ms")),
        _number(doc.get("p99_ttft_ms")),
        _number(doc.get("median_tpot_ms")),
        failed / (completed + failed) if completed + failed > 0 else _NAN,
    )


def _sglang(source: str, doc: dict[str, Any]) -> Point:
    completed = _number(doc.get("completed"))
    duration = _number(doc.get("duration", doc.get("benchmark_duration")))
    throughput = _number(doc.get("request_throughput"))
    if math.isnan(throughput) and duration > 0:  # before 0.4.3: completed over the run's duration
        throughput = completed / duration
    if math.isnan(throughput):
        raise InputError(f"{source}: SGLang results without request_throughput, completed or duration")
    return Point(
        source,
        "SGLang bench_serving",
        _rate(doc.get("request_rate")),
        _positive(doc.get("max_concurrency")),
        throughput,
        _number(doc.get("median_e2e_latency_ms", doc.get("median_e2e_latency"))),
        _number(doc.get("p99_e2e_latency_ms")),
        _number(doc.get("median_ttft_ms", doc.get("median_ttft"))),
        _number(doc.get("p99_ttft_ms")),
        _number(doc.get("median_tpot_ms")),
    )


def _profile_export(source: str, doc: dict[str, Any], path: Path) -> Point:
    config = doc.get("input_config") or {}
    aiperf = "loadgen" in config or "was_cancelled" in doc or "error_summary" in doc
    if aiperf:
        load = config.get("loadgen") or {}
        concurrency, rate = load.get("concurrency"), load.get("request_rate")
        if concurrency is None and rate is None:
            concurrency, rate = _from_command(str(config.get("cli_command", "")), path)
        errors = _stat(doc, "error_request_count", "avg")
        answered = _stat(doc, "request_count", "avg")
        failed = (errors if not math.isnan(errors) else 0.0) / answered if answered > 0 else _NAN
    else:
        stimulus = (config.get("perf_analyzer") or {}).get("stimulus") or {}
        concurrency = stimulus.get("concurrency", config.get("concurrency"))
        rate = stimulus.get("request_rate", config.get("request_rate"))
        failed = _NAN
    return Point(
        source,
        "AIPerf" if aiperf else "genai-perf",
        _rate(rate),
        _positive(concurrency),
        _stat(doc, "request_throughput", "avg"),
        _stat(doc, "request_latency", "p50"),
        _stat(doc, "request_latency", "p99"),
        _stat(doc, "time_to_first_token", "p50"),
        _stat(doc, "time_to_first_token", "p99"),
        _stat(doc, "inter_token_latency", "p50"),
        failed,
    )


def _from_command(command: str, path: Path) -> tuple[float | None, float | None]:
    """AIPerf's load where its config was left at defaults: the command line, else the folder's name."""
    words = shlex.split(command) if command else []
    found: dict[str, float] = {}
    for flag, key in (("--concurrency", "concurrency"), ("--request-rate", "rate")):
        if flag in words and words.index(flag) + 1 < len(words):
            found[key] = _number(words[words.index(flag) + 1])
    for key, pattern in (("concurrency", r"concurrency(\d+)"), ("rate", r"request_rate(\d+(?:\.\d+)?)")):
        match = re.search(pattern, path.parent.name)
        if key not in found and match:
            found[key] = float(match.group(1))
    if not found:
        found["concurrency"] = 1.0  # AIPerf's own default where neither is set
    return found.get("concurrency"), found.get("rate")


def _k6(source: str, doc: dict[str, Any]) -> Point:
    metrics = doc.get("metrics")
    if metrics is None:  # the machine-readable summary: a list, no counter rates
        results = doc.get("results") or {}
        listed = results.get("metrics") if isinstance(results, dict) else None
        if not isinstance(listed, list):
            raise InputError(f"{source}: a k6 summary without metrics")
        metrics = {m.get("name"): m for m in listed if isinstance(m, dict)}
        duration = _number((doc.get("config") or {}).get("duration"))
        requests = _k6_value(metrics, "http_reqs", "count")
        throughput = requests / duration if duration > 0 else _NAN
    else:
        throughput = _k6_value(metrics, "http_reqs", "rate")
    failed = _k6_value(metrics, "http_req_failed", "rate")
    if math.isnan(failed):
        failed = _k6_value(metrics, "http_req_failed", "value")  # --summary-export renames rate to value
    vus = _k6_value(metrics, "vus_max", "value")
    if math.isnan(vus):
        vus = _k6_value(metrics, "vus", "max")
    if math.isnan(throughput):
        raise InputError(f"{source}: a k6 summary without http_reqs")
    return Point(
        source,
        "k6",
        None,
        vus if vus > 0 else None,
        throughput,
        _k6_value(metrics, "http_req_duration", "med"),
        _k6_value(metrics, "http_req_duration", "p(99)"),
        failed_share=failed,
    )


def _k6_value(metrics: dict[str, Any], name: str, key: str) -> float:
    metric = metrics.get(name)
    if not isinstance(metric, dict):
        return _NAN
    nested = metric.get("values")  # handleSummary's data nests them; --summary-export flattens them
    values: dict[str, Any] = nested if isinstance(nested, dict) else metric
    return _number(values.get(key))


def _locust_history(path: Path, text: str) -> list[Point]:
    """One point per level of users held at least ``_LEVEL_S``: its throughput is the median of the rows'
    current rate (Locust's ~10 s window) once the first 10 s at the level have passed. Latency is left
    out: the history's percentiles are cumulative since the start unless --csv-full-history."""
    rows = [row for row in csv.DictReader(io.StringIO(text)) if row.get("Name") == "Aggregated"]
    levels: dict[float, list[tuple[float, float, float]]] = {}
    for row in rows:
        users, ts = _number(row.get("User Count")), _number(row.get("Timestamp"))
        levels.setdefault(users, []).append(
            (ts, _number(row.get("Requests/s")), _number(row.get("Failures/s")))
        )
    points = []
    for users, samples in sorted(levels.items()):
        if not users > 0 or len(samples) < _LEVEL_S:
            continue
        first = samples[0][0]
        settled = [(rps, fails) for ts, rps, fails in samples if ts >= first + 10]
        if len(settled) < _LEVEL_S - 10:
            continue
        rps = sorted(r for r, _ in settled)[len(settled) // 2]
        failures = sorted(f for _, f in settled)[len(settled) // 2]
        points.append(
            Point(
                f"{path} ({users:g} users)",
                "Locust",
                None,
                users,
                rps,
                failed_share=failures / rps if rps else _NAN,
            )
        )
    if not points:
        raise InputError(f"{path}: Locust's history holds no level of users held {_LEVEL_S} s or more")
    return points


def _locust_stats(path: Path, text: str) -> list[Point]:
    rows = [row for row in csv.DictReader(io.StringIO(text)) if row.get("Name") == "Aggregated"]
    if not rows:
        raise InputError(f"{path}: Locust's stats without its Aggregated row")
    row = rows[-1]
    count, failures = _number(row.get("Request Count")), _number(row.get("Failure Count"))
    return [
        Point(
            str(path),
            "Locust",
            None,
            None,  # the totals do not say how many users ran: _stats_history.csv does
            _number(row.get("Requests/s")),
            _number(row.get("50%", row.get("Median Response Time"))),
            _number(row.get("99%")),
            failed_share=failures / count if count > 0 else _NAN,
        )
    ]


_BENCH_TOOLS = {
    "vllm": "vLLM bench serve",
    "sglang": "SGLang bench_serving",
    "benchmark_serving": "benchmark_serving (JetStream, vLLM before 2024-03)",
}


def _bench_console(path: Path, text: str) -> list[Point]:
    """A point per run a serving benchmark printed, read as ``diagnose file`` reads it
    (diagnose/importers/bench_serving.py): the rate where it was finite, the concurrency where set."""
    points = []
    for run in read_runs(text.splitlines()):
        got = run.row()
        requests, failed = _number(got.get("requests")), _number(got.get("failed_requests"))
        points.append(
            Point(
                f"{path}:{run.line}",
                _BENCH_TOOLS[run.tool],
                _positive(got.get("rate_rps")),
                _positive(got.get("concurrency")),
                _number(got.get("throughput_rps")),
                _number(got.get("latency_p50_ms")),
                _number(got.get("latency_p99_ms")),
                _number(got.get("ttft_p50_ms")),
                _number(got.get("ttft_p99_ms")),
                _number(got.get("tpot_p50_ms")),
                failed / (requests + failed) if requests + failed > 0 else _NAN,
            )
        )
    if not points:
        raise InputError(
            f"{path}: a serving benchmark's output with no run's figures (no Successful requests:)"
        )
    return points


def _perf_analyzer_console(path: Path, text: str) -> list[Point]:
    """A point per step that stabilised, read as ``diagnose file`` reads the report
    (diagnose/importers/perf_analyzer.py); an unstable step is left out."""
    points = [
        Point(
            f"{path}:{step.line}",
            "perf_analyzer",
            step.rate_rps,
            step.concurrency,
            step.throughput_rps,
            step.latency_p50_ms,
            step.latency_p99_ms,
        )
        for step in read_steps(text.splitlines())[0]
    ]
    if not points:
        raise InputError(
            f"{path}: perf_analyzer's report with no step that stabilised (no Client: Throughput)"
        )
    return points


def _perf_analyzer_csv(path: Path, text: str) -> list[Point]:
    points = []
    for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        load = _positive(row.get("Concurrency", row.get("Request Rate")))
        throughput = _number(row.get("Inferences/Second"))
        if load is None or math.isnan(throughput):
            raise InputError(f"{path}:{number}: expected a step's load and Inferences/Second")
        closed = "Concurrency" in row
        points.append(
            Point(
                f"{path}:{number}",
                "perf_analyzer",
                None if closed else load,
                load if closed else None,
                throughput,
                _number(row.get("p50 latency")) / 1000,
                _number(row.get("p99 latency")) / 1000,
            )
        )
    if not points:
        raise InputError(f"{path}: perf_analyzer's CSV header with no step under it")
    return points


def _stat(doc: dict[str, Any], metric: str, key: str) -> float:
    value = doc.get(metric)
    return _number(value.get(key)) if isinstance(value, dict) else _NAN


def _required(source: str, doc: dict[str, Any], key: str) -> float:
    value = _number(doc.get(key))
    if math.isnan(value):
        raise InputError(f"{source}: no {key}")
    return value


def _rate(value: Any) -> float | None:
    number = _number(value)
    return number if math.isfinite(number) and number > 0 else None  # "inf", Infinity, "trace": none


def _positive(value: Any) -> float | None:
    number = _number(value)
    return number if math.isfinite(number) and number > 0 else None


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return _NAN
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).replace(",", ""))  # genai-perf's CSV writes 6,512.30
    except ValueError:
        return _NAN
