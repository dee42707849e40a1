"""The read-only probes ``diagnose verify`` runs on the live host, and the live facts each gives.

A probe reads; it never changes anything, never pauses a process, and runs
each command it needs with a timeout and no shell. What it reaches of the
host goes through :class:`Host`, the one boundary tests replace: the files
under a root, the commands, NVML, and an HTTP fetch. A probe that cannot run
here (no NVML, no metrics endpoint, nothing readable) says why, and its
checks are "not run", never a refutation.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.collectors.identity import HostIdentity, this_host
from diagnose.facts.model import Facts, FactValue
from diagnose.verify.processes_now import SAMPLE_S, SAMPLES, ServerIdentity, read_processes_now, snapshot
from diagnose.verify.schedules import Schedule, crontab_lines, systemd_timers

STACK_GAP_S = 0.5  # between py-spy dumps: ten in five seconds
ENGINE_GAP_S = 5.0  # between the two scrapes of /metrics: rates and the queue's growth over it
PERIOD_TOLERANCE = 0.15  # a schedule within 15 % of the contender's period runs at it (cron jitter, load)
BUSY_PCT = 10.0


def _run(argv: list[str], timeout_s: float) -> str | None:
    """A command's output, or None where it is not installed, fails or takes too long."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _fetch(url: str, timeout_s: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - the user's endpoint
        return response.read().decode("utf-8", errors="replace")


def _gpu_rows() -> list[dict]:
    """One NVML sample of every GPU (raises NvmlUnavailable without NVML)."""
    from diagnose.collectors.gpu import GpuCollector

    collector = GpuCollector()
    try:
        return collector.sample(time.time()).gpus
    finally:
        collector.close()


@dataclass
class Host:
    """What the probes reach of the machine; tests give their own."""

    root: Path = Path("/")
    run: Callable[[list[str], float], str | None] = _run
    fetch: Callable[[str, float], str] = _fetch
    gpu_rows: Callable[[], list[dict]] = _gpu_rows
    timeout_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep  # between the two reads of /proc
    clock: Callable[[], float] = time.time
    sample_s: float = SAMPLE_S  # between reads of /proc
    samples: int = SAMPLES  # intervals read
    identity: Callable[[], HostIdentity] = this_host  # which host the probes read


@dataclass(frozen=True)
class Context:
    """What the probes need of the dump: its facts, its metrics endpoint, its server and when it began."""

    facts: Facts
    metrics_url: str | None = None
    metrics_map: dict[str, str] | None = None  # a service's own metric -> server column, as recorded
    server: ServerIdentity | None = None
    span: tuple[float, float] | None = None  # the dump's first and last sample, epoch s


@dataclass(frozen=True)
class Found:
    """What a probe read: its live facts, where from, details worth showing; or why it did not run."""

    probe: str
    facts: dict[str, FactValue] = field(default_factory=dict)
    source: str = ""
    details: tuple[str, ...] = ()
    not_run: str | None = None


def run_probe(name: str, host: Host, context: Context) -> Found:
    if name == "schedules":
        return _schedules(host, context.facts)
    if name == "gpu_clocks":
        return _gpu_clocks(host)
    if name == "engine_metrics":
        return _engine_metrics(host, context.metrics_url, context.metrics_map)
    if name == "processes_now":
        return _processes_now(host, context)
    if name == "stacks":
        return _stacks(host, context)
    raise ValueError(f"no probe {name!r}")


def _stacks(host: Host, context: Context) -> Found:
    """``py-spy dump --nonblocking`` of the server's processes, once a second (diagnose/verify/stacks.py)."""
    from diagnose.verify.stacks import read_stacks

    if context.server is None:
        return Found("stacks", not_run="the dump names no server process whose stacks to read")
    if not (host.root / "proc").is_dir():
        return Found("stacks", not_run=f"no /proc under {host.root}: the server cannot be found")
    _, pids = snapshot(host.root, host.clock(), context.server)
    if not pids:
        return Found("stacks", not_run="the dump's server is not running now")
    dumps: list[str] = []
    for index in range(host.samples):
        for pid in sorted(pids):
            text = host.run(["py-spy", "dump", "--pid", str(pid), "--nonblocking"], host.timeout_s)
            if text is None:
                return Found(
                    "stacks",
                    not_run="py-spy did not answer: not installed (pip install py-spy), or not allowed to "
                    "read the server (run as its user or root; in a container, with SYS_PTRACE)",
                )
            dumps.append(text)
        if index + 1 < host.samples:
            host.sleep(STACK_GAP_S)
    stage = context.facts.get("cpu_stage.name")
    reading = read_stacks(dumps, stage if isinstance(stage, str) else None)
    where = f"py-spy dump --nonblocking of pid {', '.join(map(str, sorted(pids)))}, every {STACK_GAP_S:g} s"
    return Found("stacks", reading.facts, where, reading.details)


def _processes_now(host: Host, context: Context) -> Found:
    contender = context.facts.get("spikes.contender.cmdline") or context.facts.get("spikes.contender.process")
    reading = read_processes_now(
        host.root,
        context.server,
        context.span,
        contender if isinstance(contender, str) else None,
        host.sleep,
        host.clock,
        host.sample_s,
        host.samples,
    )
    if reading.not_run is not None:
        return Found("processes_now", not_run=reading.not_run)
    read = f"/proc, read every {host.sample_s:g} s for {host.sample_s * host.samples:g} s"
    return Found("processes_now", reading.facts, read, reading.details)


def _schedules(host: Host, facts: Facts) -> Found:
    """Every crontab this user can read and the systemd timers, against the contender the dump names."""
    found: list[Schedule] = []
    read: list[str] = []
    for path, system in _crontab_files(host.root):
        try:
            found += crontab_lines(path.read_text(encoding="utf-8", errors="replace"), str(path), system)
            read.append(str(path))
        except OSError:
            continue  # another user's spool: not readable without root, and not needed to say so
    mine = host.run(["crontab", "-l"], host.timeout_s)
    if mine is not None:
        found += crontab_lines(mine, "crontab -l", system=False)
        read.append("crontab -l")
    timers = host.run(["systemctl", "list-timers", "--all", "--no-pager"], host.timeout_s)
    if timers is not None:
        found += systemd_timers(timers)
        read.append("systemctl list-timers")
    if not read:
        return Found("schedules", not_run="no crontab or systemd timer could be read on this host")
    period = facts.number("spikes.contender.period_s")
    command = facts.get("spikes.contender.cmdline") or facts.get("spikes.contender.process")
    by_period = [
        s for s in found if period and s.period_s and abs(s.period_s - period) <= PERIOD_TOLERANCE * period
    ]
    by_command = [s for s in found if isinstance(command, str) and _same_command(s.command, command)]
    match = (by_command + by_period)[:1]
    live: dict[str, FactValue] = {"live.schedules.count": len(found)}
    if period:
        live["live.schedules.period_match"] = bool(by_period)
    if isinstance(command, str):
        live["live.schedules.command_match"] = bool(by_command)
    if match:
        live["live.schedules.match"] = f"{match[0].text} ({match[0].where})"
    details = tuple(
        f"{s.where}: {s.text}" + (f" (every {s.period_s:,.0f} s)" if s.period_s else "") for s in found[:20]
    )
    return Found("schedules", live, ", ".join(read), details)


def _crontab_files(root: Path) -> list[tuple[Path, bool]]:
    files = [(root / "etc" / "crontab", True)]
    for folder, system in (
        ("etc/cron.d", True),
        ("var/spool/cron/crontabs", False),
        ("var/spool/cron", False),
    ):
        directory = root / folder
        try:
            files += [(p, system) for p in sorted(directory.iterdir()) if p.is_file()]
        except OSError:
            continue
    return [(p, system) for p, system in files if p.is_file()]


def _same_command(scheduled: str, running: str) -> bool:
    """The schedule runs the process's script or program: its longest path-like word appears in both."""
    try:
        words = shlex.split(running)
    except ValueError:
        words = running.split()
    keys = [w for w in words if "/" in w or w.endswith((".py", ".sh"))] or words[:1]
    key = max(keys, key=len) if keys else ""
    return bool(key) and (key in scheduled or Path(key).name in scheduled.split())


def _gpu_clocks(host: Host) -> Found:
    from diagnose.collectors.gpu import NvmlUnavailable
    from diagnose.dump.schema import SLOWING_REASONS
    from diagnose.facts.throttle import reason_names

    try:
        rows = host.gpu_rows()
    except NvmlUnavailable as error:
        return Found("gpu_clocks", not_run=str(error))
    busy = [r for r in rows if (r.get("util_pct") or 0) >= BUSY_PCT]
    live: dict[str, FactValue] = {"live.gpu.busy_now": bool(busy)}
    slowing = []
    ratios = []
    for row in busy:
        reasons = reason_names(row.get("throttle_reasons")) & SLOWING_REASONS
        if reasons:
            slowing.append((row.get("gpu"), sorted(reasons)[0]))
        if row.get("sm_clock_mhz") and row.get("max_sm_clock_mhz"):
            ratios.append(row["sm_clock_mhz"] / row["max_sm_clock_mhz"])
    live["live.gpu.slowing_now"] = bool(slowing)
    if slowing:
        live["live.gpu.reason"] = f"GPU {slowing[0][0]}: {slowing[0][1]}"
    if ratios:
        live["live.gpu.clock_ratio"] = min(ratios)
    details = tuple(
        f"GPU {r.get('gpu')}: utilisation {r.get('util_pct')} %, SM clock {r.get('sm_clock_mhz')} of "
        f"{r.get('max_sm_clock_mhz')} MHz, reasons {r.get('throttle_reasons') or 'none'}"
        for r in rows
    )
    return Found("gpu_clocks", live, "NVML, one sample now", details)


def _engine_metrics(host: Host, url: str | None, metrics_map: dict[str, str] | None) -> Found:
    """Two scrapes ``ENGINE_GAP_S`` apart: the gauges now, and the rates and the queue's growth between."""
    from diagnose.engines.metrics import custom_map, detect_engine, engine_maps, engine_row, parse_samples

    if not url:
        return Found(
            "engine_metrics", not_run="no metrics endpoint: the dump names none (give --metrics-url)"
        )
    try:
        first = parse_samples(host.fetch(url, host.timeout_s))
        host.sleep(ENGINE_GAP_S)
        samples = parse_samples(host.fetch(url, host.timeout_s))
    except (OSError, ValueError) as error:
        return Found("engine_metrics", not_run=f"{url} did not answer ({error})")
    engine = "custom" if metrics_map else detect_engine(samples)
    if engine is None:
        return Found(
            "engine_metrics",
            not_run=f"{url} answers with no serving engine's metrics (give the service's own: --metrics-map)",
        )
    mapping = custom_map(metrics_map) if metrics_map else engine_maps()[engine]
    before = engine_row(mapping, 0.0, first)
    row = engine_row(mapping, time.time(), samples, first, ENGINE_GAP_S)
    live: dict[str, FactValue] = {}
    for column, name in (
        ("kv_cache_usage_pct", "live.engine.kv_usage_pct"),
        ("queue_depth", "live.engine.waiting"),
        ("running", "live.engine.running"),
        ("tokens_per_s", "live.engine.tokens_per_s"),
        ("prompt_tokens_per_s", "live.engine.prompt_tokens_per_s"),
    ):
        if row.get(column) is not None:
            live[name] = float(row[column])
    if row.get("queue_depth") is not None and before.get("queue_depth") is not None:
        live["live.engine.waiting_growth"] = float(row["queue_depth"] - before["queue_depth"])
    counter = mapping.counter("preemptions_per_s")
    if counter is not None and counter in samples:
        live["live.engine.preemptions_total"] = samples[counter]
    details = tuple(f"{name}: {value:g}" for name, value in live.items() if isinstance(value, float))
    return Found("engine_metrics", live, f"{url} ({engine}), scraped twice {ENGINE_GAP_S:g} s apart", details)
