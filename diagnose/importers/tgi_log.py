"""Text Generation Inference (TGI) and Text Embeddings Inference (TEI) logs: requests, starts, failures.

TGI's router logs each successful request inside its tracing span, whose
fields are the request's own timings (Rust ``Duration`` debug strings:
``1.2s``, ``23.09ms``, ``527.5µs``), in plain text
(``generate{... total_time="2.31s" validation_time="527.5µs" ...}: ... Success``)
or with ``--json-output`` (``"total_time":"2.31s"``). They become a
``requests`` row each:

| span field | requests column |
|---|---|
| total_time | latency_ms; the line's stamp minus it is the arrival ``ts`` |
| validation_time (TGI) / tokenization_time (TEI) | stage_validation_ms / stage_tokenize_ms (CPU) |
| queue_time | stage_queue_ms |
| inference_time | stage_inference_ms (GPU: prefill and decode) |
| time_per_token | tpot_ms |
| inference_time / time_per_token | output_len (TGI divides the one by the tokens to get the other) |

The launcher's lines give events: its arguments (``Args {``) a ``restart``;
a shard's "Shard ready in 218.6s" a ``restart`` that long before (when no
arguments line says when); the router's "Connected" the end of warm-up; a
shard that failed to start or warm up (``Method Warmup encountered an
error``, ``Shard N failed to start``) ``engine_start_failed``; a shard that
crashed, or a router thread that panicked, ``engine_dead``. An OOM in the
shards' output is read as everywhere else.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.oom_log import OomScanner
from diagnose.importers.stamps import leading_iso_stamp
from diagnose.units import counted

_TARGETS = re.compile(r"text_generation_(?:launcher|router|server)|text_embeddings_router")
_UNIT_MS = {"ns": 1e-6, "µs": 1e-3, "μs": 1e-3, "Âµs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
_TIMING = re.compile(
    r"\b(total_time|validation_time|tokenization_time|queue_time|inference_time|time_per_token)"
    r"\\?\"?\s*[=:]\s*\\?\"?(\d+(?:\.\d+)?)\s*(ns|µs|μs|Âµs|us|ms|s)\b"
)
_COLUMNS = {
    "validation_time": "stage_validation_ms",
    "tokenization_time": "stage_tokenize_ms",
    "queue_time": "stage_queue_ms",
    "inference_time": "stage_inference_ms",
    "time_per_token": "tpot_ms",
}
_ARGS = re.compile(r"text_generation_launcher: Args \{")
_SHARD_READY = re.compile(r"Shard ready in (\d+(?:\.\d+)?)s")
_CONNECTED = re.compile(r"\bConnected\s*$")
_START_FAILED = re.compile(
    r"Method Warmup encountered an error|Shard \d+ failed to start|Error when initializing model"
    r"|ShardCannotStart|Could not start the model"
)
_DEAD = re.compile(r"Shard \d+ crashed|thread '[\w-]+' panicked at|Webserver Crashed")
_SAME_START_S = 300.0
_SAME_FAILURE_S = 5.0


class TgiLogImporter(Importer):
    name = "tgi-log"
    description = "TGI / TEI logs: each request's timings from the router, the launcher's starts and failures"

    def recognise(self, head: str) -> Claim | None:
        return claim(Strength.STATEMENT, sum(1 for line in head.splitlines() if _TARGETS.search(line)))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        requests: list[dict] = []
        said: list[tuple[str, float, str, int]] = []  # kind, seconds before the line's time, line, number
        times: list[float | None] = []  # the time of each event's line, once known
        last: float | None = None  # a line with no stamp of its own: the last stamped line's (a traceback's)
        skipped = 0
        ooms = OomScanner(source.mtime, serving_engine=True, tz=tz)
        for number, line in enumerate(source.lines(), start=1):
            ooms.feed(line)
            ts = leading_iso_stamp(line, tz, within=60)
            if ts is not None:
                if last is None:  # the lines before the first stamp: its time
                    times = [ts if time is None else time for time in times]
                last = ts
            timings = {name: float(value) * _UNIT_MS[unit] for name, value, unit in _TIMING.findall(line)}
            if "total_time" in timings:
                if ts is not None:
                    requests.append(_request(ts, timings))
                    continue
                skipped += 1
            kind, before = _event(line)
            if kind is not None:
                said.append((kind, before, line.strip()[:500], number))
                times.append(last)
        events: list[dict] = []
        for (kind, before, message, number), time in zip(said, times, strict=True):
            at = (time if time is not None else source.mtime) - before
            window = _SAME_START_S if kind == "restart" else _SAME_FAILURE_S
            if any(e["kind"] == kind and abs(e["ts"] - at) < window for e in events):
                continue  # one start (the arguments, every shard ready) or one failure said on several lines
            events.append({"ts": at, "kind": kind, "message": message, "line": number})
        events += ooms.events()
        result = Imported()
        if requests:
            result.tables["requests"] = pd.DataFrame(requests).sort_values("ts", kind="stable")
        if events:
            result.tables["events"] = pd.DataFrame(events)
        if skipped > 0:
            result.warnings.append(
                f"{counted(skipped, 'request line')} with timings but no time stamp were left out"
            )
        return result


def _request(ts: float, timings: dict[str, float]) -> dict[str, float]:
    total = timings["total_time"]
    row = {"ts": ts - total / 1000.0, "latency_ms": total}
    row.update({column: timings[name] for name, column in _COLUMNS.items() if name in timings})
    per_token, inference = timings.get("time_per_token"), timings.get("inference_time")
    if per_token and inference:
        row["output_len"] = round(inference / per_token)
    return row


def _event(line: str) -> tuple[str | None, float]:
    """The event the line says, and how many seconds before its own time it happened."""
    if _ARGS.search(line):
        return "restart", 0.0
    if m := _SHARD_READY.search(line):
        return "restart", float(m.group(1))
    if _START_FAILED.search(line):
        return "engine_start_failed", 0.0
    if _DEAD.search(line):
        return "engine_dead", 0.0
    if _CONNECTED.search(line) and "text_generation_router" in line:
        return "warmup_end", 0.0
    return None, 0.0
