"""The recording loop: sample every collector on a drift-free monotonic clock, write as it goes.

Tick k is due at ``start + k * interval`` on the monotonic clock, so sleep
jitter never accumulates; a tick that comes too late (the machine stalled) is
skipped rather than sampled twice in a row.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from diagnose.collectors.discover import server_pids
from diagnose.collectors.follow import FileFollower
from diagnose.collectors.gpu import GpuCollector, NvmlUnavailable
from diagnose.collectors.host import HostCollector
from diagnose.collectors.logs import events_from_lines
from diagnose.collectors.prometheus import MetricsScraper, ScrapeError
from diagnose.collectors.requests_log import RequestLog
from diagnose.collectors.writer import DumpWriter
from diagnose.errors import InputError

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$")
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/messages")


def parse_duration(text: str) -> float:
    """``"15m"``, ``"1h30m"``, ``"90s"`` or ``"90"`` -> seconds."""
    match = _DURATION.match(text or "")
    if not match or not any(match.groups()):
        raise InputError(f"expected a duration such as 90s, 15m or 1h30m, got {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise InputError(f"the duration must be positive, got {text!r}")
    return total


@dataclass
class RecordOptions:
    output: Path | None  # None: only the sink passed to record() receives the samples
    duration_s: float | None = None
    interval_s: float = 1.0
    pids: tuple[int, ...] = ()
    requests_log: str | None = None
    requests_format: str = "auto"
    column_map: dict[str, str] = field(default_factory=dict)
    metrics_url: str | None = None
    engine: str = "auto"
    allocator_log: str | None = None
    logs: tuple[str, ...] = ()
    top: int = 10
    gpu: bool = True
    force: bool = False


@dataclass
class RecordSummary:
    samples: int = 0
    skipped_ticks: int = 0
    gpus: list[str] = field(default_factory=list)
    gpu_note: str | None = None
    stopped_by: str = "duration"
    loop_cpu_s: float = 0.0  # CPU time of the sampling loop itself (not start-up), from the OS


class Sink(Protocol):
    """Where samples go: a DumpWriter on disk, or a live view's memory (which may also write)."""

    def append(self, table: str, rows: list[dict]) -> None: ...
    def flush(self) -> None: ...
    def set_manifest(self, **fields: object) -> None: ...
    def close(self, **summary: object) -> None: ...


def record(
    options: RecordOptions,
    stop: threading.Event,
    say: Callable[[str], None] = print,
    sink: Sink | None = None,
) -> RecordSummary:
    writer = sink or DumpWriter(options.output, options.interval_s, force=options.force)
    summary = RecordSummary()
    watched = options.pids or server_pids(options.metrics_url, options.requests_log)
    if watched and not options.pids:
        say(f"diagnose: watching server pid(s) {', '.join(map(str, watched))}, found from the request source")
    host = HostCollector(watched, top=options.top)
    gpu = _open_gpu(options, summary, say)
    requests = (
        RequestLog.open(options.requests_log, options.column_map, options.requests_format)
        if options.requests_log
        else None
    )
    allocator = FileFollower(options.allocator_log) if options.allocator_log else None
    logs = [FileFollower(path) for path in options.logs]
    logs += [FileFollower(path) for path in KERNEL_LOGS if _readable(path)]
    scraper = MetricsScraper(options.metrics_url, options.engine) if options.metrics_url else None
    scrape_failing = False
    writer.set_manifest(
        watched_pids=list(watched), server_pids=list(watched), gpus=summary.gpus, gpu_note=summary.gpu_note
    )
    start, cpu_start = time.monotonic(), time.process_time()
    tick = 0
    try:
        while not stop.is_set():
            now, wall = time.monotonic(), time.time()
            if options.duration_s is not None and now - start >= options.duration_s:
                break
            sample = host.sample(wall, now)
            writer.append("system", [sample.system])
            writer.append("processes", sample.processes)
            writer.append("events", sample.events)
            if gpu is not None:
                gpus = gpu.sample(wall)
                writer.append("gpu", gpus.gpus)
                writer.append("gpu_processes", gpus.processes)
                writer.append("events", gpus.events)
            if requests is not None:
                writer.append("requests", requests.rows())
            if allocator is not None:
                writer.append("allocator", _json_rows(allocator.read_lines()))
            for follower in logs:
                writer.append("events", events_from_lines(follower.read_lines(), wall, str(follower.path)))
            if scraper is not None:
                try:
                    row = scraper.sample(wall, now)
                    scrape_failing = False
                except ScrapeError as error:
                    if not scrape_failing:
                        writer.append("events", [{"ts": wall, "kind": "scrape_error", "message": str(error)}])
                    scrape_failing, row = True, None
                writer.append("server", [row] if row else [])
            writer.flush()
            summary.samples += 1
            tick += 1
            due = start + tick * options.interval_s
            late = time.monotonic() - due
            if late > options.interval_s:
                skipped = int(late // options.interval_s)
                summary.skipped_ticks += skipped
                tick += skipped
                due = start + tick * options.interval_s
            stop.wait(max(0.0, due - time.monotonic()))
        if stop.is_set():
            summary.stopped_by = "signal"
    finally:
        if gpu is not None:
            gpu.close()
        for follower in [*logs, *([allocator] if allocator else [])]:
            follower.close()
        if requests is not None:
            requests.follower.close()
        summary.loop_cpu_s = time.process_time() - cpu_start
        writer.close(
            samples=summary.samples,
            skipped_ticks=summary.skipped_ticks,
            stopped_by=summary.stopped_by,
            recorder_cpu_s=round(summary.loop_cpu_s, 3),
        )
    return summary


def _open_gpu(
    options: RecordOptions, summary: RecordSummary, say: Callable[[str], None]
) -> GpuCollector | None:
    if not options.gpu:
        summary.gpu_note = "GPU collection turned off (--no-gpu)"
        return None
    try:
        gpu = GpuCollector()
    except NvmlUnavailable as error:
        summary.gpu_note = str(error)
        say(f"diagnose: {error}; recording everything else")
        return None
    summary.gpus = gpu.names
    return gpu


def _json_rows(lines: list[str]) -> list[dict]:
    rows = []
    for line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


def _readable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
