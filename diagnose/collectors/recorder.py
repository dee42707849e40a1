"""The recording loop: sample every collector on a drift-free monotonic clock, write as it goes.

Tick k is due at ``start + k * interval`` on the monotonic clock, so sleep
jitter never accumulates; a tick that comes too late (the machine stalled) is
skipped rather than sampled twice in a row.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

import psutil

from diagnose.collectors.discover import server_pids
from diagnose.collectors.environment import describe_environment
from diagnose.collectors.follow import FileFollower
from diagnose.collectors.gpu import GpuCollector, NvmlUnavailable
from diagnose.collectors.host import HostCollector
from diagnose.collectors.identity import HostIdentity
from diagnose.collectors.logs import events_from_lines
from diagnose.collectors.prometheus import SCRAPE_FAILURES, MetricsScraper
from diagnose.collectors.requests_log import RequestLog
from diagnose.collectors.sources import SourceHealth
from diagnose.collectors.writer import DumpWriter
from diagnose.engines.metrics import detect_engine, parse_samples
from diagnose.errors import InputError

KERNEL_LOGS = ("/var/log/kern.log", "/var/log/messages")


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
    metrics_map: dict[str, str] = field(default_factory=dict)  # a service's own metric -> server column
    stage_kinds: dict[str, str] = field(default_factory=dict)  # the manifest's stages: map
    environment: dict[str, str] = field(default_factory=dict)  # --env: versions the user states
    settings: dict[str, str] = field(default_factory=dict)  # --setting: the server's settings
    allocator_log: str | None = None
    logs: tuple[str, ...] = ()
    top: int = 10
    gpu: bool = True
    # False: the service runs on another machine, read from afar (its /metrics, its request log): this
    # host's CPU, processes, GPUs and kernel logs are not the service's and are not sampled
    host: bool = True
    force: bool = False
    strict: bool = False  # a source that is down at start is an error, not a warning


@dataclass
class RecordSummary:
    samples: int = 0
    skipped_ticks: int = 0
    gpus: list[str] = field(default_factory=list)
    gpu_note: str | None = None
    stopped_by: str = "duration"
    loop_cpu_s: float = 0.0  # CPU time of the sampling loop itself (not start-up), from the OS
    first_sample_cpu_s: float = 0.0  # of which the first sample's: it opens the files it keeps reading
    dead_sources: list[str] = field(default_factory=list)  # down at the end, one line each


@dataclass(frozen=True)
class Progress:
    """Where a recording stands after a sample: what a person watching it wants to see."""

    elapsed_s: float
    samples: int
    rows: dict[str, int]  # rows recorded so far, by table
    bytes_written: int | None  # the dump's tables on disk so far; None for a flight recorder's ring
    sources: tuple[tuple[str, str], ...]  # (what, its state: ok, never reached, lost, ...)


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
    progress: Callable[[Progress], None] | None = None,
    started: Callable[[], None] | None = None,
) -> RecordSummary:
    """Sample every interval until ``stop`` or the duration; ``progress`` hears after each sample, and
    ``started`` once the sources were checked and the dump opened (a refused start never hears it)."""
    summary = RecordSummary()
    if not options.host and options.pids:
        raise InputError("--pid names a process of this host, and --no-host records none of this host's")
    if not options.host and not (options.metrics_url or options.requests_log):
        raise InputError(
            "--no-host records only what the service itself gives: pass --metrics-url or --requests-log"
        )
    watched = (
        list(options.pids or server_pids(options.metrics_url, options.requests_log)) if options.host else []
    )  # restarts follow
    requests = (
        RequestLog.open(options.requests_log, options.column_map, options.requests_format)
        if options.requests_log
        else None
    )
    allocator = FileFollower(options.allocator_log) if options.allocator_log else None
    user_logs = [FileFollower(path) for path in options.logs]
    scraper = (
        MetricsScraper(options.metrics_url, options.engine, metrics_map=options.metrics_map)
        if options.metrics_url
        else None
    )
    health = SourceHealth((lambda _: None) if options.strict else say)  # --strict says it once, below
    _check_sources(health, options, watched, requests, allocator, user_logs, scraper)
    health.say = say
    if options.strict and health.dead():
        _close([*user_logs, allocator, requests.follower if requests else None])
        raise InputError("--strict: " + "; ".join(health.dead()))
    if sink is not None:
        writer: Sink = sink
    elif options.output is not None:
        identity = None if options.host else HostIdentity(_served_from(options))
        writer = DumpWriter(options.output, options.interval_s, force=options.force, identity=identity)
    else:
        raise ValueError("record() writes into options.output or into a sink; it was given neither")
    if started is not None:
        started()
    if watched and not options.pids:
        pids = f"{'pid' if len(watched) == 1 else 'pids'} {', '.join(map(str, watched))}"
        say(f"diagnose: watching the server ({pids}), found from the request source")
    host = HostCollector(tuple(watched), top=options.top) if options.host else None
    gpu = _open_gpu(options, summary, say)
    kernel = KERNEL_LOGS if options.host else ()
    logs = [*user_logs, *(FileFollower(path) for path in kernel if _readable(path))]
    writer.set_manifest(
        watched_pids=list(watched),
        server_pids=list(watched),
        **_started(watched),
        gpus=summary.gpus,
        gpu_note=summary.gpu_note,
        sources=health.manifest(),
        environment=describe_environment(watched, gpu.versions() if gpu else None, options.environment)
        if options.host
        else dict(options.environment),
        **({"stages": options.stage_kinds} if options.stage_kinds else {}),
        **({"settings": options.settings} if options.settings else {}),
    )
    start, cpu_start = time.monotonic(), time.process_time()
    tick = 0
    counted: Counter[str] = Counter()

    def put(table: str, rows: list[dict]) -> None:
        """Into the dump, counted for the progress line."""
        counted[table] += len(rows)
        writer.append(table, rows)

    try:
        while not stop.is_set():
            now, wall = time.monotonic(), time.time()
            if options.duration_s is not None and now - start >= options.duration_s:
                break
            changed = False
            if host is not None:
                sample = host.sample(wall, now)
                put("system", [sample.system])
                put("processes", sample.processes)
                put("events", sample.events)
                changed = _follow_server(health, sample.events, watched, wall)
            if gpu is not None:
                gpus = gpu.sample(wall)
                put("gpu", gpus.gpus)
                put("gpu_processes", gpus.processes)
                put("events", gpus.events)
            if requests is not None:
                put("requests", requests.rows())
                changed |= health.update("requests_log", wall, requests.follower.problem())
            if allocator is not None:
                put("allocator", _json_rows(allocator.read_lines()))
                changed |= health.update("allocator_log", wall, allocator.problem())
            for index, follower in enumerate(logs):
                put("events", events_from_lines(follower.read_lines(), wall, str(follower.path)))
                if index < len(user_logs):
                    changed |= health.update(f"log_{index + 1}", wall, follower.problem())
            if scraper is not None:
                row, problem, answered = _scrape(scraper, wall, now)
                if answered and problem:
                    changed |= health.answers_unused("metrics", wall, problem)
                else:
                    if problem and not health.dead_now("metrics"):
                        put("events", [{"ts": wall, "kind": "scrape_error", "message": problem}])
                    changed |= health.update("metrics", wall, problem)
                put("server", [row] if row else [])
            if changed:
                writer.set_manifest(
                    watched_pids=list(watched), server_pids=list(watched), sources=health.manifest()
                )
            writer.flush()
            summary.samples += 1
            if summary.samples == 1:  # it opens every file it keeps reading: a cost paid once
                summary.first_sample_cpu_s = time.process_time() - cpu_start
            if progress is not None:
                progress(_progress(time.monotonic() - start, summary.samples, counted, writer, health))
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
        if host is not None:
            host.close()
        if gpu is not None:
            gpu.close()
        _close([*logs, allocator, requests.follower if requests else None])
        summary.loop_cpu_s = time.process_time() - cpu_start
        summary.dead_sources = health.dead()
        writer.close(
            sources=health.manifest(),
            samples=summary.samples,
            skipped_ticks=summary.skipped_ticks,
            stopped_by=summary.stopped_by,
            recorder_cpu_s=round(summary.loop_cpu_s, 3),
            recorder_first_sample_cpu_s=round(summary.first_sample_cpu_s, 4),
            recorder_total_cpu_s=round(time.process_time(), 3),  # start-up and imports included
        )
    return summary


def _progress(
    elapsed_s: float, samples: int, counted: Counter[str], writer: Sink, health: SourceHealth
) -> Progress:
    size = writer.bytes_written() if isinstance(writer, DumpWriter) else None  # a ring has its own budget
    states = tuple((str(entry["kind"]), str(entry["status"])) for entry in health.manifest().values())
    return Progress(elapsed_s, samples, dict(counted), size, states)


def _started(pids: list[int]) -> dict:
    """The watched servers' start times, for the manifest: the first run's cold requests are cold too."""
    starts = []
    for pid in pids:
        try:
            starts.append(psutil.Process(pid).create_time())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    iso = sorted(datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds") for t in starts)
    return {"process_start": [t.replace("+00:00", "Z") for t in iso]} if iso else {}


def _check_sources(
    health: SourceHealth,
    options: RecordOptions,
    watched: list[int],
    requests: RequestLog | None,
    allocator: FileFollower | None,
    logs: list[FileFollower],
    scraper: MetricsScraper | None,
) -> None:
    """Every source the user named, checked once before the first sample."""
    now = time.time()
    if requests is not None:
        health.add("requests_log", "request log", str(requests.follower.path))
        health.update("requests_log", now, requests.follower.problem())
    if scraper is not None:
        # the map goes into the manifest: diagnose verify reads the same endpoint the same way later
        detail = {"map": scraper.metrics_map} if scraper.metrics_map else None
        health.add("metrics", "metrics endpoint", scraper.url, detail)
        try:
            unmapped = _unmapped(scraper, parse_samples(scraper.fetch()))
        except SCRAPE_FAILURES as error:
            health.update("metrics", now, _scrape_reason(error))
        else:
            if unmapped:
                health.answers_unused("metrics", now, unmapped)
            else:
                health.update("metrics", now, None)
    for pid in watched:
        health.add(f"pid_{pid}", "server process", f"pid {pid}")
        health.update(f"pid_{pid}", now, None if psutil.pid_exists(pid) else "no such process")
    if allocator is not None:
        health.add("allocator_log", "allocator log", str(allocator.path))
        health.update("allocator_log", now, allocator.problem())
    for index, follower in enumerate(logs):
        health.add(f"log_{index + 1}", "log", str(follower.path))
        health.update(f"log_{index + 1}", now, follower.problem())


def _follow_server(health: SourceHealth, events: list[dict], watched: list[int], now: float) -> bool:
    """A watched server that exits is a lost source; one that restarts is followed to its new pid."""
    changed = False
    for event in events:
        if event["kind"] == "process_exit" and event.get("pid") in watched:
            changed |= health.update(f"pid_{event['pid']}", now, "the process exited")
        elif event["kind"] == "restart" and event.get("previous_pid") in watched:
            old, new = event["previous_pid"], event["pid"]
            watched[watched.index(old)] = new
            health.retarget(f"pid_{old}", f"pid {new} (restarted; was pid {old})")
            health.update(f"pid_{old}", now, None)
            changed = True
    return changed


def _scrape(scraper: MetricsScraper, wall: float, now: float) -> tuple[dict | None, str | None, bool]:
    """One server row (or None), why the endpoint gave nothing usable if it did not, and whether it
    answered at all (an answer with nothing to keep is no outage)."""
    try:
        row = scraper.sample(wall, now)
    except SCRAPE_FAILURES as error:
        return None, _scrape_reason(error), False
    return row, _unmapped(scraper, scraper.last_samples), True


def _unmapped(scraper: MetricsScraper, samples: dict[str, float]) -> str | None:
    """A /metrics page of no engine diagnose knows answers, yet records nothing: say so."""
    if scraper.engine == "custom":
        missing = [
            metric
            for metric in scraper.custom_metrics
            if not {metric, f"{metric}_total", f"{metric}_count"} & samples.keys()
        ]
        return f"--metrics-map: not on the page: {', '.join(missing)}" if missing else None
    if scraper.engine != "auto" or detect_engine(samples):
        return None
    return (
        f"its {len(samples)} series are none of vLLM's, Triton's, TGI's, SGLang's or MindIE's; name the "
        "service's own with --metrics-map (e.g. my_queue_size=queue_depth,my_running=running), or give "
        "--engine if an engine's names are renamed"
    )


def _scrape_reason(error: BaseException) -> str:
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        return f"cannot connect: {error.reason}"
    return str(error) or type(error).__name__


def _served_from(options: RecordOptions) -> str | None:
    """Where a service read from afar runs: its /metrics URL's host (a request log says none)."""
    return urlparse(options.metrics_url).hostname if options.metrics_url else None


def _open_gpu(
    options: RecordOptions, summary: RecordSummary, say: Callable[[str], None]
) -> GpuCollector | None:
    if not options.host:
        summary.gpu_note = "the service runs on another host (--no-host): this host's GPUs are not its"
        return None
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


def _close(followers: list[FileFollower | None]) -> None:
    for follower in followers:
        if follower is not None:
            follower.close()


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
