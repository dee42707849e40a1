"""The host through psutil: CPU, memory, swap, disk and network, and the busiest processes.

Cost matters more than completeness here. Every sample reads each process's
CPU time, and nothing else, from ``/proc/PID/stat`` (one small read a process:
about 1.6 ms for 370 processes), so a process that becomes busy is recorded from
the sample it does so, whether it was born a moment ago (a 15-second cron job,
a restarted server) or has idled for hours (a worker woken by a queue); its
first rate is its CPU over that sample's true interval, never a share of its
life counted from a birth time rounded to the second. The top processes by CPU
are chosen again every ``rescan_every`` samples from the same readings. Only
the tracked processes are read in full (name, command line, memory, threads).
The busiest-thread figure (one thread at a full core is the tell-tale of a
single-threaded tokenizer or decoder) needs every thread's times, so it is
read for the watched server pids and the ``thread_top`` busiest processes only,
and with it what tells over-parallelism from honest work: the threads' context
switches (``/proc/PID/status`` counts the main thread's alone) and the time
they spent runnable but waiting for a core (``schedstat``). Each thread costs
two small reads, about 7 us: less than psutil's ``threads()`` did for the CPU
times alone. Where there is no ``/proc``, psutil reads the CPU times, more
slowly, and the rest is not recorded.

The host's run queue, context switches and system CPU come from ``/proc/stat``
(psutil's ``cpu_times_percent`` and ``cpu_stats``); each tracked process's
minor page faults (memory handed back and taken again shows as a steady
stream of them) from its ``/proc/PID/stat``, and the cores it may use
(cpu_limits.py) once, when it is first tracked.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import psutil

from diagnose.collectors.cpu_limits import cores_allowed
from diagnose.collectors.redact import redact_cmdline

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
# What reading a process's threads gives, for the watched servers and the busiest few only.
_THREAD_COLUMNS = (
    "max_thread_cpu_pct",
    "run_queue_wait_pct",
    "ctx_switches_voluntary_per_s",
    "ctx_switches_involuntary_per_s",
)
# An untracked process is recorded from the sample in which it used this share of a core.
_BUSY_CPU_PCT = 10.0
_MAX_NEWLY_BUSY = 64  # a host forking hundreds of busy processes a second costs no more than this
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds_by_pid() -> dict[int, float]:
    """Every process's CPU time (user + system, seconds), read as cheaply as the OS allows."""
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    if not names:
        totals = {}
        for process in psutil.process_iter(["pid", "cpu_times"]):
            times = process.info["cpu_times"]
            if times is not None:
                totals[process.pid] = times.user + times.system
        return totals
    totals = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            # os.open and one os.read: Python's buffered file costs twice as much for 300 bytes
            handle = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(handle, 4096)
            finally:
                os.close(handle)
            # after "pid (comm) " (comm may hold spaces): state ... utime (12th) stime (13th)
            fields = stat[stat.rindex(b")") + 2 :].split(None, 13)
            totals[int(name)] = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, ValueError, IndexError):
            continue  # gone between the listing and the read, or not ours to read
    return totals


class ThreadCounters(NamedTuple):
    """One thread's cumulative counters: CPU and run-queue wait in seconds, context switches (a tuple:
    hundreds are made each second)."""

    cpu_s: float
    wait_s: float | None = None
    voluntary: int | None = None
    involuntary: int | None = None
    timeslices: int | None = None  # times it was given a CPU: unchanged, it has not switched since


def thread_counters(
    process: psutil.Process, previous: dict[int, ThreadCounters] | None = None
) -> dict[int, ThreadCounters]:
    """Each thread's counters, from ``/proc`` where there is one (else psutil's CPU times alone).

    A thread that has not been given a CPU since ``previous`` (a pool's idle thread) has not switched
    either: its switches are taken from there, without reading its ``status``."""
    task = f"/proc/{process.pid}/task"
    try:
        tids = os.listdir(task)
    except OSError:
        return {t.id: ThreadCounters(t.user_time + t.system_time) for t in process.threads()}
    previous = previous or {}
    counters = {}
    for tid in tids:
        try:
            # schedstat: nanoseconds on a CPU, nanoseconds runnable and waiting, timeslices
            on_cpu, waiting, slices = _read(f"{task}/{tid}/schedstat").split()[:3]
            before = previous.get(int(tid))
            if before is not None and before.timeslices == int(slices) and before.voluntary is not None:
                voluntary, involuntary = before.voluntary, before.involuntary
            else:
                status = _read(f"{task}/{tid}/status")
                voluntary = int(status[status.index(b"\nvoluntary_ctxt_switches:") + 25 :].split(None, 1)[0])
                involuntary = int(
                    status[status.index(b"nonvoluntary_ctxt_switches:") + 27 :].split(None, 1)[0]
                )
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the reads
        counters[int(tid)] = ThreadCounters(
            int(on_cpu) / 1e9, int(waiting) / 1e9, voluntary, involuntary, int(slices)
        )
    return counters


def minor_faults(pid: int) -> int | None:
    """The process's minor page faults so far (all its threads), from ``/proc/PID/stat``; None elsewhere."""
    try:
        stat = _read(f"/proc/{pid}/stat")
        return int(stat[stat.rindex(b")") + 2 :].split(None, 8)[7])  # state ppid ... flags minflt
    except (OSError, ValueError, IndexError):
        return None


def procs_running() -> int | None:
    """The host's run queue now: threads running or runnable (``/proc/stat``), None where not Linux."""
    try:
        stat = _read("/proc/stat")
        return int(stat[stat.index(b"procs_running") + 13 :].split(None, 1)[0])
    except (OSError, ValueError):
        return None


def _read(path: str) -> bytes:
    # os.open and one os.read: Python's buffered file costs twice as much for a few hundred bytes
    handle = os.open(path, os.O_RDONLY)
    try:
        return os.read(handle, 4096)
    finally:
        os.close(handle)


@dataclass
class HostSample:
    system: dict
    processes: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


@dataclass
class _Tracked:
    """A process being sampled; each reading keeps its own clock, so rates use the true interval."""

    process: psutil.Process
    name: str
    cmdline: str
    cpu_seconds: float
    read_at: float
    cores_allowed: float | None = None
    minor_faults: int | None = None
    threads: dict[int, ThreadCounters] = field(default_factory=dict)
    threads_at: float | None = None


class HostCollector:
    def __init__(
        self, watch_pids: tuple[int, ...] = (), top: int = 10, rescan_every: int = 10, thread_top: int = 3
    ) -> None:
        self._watch = set(watch_pids)
        self._top, self._rescan_every, self._thread_top = top, rescan_every, thread_top
        self._tracked: dict[int, _Tracked] = {}
        self._scan_cpu: dict[int, float] = {}
        self._samples = 0
        self._last_time: float | None = None
        self._last_io = self._io_counters()
        self._last_switches = psutil.cpu_stats().ctx_switches
        self._watched_identity: dict[int, tuple[str, str]] = {}
        self._lost: dict[int, tuple[str, str]] = {}  # watched servers that exited, awaiting a restart
        self._last_cpu = cpu_seconds_by_pid()  # every process's CPU at the last sample
        self._last_cpu_at = time.monotonic()
        psutil.cpu_times_percent(interval=None)  # primes the counter: the first real reading is a delta
        for pid in self._watch:
            self._track(pid)

    def sample(self, ts: float, monotonic: float) -> HostSample:
        elapsed = None if self._last_time is None else monotonic - self._last_time
        self._last_time = monotonic
        events: list[dict] = []
        totals, read_at = cpu_seconds_by_pid(), time.monotonic()
        if self._samples % self._rescan_every == 0:
            events += self._rescan(totals)
        events += self._newcomers(totals, read_at)
        self._last_cpu, self._last_cpu_at = totals, read_at
        self._samples += 1
        system = self._system_row(ts, elapsed)
        rows = []
        by_cpu = []
        for pid, tracked in list(self._tracked.items()):
            row = self._process_row(ts, pid, tracked)
            if row is None:
                events += self._gone(ts, pid, tracked)
                if self._lost:  # its successor may already be running
                    events += self._find_restarts(sorted(self._last_cpu.keys() - self._tracked.keys()))
                continue
            rows.append(row)
            by_cpu.append((row["cpu_pct"] or 0.0, pid))
        threaded = set(self._watch) | {pid for _, pid in sorted(by_cpu, reverse=True)[: self._thread_top]}
        for row in rows:
            if row["pid"] in threaded:
                row.update(self._thread_rates(self._tracked[row["pid"]]))
                busiest = row["max_thread_cpu_pct"]
                # The process and its threads are read a moment apart, and the kernel counts CPU in
                # clock ticks: a thread can read a tick above its process, never truly be above it.
                if busiest is not None and row["cpu_pct"] is not None:
                    row["max_thread_cpu_pct"] = min(busiest, row["cpu_pct"])
        return HostSample(system, rows, events)

    def _system_row(self, ts: float, elapsed: float | None) -> dict:
        memory, swap = psutil.virtual_memory(), psutil.swap_memory()
        io = self._io_counters()
        rates: dict[str, float | None] = {key: None for key in io}
        if elapsed:
            rates = {}
            for key, now in io.items():
                before = self._last_io[key]
                if now is not None and before is not None:
                    rates[key] = max(0.0, (now - before) / elapsed)
        self._last_io = io
        switches = psutil.cpu_stats().ctx_switches
        switch_rate = max(0.0, (switches - self._last_switches) / elapsed) if elapsed else None
        self._last_switches = switches
        # One reading of the CPU times for both figures; busy is what psutil.cpu_percent counts:
        # all but idle and I/O wait.
        shares = psutil.cpu_times_percent(interval=None)
        return {
            "ts": ts,
            "cpu_pct": max(0.0, 100.0 - shares.idle - getattr(shares, "iowait", 0.0)),
            "cpu_system_pct": shares.system,
            "cpu_count": psutil.cpu_count(),
            "load1": os.getloadavg()[0],
            "procs_running": procs_running(),
            "ctx_switches_per_s": switch_rate,
            "mem_used_bytes": memory.total - memory.available,
            "mem_total_bytes": memory.total,
            "swap_used_bytes": swap.used,
            "swap_in_per_s": rates.get("swap_in"),
            "swap_out_per_s": rates.get("swap_out"),
            "disk_read_bytes_per_s": rates.get("disk_read"),
            "disk_write_bytes_per_s": rates.get("disk_write"),
            "net_rx_bytes_per_s": rates.get("net_rx"),
            "net_tx_bytes_per_s": rates.get("net_tx"),
        }

    @staticmethod
    def _io_counters() -> dict[str, float | None]:
        swap = psutil.swap_memory()
        disk = psutil.disk_io_counters()
        net = psutil.net_io_counters()
        return {
            "swap_in": float(swap.sin),
            "swap_out": float(swap.sout),
            "disk_read": None if disk is None else float(disk.read_bytes),
            "disk_write": None if disk is None else float(disk.write_bytes),
            "net_rx": None if net is None else float(net.bytes_recv),
            "net_tx": None if net is None else float(net.bytes_sent),
        }

    def _rescan(self, totals: dict[int, float]) -> list[dict]:
        """Track the top processes by CPU since the last rescan, and restarted watched ones."""
        events: list[dict] = []
        # A process born since the last rescan used all its CPU since then, not none of it.
        busiest = sorted(totals, key=lambda pid: totals[pid] - self._scan_cpu.get(pid, 0.0), reverse=True)
        self._scan_cpu = totals
        keep = set(self._watch) | set(busiest[: self._top])
        for pid in list(self._tracked):
            if pid not in keep:
                del self._tracked[pid]
        for pid in keep:
            if pid not in self._tracked:
                self._track(pid)
        for pid, ident in self._watched_identity.items():
            if pid not in totals:
                self._lost.setdefault(pid, ident)
        if self._lost:
            events += self._find_restarts(list(totals))
        return events

    def _newcomers(self, totals: dict[int, float], read_at: float) -> list[dict]:
        """Processes born since the last sample (a restarted server?), and any untracked process that
        used a tenth of a core or more since then, recorded from now with its CPU from the last sample."""
        born = totals.keys() - self._last_cpu.keys()
        events = self._find_restarts(sorted(born)) if self._lost else []
        elapsed = read_at - self._last_cpu_at
        if elapsed <= 0:
            return events
        busy = [
            pid
            for pid, used in totals.items()
            if pid not in self._tracked
            and (used - self._last_cpu.get(pid, 0.0)) / elapsed * 100 >= _BUSY_CPU_PCT
        ]
        room = max(0, self._top + len(self._watch) + _MAX_NEWLY_BUSY - len(self._tracked))
        for pid in sorted(busy, key=lambda p: self._last_cpu.get(p, 0.0) - totals[p])[:room]:
            self._track(pid, since=(self._last_cpu.get(pid, 0.0), self._last_cpu_at))
        return events

    def _find_restarts(self, candidates: list[int]) -> list[dict]:
        """A watched server that exited and came back under a new pid is a restart, stamped at its birth."""
        events = []
        for pid in candidates:
            if pid in self._watch or not self._lost:
                continue
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    ident = (process.name(), redact_cmdline(" ".join(process.cmdline())))
                    born = process.create_time()
            except _GONE:
                continue
            old_pid = next((old for old, old_ident in self._lost.items() if old_ident == ident), None)
            if old_pid is None:
                continue
            events.append(
                {
                    "ts": born,
                    "kind": "restart",
                    "pid": pid,
                    "previous_pid": old_pid,
                    "message": f"{ident[0]} restarted: pid {old_pid} -> {pid}",
                }
            )
            del self._lost[old_pid]
            self._watch.discard(old_pid)
            self._watched_identity.pop(old_pid, None)
            self._watch.add(pid)
            self._track(pid)
        return events

    def _track(self, pid: int, since: tuple[float, float] | None = None) -> None:
        """Read a process from now on; ``since``: (its CPU seconds, the monotonic time they were read)
        from the last sample, so its first rate covers the sample in which it became busy."""
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                times = process.cpu_times()
                read_at = time.monotonic()
                used = times.user + times.system
                if since is not None:
                    used, read_at = since
                cmdline = redact_cmdline(" ".join(process.cmdline()))
                tracked = _Tracked(process, process.name(), cmdline, used, read_at, cores_allowed(pid))
                tracked.minor_faults = minor_faults(pid)
        except _GONE:
            return
        self._tracked[pid] = tracked
        if pid in self._watch:
            self._watched_identity[pid] = (tracked.name, tracked.cmdline)

    def _process_row(self, ts: float, pid: int, tracked: _Tracked) -> dict | None:
        try:
            with tracked.process.oneshot():
                times = tracked.process.cpu_times()
                now = time.monotonic()
                rss = tracked.process.memory_info().rss
                threads = tracked.process.num_threads()
        except _GONE:
            return None
        total = times.user + times.system
        elapsed = now - tracked.read_at
        cpu = max(0.0, (total - tracked.cpu_seconds) / elapsed * 100) if elapsed > 0 else None
        faults = minor_faults(pid)
        fault_rate = None
        if faults is not None and tracked.minor_faults is not None and elapsed > 0:
            fault_rate = max(0.0, (faults - tracked.minor_faults) / elapsed)
        tracked.cpu_seconds, tracked.read_at, tracked.minor_faults = total, now, faults
        return {
            "ts": ts,
            "pid": pid,
            "name": tracked.name,
            "cmdline": tracked.cmdline,
            "cpu_pct": cpu,
            "rss_bytes": rss,
            "num_threads": threads,
            "cores_allowed": tracked.cores_allowed,
            "minor_faults_per_s": fault_rate,
            **dict.fromkeys(_THREAD_COLUMNS),
        }

    def _thread_rates(self, tracked: _Tracked) -> dict[str, float | None]:
        """Since the last reading of the process's threads: its busiest thread's CPU (100 = a core),
        the time its threads waited for a core (100 = one thread waiting throughout), and its
        threads' context switches a second. A thread born in between counts from zero: a pool that
        starts threads per request is part of the story."""
        rates: dict[str, float | None] = dict.fromkeys(_THREAD_COLUMNS)
        try:
            now = thread_counters(tracked.process, tracked.threads)
        except _GONE:
            return rates
        read_at = time.monotonic()
        previous, previous_at = tracked.threads, tracked.threads_at
        tracked.threads, tracked.threads_at = now, read_at
        if not previous or previous_at is None or read_at <= previous_at:
            return rates
        elapsed = read_at - previous_at
        known = [tid for tid in now if tid in previous]
        deltas = [now[tid].cpu_s - previous[tid].cpu_s for tid in known]
        rates["max_thread_cpu_pct"] = max(0.0, max(deltas, default=0.0) / elapsed * 100)
        for column, counter, scale in (
            ("run_queue_wait_pct", "wait_s", 100.0),
            ("ctx_switches_voluntary_per_s", "voluntary", 1.0),
            ("ctx_switches_involuntary_per_s", "involuntary", 1.0),
        ):
            values = [(getattr(c, counter), getattr(previous.get(tid), counter, 0)) for tid, c in now.items()]
            if values and all(value is not None and before is not None for value, before in values):
                rates[column] = max(0.0, sum(value - before for value, before in values)) / elapsed * scale
        return rates

    def _gone(self, ts: float, pid: int, tracked: _Tracked) -> list[dict]:
        del self._tracked[pid]
        if pid not in self._watch:
            return []
        if pid in self._watched_identity:
            self._lost[pid] = self._watched_identity[pid]
        return [
            {"ts": ts, "kind": "process_exit", "pid": pid, "message": f"{tracked.name} (pid {pid}) exited"}
        ]
