"""A text-generation serving benchmark's result block as its tool prints it -> ``load_steps``, a run a row.

Read as the writers print it (the label of each line, its unit, the block's order):

- vLLM's ``benchmarks/benchmark_serving.py`` and, since 2025, ``vllm bench serve``
  (vllm/benchmarks/serve.py): ``============ Serving Benchmark Result ============`` then
  ``"{:<40} {:<10}"`` lines (``Successful requests:``, ``Failed requests:``, ``Maximum request
  concurrency:`` where one was set, ``Request rate configured (RPS):`` where the rate was finite,
  ``Benchmark duration (s):``, ``Total input tokens:``, ``Total generated tokens:``, ``Request throughput
  (req/s):``, ``Peak concurrent requests:``, ...), then a section a metric (``Mean TTFT (ms):``,
  ``Median TTFT (ms):``, ``P{p} TTFT (ms):`` for each of ``--metric-percentiles``; TPOT, ITL, E2EL the
  same). Before the block it prints its load: ``Traffic request rate: inf`` (its default since 2023:
  every request sent at time 0) and ``Maximum request concurrency: None``;
- SGLang's ``bench_serving`` and LMDeploy's copy of it (``profile_restful_api.py``): the same block,
  first ``Backend:``, ``Traffic request rate:``, ``Max request concurrency:`` (``not set``; spelt
  ``reqeuest`` until 2025-05) inside it, ``Concurrency:`` (requests in flight on average) and ``Mean E2E
  Latency (ms):``;
- the plain lines of vLLM's script before March 2024 and of JetStream's ``benchmark_serving.py``, copied
  from it: ``Successful requests: N``, ``Benchmark duration: 12.345678 s``, ``Mean TTFT: X ms``, ...;
  JetStream's since 2025 write ``Mean ttft: X ms``, and its request rate ``0.0`` means every request at
  time 0 (``Benchmarking with request rate of 0.0``). Their TPOT is a request's latency over its output
  tokens: the first token included (``tpot_with_first``).

Where the paste holds the benchmark's command before what it printed, its ``--request-rate`` and
``--max-concurrency`` flags are the load of the run that follows (what the tool prints later says it
again, and is taken over them).

TPOT elsewhere is ``(latency - TTFT) / (output tokens - 1)``: the pace of decoding. ITL is every gap
between two streamed chunks, pooled over the requests. A run's percentiles are over its requests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from diagnose.importers.base import (
    MARKDOWN_WRAPPING,
    Claim,
    Imported,
    Importer,
    Source,
    Strength,
    claim,
    filled,
)

_HEADER = re.compile(r"^=+ ?Serving Benchmark Result ?=+$")
_FOOTER = re.compile(r"^={40,}$")
_FIGURE = re.compile(r"^(?P<label>[A-Za-z][A-Za-z0-9 ()/.,_-]*?):\s+(?P<value>[-+]?[\w.]+)(?:\s+\S+)?$")
_JETSTREAM_RATE = re.compile(r"^Benchmarking with request rate of (?P<value>[\w.]+)")
# The benchmark's command, pasted before what it printed: its load is in its flags (argparse's
# --request-rate, default inf, and --max-concurrency), on lines continued with a backslash
_COMMAND = re.compile(r"(?:benchmark_serving\.py|bench_serving|benchmark/serving\.py|\bbench serve)\b")
_FLAG = re.compile(r"--(?P<flag>request-rate|max-concurrency)[= ]+(?P<value>[\w.]+)")
_FLAGS = {"request-rate": "rate_rps", "max-concurrency": "concurrency"}
_METRIC = re.compile(
    r"^(?P<stat>mean|median|p(?P<p>\d+(?:\.\d+)?)) (?P<metric>ttft|tpot|itl|e2el|e2e latency)(?: \(ms\))?$"
)
_PERCENTILES = {"50": "p50", "90": "p90", "95": "p95", "99": "p99"}
_METRIC_COLUMNS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "latency", "e2e latency": "latency"}
_SETTINGS = {
    "traffic request rate": "rate_rps",
    "request rate configured (rps)": "rate_rps",
    "maximum request concurrency": "concurrency",
    "max request concurrency": "concurrency",
    "max reqeuest concurrency": "concurrency",  # SGLang's spelling until 2025-05
}
_FIGURES = {
    "failed requests": "failed_requests",
    "benchmark duration (s)": "duration_s",
    "benchmark duration": "duration_s",
    "total input tokens": "input_tokens",
    "total generated tokens": "output_tokens",
    "request throughput (req/s)": "throughput_rps",
    "request throughput": "throughput_rps",
    "concurrency": "concurrency_mean",  # SGLang: the requests' summed latency over the run's duration
    "peak concurrent requests": "concurrency_peak",
}


@dataclass
class Run:
    """A run as its lines are read: the load it was given, then its figures (``load_steps``' columns)."""

    line: int
    tool: str
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return "requests" in self.figures

    def row(self) -> dict[str, object]:
        got = dict(self.figures)
        if "throughput_rps" not in got and got.get("duration_s", 0) > 0:
            got["throughput_rps"] = got["requests"] / got["duration_s"]
        with_first = 1.0 if self.tool == "benchmark_serving" else 0.0
        return {"tool": self.tool, "line": float(self.line), **got, "tpot_with_first": with_first}


class BenchServingImporter(Importer):
    name = "bench-serving"
    description = (
        "a text-generation serving benchmark's result (vLLM bench serve, SGLang bench_serving, JetStream): "
        "each run's load, TTFT, TPOT and latency"
    )

    def recognise(self, head: str) -> Claim | None:
        lines = [line.strip(MARKDOWN_WRAPPING) for line in head.splitlines()]
        for index, line in enumerate(lines):
            if _HEADER.match(line):
                return claim(Strength.DOCUMENT, filled(lines[index:]))
            if line.startswith("Successful requests:") and any(
                _metric(after) is not None for after in lines[index + 1 : index + 14]
            ):
                return claim(Strength.STATEMENT, filled(lines[index:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        runs = read_runs(source.lines())
        if runs:
            result.tables["load_steps"] = pd.DataFrame([run.row() for run in runs])
        return result


def read_runs(lines: Iterable[str]) -> list[Run]:
    """The runs whose figures the lines hold, in order; the load a run was given is the last said before
    it (the tool prints it before the run) or inside its block."""
    runs: list[Run] = []
    said: dict[str, float] = {}  # the load printed before a run, for the next run
    current: Run | None = None
    boxed = False  # inside a block under the header: its tool is vLLM's or, with Backend:, SGLang's
    command = False  # inside a benchmark's command continued over lines
    for number, raw in enumerate(lines, start=1):
        line = raw.strip(MARKDOWN_WRAPPING)
        if command or _COMMAND.search(line):
            for flag in _FLAG.finditer(line):
                said.update(_setting(_FLAGS[flag["flag"]], _value(flag["value"])))
            command = line.endswith("\\")
            continue
        if _HEADER.match(line) or _FOOTER.match(line):
            _close(runs, current)
            boxed = _HEADER.match(line) is not None
            current = Run(number, "vllm", said) if boxed else None
            said = {} if boxed else said
            continue
        if (rate := _JETSTREAM_RATE.match(line)) is not None:
            value = _value(rate["value"])
            said.update(_setting("rate_rps", math.inf if value == 0 else value))  # 0.0: all at time 0
            continue
        figure = _FIGURE.match(line)
        if figure is None:
            continue
        label, value = figure["label"].strip().lower(), _value(figure["value"])
        if label == "backend" and current is not None:
            current.tool = "sglang"
        elif label in _SETTINGS:
            target = current.figures if current is not None and not current.measured else said
            target.update(_setting(_SETTINGS[label], value))
        elif label == "successful requests":
            if current is None or current.measured:
                _close(runs, current)
                current, said = Run(number, "vllm" if boxed else "benchmark_serving", said), {}
            current.figures["requests"] = value
        elif current is not None and (column := _metric(line)) is not None:
            current.figures.setdefault(column, value)
        elif current is not None and label in _FIGURES:
            current.figures.setdefault(_FIGURES[label], value)
    _close(runs, current)
    return runs


def _setting(column: str, value: float) -> dict[str, float]:
    """A load setting as a column: a rate of inf is every request sent at time 0 (``sent_at_once``)."""
    if column == "rate_rps" and value == math.inf:
        return {"sent_at_once": 1.0}
    return {column: value}


def _close(runs: list[Run], run: Run | None) -> None:
    if run is not None and run.measured and any(key.startswith(("ttft", "latency")) for key in run.figures):
        runs.append(run)


def _metric(line: str) -> str | None:
    """The column of a metric's line (``Median TTFT (ms): 118.73`` -> ``ttft_p50_ms``), or None."""
    label = line.split(":", 1)[0].strip().lower()
    found = _METRIC.match(label)
    if found is None:
        return None
    which = {"mean": "avg", "median": "p50"}.get(found["stat"]) or _PERCENTILES.get(found["p"] or "")
    return None if which is None else f"{_METRIC_COLUMNS[found['metric']]}_{which}_ms"


def _value(text: str) -> float:
    """A figure as printed: a number, ``inf``; a word (``None``, ``not set``, ``trace``) is none (NaN)."""
    try:
        return float(text)
    except ValueError:
        return math.nan
