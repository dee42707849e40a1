"""Triton Inference Server logs, and TensorRT-LLM's iteration statistics wherever they are printed.

Triton logs in glog's form, ``I0523 04:01:24.648712 1 server.cc:120] message``: a level, the month
and day (no year: the file's), the time, the thread and the source line. From them come the
server's starts (``Initializing Triton Inference Server``, or the pinned memory pool every launch
creates first), the end of its start-up (the first ``Started ...Service at`` after a start), models
that fail to load, a crash (``Signal (11) received``), and any OOM message.

TensorRT-LLM prints one JSON object per iteration of its batcher, in two generations:

- the batch manager's (``[TensorRT-LLM][INFO] {"Active Request Count":249,"Context Requests":8,
  ...,"Timestamp":"12-13-2023 14:55:14","Used KV cache blocks":2448}``), which Triton's TensorRT-LLM
  backend logs with ``log_iteration_data``;
- the executor's ``IterationStats`` (``{"iter":90,"iterLatencyMS":...,"numActiveRequests":...,
  "numQueuedRequests":...,"kvCacheStats":{"usedNumBlocks":...,"maxNumBlocks":...},
  "inflightBatchingStats":{"numScheduledRequests":...,"numPausedRequests":...}}``), which
  ``trtllm-serve``'s ``/metrics`` answers with (a JSON array) and its logs print.

Each becomes a server row: the requests scheduled this iteration as ``running``, those waiting as
``queue_depth`` (queued, or active but not scheduled), used KV blocks over the most there are as
``kv_cache_usage_pct``. A rise in the paused requests (evicted for lack of KV blocks, to be resumed:
a preemption) is a preemption event for as many requests. An iteration with no time of its own is
placed by its iterations' latencies, ending at the file's modification time, and the report says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, local_epoch, zone_note
from diagnose.importers.oom_log import OomScanner
from diagnose.importers.stamps import leading_iso_stamp
from diagnose.units import counted

_GLOG = re.compile(r"^([IWEF])(\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\s+\d+ [\w.\-]+:\d+\]")
_TRITON = re.compile(
    r"(?:server|model_lifecycle|model_repository_manager|pinned_memory_manager|cuda_memory_manager|grpc_server"
    r"|http_server|backend_model|backend_model_instance|tritonserver|cache_manager)\.cc:\d+\]|TRITONBACKEND|Triton"
)
_START = re.compile(r"Initializing Triton Inference Server|Pinned memory pool is created at")
_READY = re.compile(r"Started (?:GRPCInferenceService|HTTPService|Metrics Service) at")
_FAILED = re.compile(r"failed to load '|error: creating server:|Poll failed for model directory")
_CRASHED = re.compile(r"Signal \((?:6|11)\) received")
_SAME_START_S = 300.0  # the lines of one launch

# The two generations' names for the same figures: (column, batch manager's, executor's)
_ACTIVE = ("Active Request Count", "numActiveRequests")
_SCHEDULED = ("Scheduled Requests", "numScheduledRequests")
_QUEUED = (None, "numQueuedRequests")
_PAUSED = (None, "numPausedRequests")
_USED = ("Used KV cache blocks", "usedNumBlocks")
_MAX = ("Max KV cache blocks", "maxNumBlocks")
_STAT_MARKS = ('"Active Request Count"', '"numActiveRequests"', '"iterLatencyMS"', '"kvCacheStats"')


class TritonLogImporter(Importer):
    name = "triton-log"
    description = (
        "Triton Inference Server logs (glog lines: starts, readiness, failed loads, crashes, OOMs) and "
        "TensorRT-LLM's per-iteration statistics, batch manager or executor, logged or from trtllm-serve"
    )

    def recognise(self, head: str) -> Claim | None:
        # glog's form alone is not Triton's (XLA and TensorFlow log the same way): its sources say so
        lines = head.splitlines()
        glog = sum(1 for line in lines if _GLOG.match(line))
        stats = sum(1 for line in lines if any(mark in line for mark in _STAT_MARKS))
        if (sum(1 for line in lines[:200] if _GLOG.match(line)) >= 3 and _TRITON.search(head)) or stats:
            return claim(Strength.STATEMENT, max(glog, stats))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        year = datetime.fromtimestamp(source.mtime, UTC).year
        ooms = OomScanner(source.mtime, serving_engine=True, tz=tz)
        events: list[dict] = []
        stats: list[tuple[float | None, dict]] = []
        last: float | None = None  # the last stamped line's time, for a line without one
        glog_lines = 0
        for number, line in enumerate(source.lines(), start=1):
            ooms.feed(line)
            glog = _GLOG.match(line)
            ts = _glog_time(glog, year, tz) if glog else leading_iso_stamp(line, tz)
            glog_lines += glog is not None
            last = ts if ts is not None else last
            for stat in _stats(line):
                stats.append((_stat_time(stat, tz) or ts, stat))
            kind = _event(line)
            if kind is None:
                continue
            at = ts if ts is not None else (last if last is not None else source.mtime)
            if kind == "restart" and any(
                e["kind"] == kind and abs(e["ts"] - at) < _SAME_START_S for e in events
            ):
                continue
            if kind == "warmup_end" and any(e["kind"] == kind for e in events[-1:]):
                continue  # the gRPC, HTTP and metrics services of one start
            events.append({"ts": at, "kind": kind, "message": line.strip()[:500], "line": number})
        if (
            not stats and not glog_lines
        ):  # one JSON document over many lines: a /metrics answer, pretty-printed
            stats = [(_stat_time(stat, tz), stat) for stat in _stats(" ".join(source.lines()))]
        result = Imported()
        rows, preemptions, placed = _rows(stats, source.mtime)
        events += preemptions + ooms.events()
        if rows:
            result.tables["server"] = pd.DataFrame(rows)
            if placed:
                result.warnings.append(
                    f"placed {counted(placed, 'TensorRT-LLM iteration')} without a time by the iterations' "
                    "latencies (iterLatencyMS), the last at the file's modification time"
                )
        if events:
            result.tables["events"] = pd.DataFrame(events).sort_values("ts", kind="stable")
        if glog_lines and result.tables:
            result.warnings.append(zone_note("Triton log times (glog: no year, the file's)", tz))
        return result


def _glog_time(match: re.Match[str], year: int, tz: str | None) -> float | None:
    _, month, day, clock = match.groups()
    epoch = local_epoch(f"{year}-{month}-{day}T{clock}", tz)
    return None if epoch != epoch else epoch


def _event(line: str) -> str | None:
    if _START.search(line):
        return "restart"
    if _READY.search(line):
        return "warmup_end"
    if _FAILED.search(line):
        return "engine_start_failed"
    if _CRASHED.search(line):
        return "engine_dead"
    return None


_OPENING = re.compile(r"[\[{]")


def _stats(line: str) -> Iterator[dict]:
    """The iteration statistics on a line: a JSON object, or an array of them (/metrics)."""
    if not any(mark in line for mark in _STAT_MARKS):
        return
    found = None
    for opening in _OPENING.finditer(line):  # "[TensorRT-LLM][INFO] {...}": the first that parses
        try:
            found, _ = json.JSONDecoder().raw_decode(line, opening.start())
            break
        except ValueError:
            continue
    for stat in found if isinstance(found, list) else [found]:
        if isinstance(stat, dict):
            yield stat


def _figure(stat: dict, names: tuple[str | None, str]) -> float | None:
    """A figure by either generation's name, at the top or in the executor's nested groups."""
    legacy, executor = names
    for group in (stat, stat.get("inflightBatchingStats") or {}, stat.get("kvCacheStats") or {}):
        for name in (legacy, executor):
            value = group.get(name) if name is not None and isinstance(group, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return None


_LEGACY_TIME = re.compile(r"^(\d\d)-(\d\d)-(\d{4}) (\d\d:\d\d:\d\d)$")  # "12-13-2023 14:55:14"


def _stat_time(stat: dict, tz: str | None) -> float | None:
    text = stat.get("Timestamp", stat.get("timestamp"))
    if not isinstance(text, str):
        return None
    legacy = _LEGACY_TIME.match(text.strip())
    stamp = f"{legacy[3]}-{legacy[1]}-{legacy[2]}T{legacy[4]}" if legacy else text.strip()
    if not legacy and not re.match(r"\d{4}-\d\d-\d\d", stamp):
        return None  # a bare clock ("14:55:14") says no day
    epoch = local_epoch(stamp, tz)
    return None if epoch != epoch else epoch


def _rows(stats: list[tuple[float | None, dict]], mtime: float) -> tuple[list[dict], list[dict], int]:
    """Server rows and preemption events; how many iterations had to be placed by latencies."""
    untimed = sum(ts is None for ts, _ in stats)
    times = [ts for ts, _ in stats]
    clock = mtime  # backwards from the file's time: each iteration ends its latency after the one before
    for index in reversed(range(len(stats)) if untimed else range(0)):
        at = times[index]
        at = clock if at is None else at
        times[index] = at
        clock = at - (_figure(stats[index][1], (None, "iterLatencyMS")) or 0.0) / 1e3
    rows, events = [], []
    paused_before = 0.0
    for ts, (_, stat) in zip(times, stats, strict=True):
        assert ts is not None
        active, scheduled = _figure(stat, _ACTIVE), _figure(stat, _SCHEDULED)
        queued = _figure(stat, _QUEUED)
        if queued is None and active is not None and scheduled is not None:
            queued = max(0.0, active - scheduled)  # active but not scheduled this iteration: waiting
        used, most = _figure(stat, _USED), _figure(stat, _MAX)
        row = {
            "ts": ts,
            "running": scheduled if scheduled is not None else active,
            "queue_depth": queued,
            "kv_cache_usage_pct": 100.0 * used / most if used is not None and most else None,
        }
        if any(value is not None for key, value in row.items() if key != "ts"):
            rows.append(row)
        paused = _figure(stat, _PAUSED) or 0.0
        if paused > paused_before:
            more = paused - paused_before
            said = f"TensorRT-LLM paused {counted(more, 'more request')} for KV cache blocks"
            events.append({"ts": ts, "kind": "preemption", "requests": more, "message": said})
        paused_before = paused
    return rows, events, untimed
