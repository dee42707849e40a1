"""Triton's perf_analyzer as it prints its run -> the ``load_steps`` table: each step's client and server.

Read as its writer prints it (triton-inference-server/perf_analyzer; before 2022 the server repository's
src/clients/c++/perf_analyzer):

- ``*** Measurement Settings ***``, then ``Batch size: B`` (perf_analyzer.cc);
- each step: ``Request concurrency: N`` (concurrency_manager.cc) or ``Request Rate: R inference requests
  per second`` (inference_profiler.cc; "per seconds" in 2021), then, where it stabilised, ``Client:``
  (inference_profiler.cc ``ReportClientSideStats``: ``Request count``, ``Delayed Request Count`` or, since
  2023, ``[WARNING] Perf Analyzer was not able to keep up with the desired request rate. X% of the
  requests were delayed.``, ``Throughput: X infer/sec``, ``Avg latency: U usec``, ``pNN latency: U usec``)
  and ``Server:`` (``ReportServerSideStats``: ``Inference count``, ``Execution count``, ``Successful
  request count``, ``Avg request latency: U usec (overhead O usec + queue Q usec + compute input I usec +
  compute infer F usec + compute output P usec)``; an ensemble's ``compute C usec``, a response cache's
  ``cache hit/miss C usec``; an ensemble's composing models follow, each with a block of its own);
- a step that did not stabilise prints ``Failed to obtain stable measurement ...`` (or ``Measured latency
  went over the set limit``) and no figures;
- the closing summary, ``Inferences/Second vs. Client Average Batch Latency`` then ``Concurrency: N,
  throughput: X infer/sec, latency U usec`` a step (perf_analyzer.cc ``WriteReport``): read where the
  paste holds no step's own block.

Its throughput counts inferences: ``Batch size: B`` turns it into requests. The server's figures are
Triton's own statistics for the window (queue: the time a request waited for an instance, the dynamic
batcher's wait included): what ``facts/load_steps.py`` weighs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace

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

TOOL = "perf_analyzer"
_NAN = math.nan
_SETTINGS = re.compile(r"^\*\*\* Measurement Settings \*\*\*")
_SUMMARY_TITLE = re.compile(r"^Inferences/Second vs\. Client")
_STEP = re.compile(
    r"^(?:Request concurrency: (?P<concurrency>\d+)"
    r"|Request Rate: (?P<rate>[\d.]+) inference requests per second)"
)
_SUMMARY_STEP = re.compile(
    r"^(?:Concurrency: (?P<concurrency>\d+)|Request Rate: (?P<rate>[\d.]+)), "
    r"throughput: (?P<throughput>[\d.]+) infer/sec, latency (?P<latency>\d+) usec"
)
_BATCH = re.compile(r"^Batch size: (?P<size>\d+)")
_FIGURE = re.compile(
    r"^(?P<name>Request count|Delayed Request Count|Throughput|Avg latency|p\d+ latency|Inference count"
    r"|Execution count|Successful request count|Avg request latency): (?P<value>[\d.]+)"
)
_DELAYED = re.compile(r"not able to keep up with the desired request rate\. (?P<pct>[\d.]+)% of the requests")
_PARTS = re.compile(
    r"(?P<part>overhead|queue|compute input|compute infer|compute output|compute|cache hit/miss)"
    r" (?P<us>\d+) usec"
)
_COMPUTE = (("compute input", "compute infer", "compute output"), ("compute",), ("cache hit/miss",))
_UNSTABLE = re.compile(r"Failed to obtain stable measurement|Measured latency went over the set limit")


@dataclass(frozen=True)
class Step:
    """One step perf_analyzer measured: its load, what the client saw, what the server said."""

    line: int  # where its header is in the file
    concurrency: float | None  # a closed loop of N outstanding requests
    rate_rps: float | None  # an open loop at R requests a second
    throughput_ips: float  # inferences a second (requests times the batch size)
    batch_size: float = 1.0
    latency_avg_ms: float = _NAN
    latency_p50_ms: float = _NAN
    latency_p90_ms: float = _NAN
    latency_p95_ms: float = _NAN
    latency_p99_ms: float = _NAN
    requests: float = _NAN  # the client's request count
    delayed_pct: float = _NAN  # requests the client sent later than their schedule
    server_requests: float = _NAN
    server_inferences: float = _NAN
    server_executions: float = _NAN
    server_latency_ms: float = _NAN  # a request's time in the server, on average
    server_queue_ms: float = _NAN  # of which waiting for an instance (and the batcher)
    server_compute_ms: float = _NAN  # of which computing (input, infer, output; or the cache's)

    @property
    def throughput_rps(self) -> float:
        return self.throughput_ips / self.batch_size


def read_steps(lines: Iterable[str]) -> tuple[list[Step], int]:
    """Every step that stabilised, in the order printed, and how many did not."""
    batch = 1.0
    steps: list[_Building] = []
    summary: list[Step] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip(MARKDOWN_WRAPPING)
        if (size := _BATCH.match(line)) is not None and not steps:
            batch = max(1.0, float(size["size"]))
        elif (step := _STEP.match(line)) is not None:
            steps.append(_Building(number, _load(step["concurrency"]), _load(step["rate"])))
        elif (said := _SUMMARY_STEP.match(line)) is not None:
            latency = float(said["latency"]) / 1000
            load = _load(said["concurrency"]), _load(said["rate"])
            summary.append(Step(number, *load, float(said["throughput"]), latency_avg_ms=latency))
        elif steps:
            steps[-1].take(line)
    built = [s.step(batch) for s in steps if not s.unstable]
    read = [s for s in built if s is not None]
    unstable = sum(1 for s in steps if s.unstable)
    if not read and summary:
        return [replace(s, batch_size=batch) for s in summary], unstable
    return read, unstable


class PerfAnalyzerImporter(Importer):
    name = "perf-analyzer"
    description = "Triton's perf_analyzer run as printed: each step's load, client latency and server queue"

    def recognise(self, head: str) -> Claim | None:
        lines = [line.strip(MARKDOWN_WRAPPING) for line in head.splitlines()]
        for index, line in enumerate(lines):
            if _SETTINGS.match(line) or _SUMMARY_TITLE.match(line):
                return claim(Strength.DOCUMENT, filled(lines[index:]))
            if _STEP.match(line) and any(_FIGURE.match(after) for after in lines[index + 1 : index + 8]):
                return claim(Strength.STATEMENT, filled(lines[index:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        steps, unstable = read_steps(source.lines())
        if steps:
            result.tables["load_steps"] = pd.DataFrame([_row(step) for step in steps])
        if unstable:
            result.warnings.append(
                f"{unstable} of perf_analyzer's steps did not stabilise and printed no figures: left out"
            )
        return result


@dataclass
class _Building:
    """A step as its lines are read: the client's block, then the server's (its first figures only:
    an ensemble's composing models follow with blocks of their own)."""

    line: int
    concurrency: float | None
    rate_rps: float | None
    block: str = ""
    figures: dict[str, float] = field(default_factory=dict)
    unstable: bool = False

    def take(self, line: str) -> None:
        if line.startswith(("Client:", "Server:")):
            self.block = line[:6].lower()
        elif line.startswith("Composing models:"):
            self.block = "composing"
        elif _UNSTABLE.search(line):
            self.unstable = True
        elif (delayed := _DELAYED.search(line)) is not None:
            self.figures.setdefault("delayed_pct", float(delayed["pct"]))
        elif self.block in ("client", "server") and (figure := _FIGURE.match(line)) is not None:
            self.figures.setdefault(f"{self.block}:{figure['name']}", float(figure["value"]))
            if figure["name"] == "Avg request latency" and self.block == "server":
                for part in _PARTS.finditer(line):
                    self.figures.setdefault(f"part:{part['part']}", float(part["us"]))

    def step(self, batch: float) -> Step | None:
        got = self.figures
        throughput = got.get("client:Throughput")
        if throughput is None:
            return None
        requests = got.get("client:Request count", _NAN)
        delayed = got.get("delayed_pct", _NAN)
        if math.isnan(delayed) and "client:Delayed Request Count" in got and requests > 0:
            delayed = 100 * got["client:Delayed Request Count"] / requests
        # the parts of its compute as the writer splits it: a model's, an ensemble's, a response cache's
        split = next((parts for parts in _COMPUTE if f"part:{parts[0]}" in got), ())
        compute = [got[f"part:{part}"] for part in split if f"part:{part}" in got]
        return Step(
            self.line,
            self.concurrency,
            self.rate_rps,
            throughput,
            batch,
            latency_avg_ms=_ms(got.get("client:Avg latency")),
            latency_p50_ms=_ms(got.get("client:p50 latency")),
            latency_p90_ms=_ms(got.get("client:p90 latency")),
            latency_p95_ms=_ms(got.get("client:p95 latency")),
            latency_p99_ms=_ms(got.get("client:p99 latency")),
            requests=requests,
            delayed_pct=delayed,
            server_requests=got.get("server:Successful request count", _NAN),
            server_inferences=got.get("server:Inference count", _NAN),
            server_executions=got.get("server:Execution count", _NAN),
            server_latency_ms=_ms(got.get("server:Avg request latency")),
            server_queue_ms=_ms(got.get("part:queue")),
            server_compute_ms=sum(compute) / 1000 if compute else _NAN,
        )


def _row(step: Step) -> dict[str, object]:
    figures = {f.name: getattr(step, f.name) for f in fields(step) if f.name != "throughput_ips"}
    return {"tool": TOOL, **figures, "throughput_rps": step.throughput_rps}


def _load(value: str | None) -> float | None:
    return float(value) if value else None


def _ms(us: float | None) -> float:
    return _NAN if us is None else us / 1000
