"""vLLM engine logs: the periodic stats line (V0 and V1), preemptions and OOMs.

| stats field | server column |
|---|---|
| Running: N reqs | running |
| Pending / Waiting: N reqs | queue_depth |
| Swapped: N reqs (V0) | swapped |
| GPU KV cache usage: X% | kv_cache_usage_pct |
| Avg generation throughput: X tokens/s | tokens_per_s |
| Avg prompt throughput: X tokens/s | prompt_tokens_per_s |
| Prefix cache hit rate: X% (V1, or GPU: X% on V0's own line) | prefix_cache_hit_pct |

vLLM stamps lines with ``MM-DD HH:MM:SS`` in the server's local time and no
year: an outer ISO prefix (``docker logs --timestamps``) gives the year when
present, else the file's modification time does; the time is read as UTC,
with a warning. A preemption warning becomes a ``preemption`` event; the
start-up memory lines (profiling, KV cache size in memory, blocks and
tokens, maximum concurrency) a ``kv_cache_config`` event; an engine step that
timed out an ``engine_stall`` event; an engine that died in service an
``engine_dead`` event, and one that failed to start an ``engine_start_failed``
event. The server's start ("vLLM API server version", "Initializing a V1 LLM
engine") is a ``restart`` event, so that cold requests after it are told from
warm ones, and the end of its warm-up ("init engine ... took", "Graph
capturing finished") a ``warmup_end`` event.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from diagnose.engines.failures import STALLED, VLLM_DEAD, VLLM_STALLED
from diagnose.importers.base import Cadence, Claim, Imported, Importer, Source, Strength, claim, zone_note
from diagnose.importers.oom_log import OomScanner
from diagnose.importers.stamps import engine_stamp

_FIELDS = {
    "running": re.compile(r"Running: (\d+) reqs"),
    "queue_depth": re.compile(r"(?:Pending|Waiting): (\d+) reqs"),
    "swapped": re.compile(r"Swapped: (\d+) reqs"),
    "kv_cache_usage_pct": re.compile(r"GPU KV cache usage: ([\d.]+)%"),
    "tokens_per_s": re.compile(r"Avg generation throughput: ([\d.]+) tokens/s"),
    "prompt_tokens_per_s": re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s"),
    "prefix_cache_hit_pct": re.compile(r"Prefix cache hit rate: (?:GPU: )?([\d.]+)%"),
}
_STARTUP = re.compile(
    r"Memory profiling results|Available KV cache memory: (-?[\d.]+) GiB|# GPU blocks: (\d+)"
    r"|GPU KV cache size: [\d,]+ tokens|Maximum concurrency for [\d,]+ tokens per request"
    r"|larger than the maximum number of tokens that can be stored in KV cache"
)
# An engine that never served: a configuration or memory problem at start-up, not a stall in service.
_FAILED_START = re.compile(r"EngineCore failed to start|Engine core initialization failed")
# The server (re)starting, and the end of its warm-up (profiling, KV cache, torch.compile, CUDA graphs).
_STARTED = re.compile(r"vLLM API server version|Initializing (?:a V1 |an )LLM engine")
_WARMED_UP = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took|Graph capturing finished in"
)
_SAME_START_S = 300.0  # the API server's line and the engine's, a few seconds apart, are one start
# A traceback's frames and the exception repeated in them name the error again: one event, not many.
_IN_TRACEBACK = re.compile(r'^\W*(?:\S+\s+){0,6}?\s*File "|raise \w+|^\s+\w+Error')
_EVENTS = (
    (_STARTUP, "kv_cache_config"),
    (STALLED, "engine_stall"),
    (VLLM_DEAD, "engine_dead"),
    (_FAILED_START, "engine_start_failed"),
    (_STARTED, "restart"),
    (_WARMED_UP, "warmup_end"),
)
_ANY_EVENT = re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in _EVENTS))
_MAY_HOLD_STATS = re.compile(r" reqs|tokens/s|cache usage|hit rate")
# vLLM's own line format, whatever the line says (vllm/logger.py: "%(levelname)s %(asctime)s
# [%(filename)s:%(lineno)d] %(message)s" with dates "%m-%d %H:%M:%S"; before 0.6 without the bracket).
# A paste of vLLM's log without a stats line (errors only, a start-up cut short) is still vLLM's.
_LINE_FORMAT = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\]"
)
_FORMAT_LINES = 2  # lines in that format that make a log vLLM's (or every line of a shorter paste)
_ENGINE = re.compile(r"Engine (\d+): Avg")  # V1: a line per engine of a data-parallel server
_PREEMPTED = re.compile(
    r"is preempted by PreemptionMode\.(\w+).*?(?:total_num_cumulative_preemption=(\d+))?$"
)


class VllmLogImporter(Importer):
    name = "vllm-log"
    description = "vLLM engine logs: V0/V1 stats lines, preemption warnings, and any CUDA OOM in them"

    def recognise(self, head: str) -> Claim | None:
        lines = [line for line in head.splitlines() if line.strip()]
        in_format = sum(1 for line in lines if _LINE_FORMAT.search(line))
        markers = ("Avg generation throughput:", "is preempted by PreemptionMode")
        patterns = (_STARTUP, VLLM_STALLED, VLLM_DEAD, _FAILED_START, _STARTED, _WARMED_UP)
        if any(m in head for m in markers) or any(p.search(head) for p in patterns):
            said = sum(
                1
                for line in lines
                if any(m in line for m in markers) or any(p.search(line) for p in patterns)
            )
            return claim(Strength.STATEMENT, max(in_format, said, 1))
        if lines and in_format >= min(_FORMAT_LINES, len(lines)):
            return claim(Strength.STATEMENT, in_format)  # its logger's own line format (vllm/logger.py)
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        fallback = source.mtime
        default_year = datetime.fromtimestamp(fallback, UTC).year
        rows: list[dict] = []
        events: list[dict] = []
        ooms = OomScanner(fallback, serving_engine=True, tz=tz)
        for number, line in enumerate(source.lines(), start=1):
            ooms.feed(line)
            # Most lines of a serving log are requests: plain tests first, then the patterns they allow
            stats = (
                {
                    column: float(m.group(1))
                    for column, m in ((c, p.search(line)) for c, p in _FIELDS.items())
                    if m
                }
                if _MAY_HOLD_STATS.search(line)
                else {}
            )
            preempted = _PREEMPTED.search(line) if "preempted" in line else None
            said = _EVENTS if _ANY_EVENT.search(line) else ()
            if not stats and not preempted and not said:
                continue
            ts = engine_stamp(line, default_year, tz)
            for pattern, kind in said:
                if pattern.search(line) and not _IN_TRACEBACK.search(line):
                    stamp = ts if ts is not None else fallback
                    if kind == "restart" and any(
                        e["kind"] == "restart" and abs(stamp - e["ts"]) < _SAME_START_S for e in events
                    ):
                        continue
                    events.append(
                        {
                            "ts": ts if ts is not None else fallback,
                            "kind": kind,
                            "message": line.strip()[:500],
                            "line": number,
                        }
                    )
            if not stats and not preempted:
                continue
            if "Avg generation throughput" in line or "Avg prompt throughput" in line:
                engine = _ENGINE.search(line)
                rows.append({"ts": ts, **stats, "engine": engine.group(1) if engine else ""})
            elif stats.get("prefix_cache_hit_pct") is not None and rows and ts == rows[-1]["ts"]:
                rows[-1]["prefix_cache_hit_pct"] = stats["prefix_cache_hit_pct"]  # V0's separate line
            if preempted:
                events.append(
                    {
                        "ts": ts if ts is not None else fallback,
                        "kind": "preemption",
                        "mode": preempted.group(1),
                        "cumulative": int(preempted.group(2)) if preempted.group(2) else None,
                        "message": line.strip()[:500],
                        "line": number,
                    }
                )
        events += ooms.events()
        result = Imported()
        rows, untimed = _timed(rows, fallback)
        if untimed:
            result.warnings.append(
                f"{source.name}: {untimed} of its stats lines had no time of their own (cut before it): "
                "left out"
            )
        if rows:
            cadence = _cadence(rows)
            if cadence is not None:
                result.cadences["server"] = cadence
            result.tables["server"] = pd.DataFrame(rows).drop(columns="engine")
            result.warnings.append(zone_note("vLLM log times", tz))
        if events:
            result.tables["events"] = pd.DataFrame(events)
        return result


def _timed(rows: list[dict], fallback: float) -> tuple[list[dict], int]:
    """The stats rows with their own time, and how many had none. A row without one among rows with
    one has no place in their series (the file's time would put it days off); where no row has a time,
    all of them are the file's, at its modification time."""
    timed = [row for row in rows if row["ts"] is not None]
    if not timed:
        return [{**row, "ts": fallback} for row in rows], 0
    return timed, len(rows) - len(timed)


def _cadence(rows: list[dict]) -> Cadence | None:
    """How often vLLM wrote its stats line, where the log's gaps are not that. vLLM logs it every
    interval (V0's metrics.py: 5 s; V1's API server: VLLM_LOG_STATS_INTERVAL, 10 s unless set), each
    line's throughput over the interval before it, and at debug level, unseen, where that interval and
    the one before had no throughput ("Avoid log noise on an idle production system"). So a gap after a
    line that reports no throughput may be idle time, and any other gap is the log's sampling (longer
    than the interval where lines were left out of it). The interval is the median of those, one
    engine's lines at a time (a data-parallel server writes a line per engine); None where no gap was
    idle (the median of them all says the same) or none was not."""
    serving: list[float] = []
    idle = 0
    for engine in {row["engine"] for row in rows}:
        lines = sorted((row for row in rows if row["engine"] == engine), key=lambda row: row["ts"])
        for before, after in zip(lines, lines[1:], strict=False):
            gap = after["ts"] - before["ts"]
            if gap <= 0:
                continue
            if before.get("prompt_tokens_per_s", 0.0) or before.get("tokens_per_s", 0.0):
                serving.append(gap)
            else:
                idle += 1
    if not idle or not serving:
        return None
    seconds = float(np.median(serving))
    return Cadence(
        seconds,
        f"vLLM's stats line, every {seconds:g} s while serving ({idle} longer gaps after a line with no "
        "throughput are idle time: the line is not logged then)",
    )
