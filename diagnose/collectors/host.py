"""The host through psutil: CPU, memory, swap, disk and network, and the busiest processes.

Cost matters more than completeness here: a sample costs about 2 ms on a host of 300 processes
watching a server of 200 threads (benchmarks/bench_record.py), by reading only what can have changed.
Each sample reads the tracked processes' CPU, memory, threads and page faults from one ``stat`` read
each (proc.py: files kept open), and accounts the host's busy CPU (``/proc/stat``) to them; only when
more than ``_UNEXPLAINED_CPU_PCT`` of a core is left unaccounted for (some other process is busy), at
each rescan (every ``rescan_every`` samples), and while a watched server is gone, is every process's
CPU read (``/proc/PID/stat``, about 1.6 ms for 370 processes). So a process that becomes busy is still
recorded from the sample it does so, whether it was born a moment ago (a 15-second cron job, a
restarted server) or has idled for hours (a worker woken by a queue); its first rate is its CPU since
it was last read, over that true interval, never a share of its life counted from a birth time
rounded to the second. The top processes by CPU are chosen again at each rescan from the same
readings.

The busiest-thread figure (one thread at a full core is the tell-tale of a single-threaded tokenizer
or decoder) needs every thread's times, so it is read for the watched server pids and the
``thread_top`` busiest processes only (of these, not for one whose own CPU did not move a clock tick
since the last sample: none of its threads ran, and its busiest reads 0), from each thread's
``schedstat`` (kept open: 1.6 us a thread, about 4 us at a sample's pace, its caches cold), with the
time they spent runnable but waiting for a core; and, every ``switches_every_s``, the threads'
context switches (``/proc/PID/status`` counts the main thread's alone; each thread's costs 13 us, read
only for the threads given a CPU since), which tell over-parallelism from honest work. Where there is
no ``/proc``, psutil reads the CPU times, more slowly, and the rest is not recorded.

The host's run queue, context switches and system CPU come from ``/proc/stat`` (psutil's
``cpu_times`` and ``cpu_stats``); each tracked process's minor page faults (memory handed back and
taken again shows as a steady stream of them) from its ``stat``, and the cores it may use
(cpu_limits.py) once, when it is first tracked.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

from diagnose.collectors.cpu_limits import cores_allowed
from diagnose.collectors.proc import (
    HeldFile,
    HostCounters,
    HostReading,
    ProcessCounters,
    ThreadReader,
    ThreadTimes,
    cpu_seconds_by_pid,
    host_busy_seconds,
    open_stat,
    process_counters,
)
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
# The host's busy CPU that no tracked process accounts for, from which every process is read again:
# below _BUSY_CPU_PCT, so that readings a moment apart, counted in clock ticks, never hide a newcomer.
_UNEXPLAINED_CPU_PCT = 5.0
_MAX_NEWLY_BUSY = 64  # a host forking hundreds of busy processes a second costs no more than this
_SWITCHES_EVERY_S = 30.0  # the threads' context switches: rates over this long, read this often


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
    stat: HeldFile | None = None
    threads: ThreadReader | None = None
    thread_times: dict[int, ThreadTimes] = field(default_factory=dict)
    threads_at: float | None = None
    switches: dict[int, tuple[int, int, int | None]] = field(default_factory=dict)  # vol, invol, slices
    switches_at: float | None = None

    def close(self) -> None:
        if self.stat is not None:
            self.stat.close()
        if self.threads is not None:
            self.threads.close()


class HostCollector:
    def __init__(
        self,
        watch_pids: tuple[int, ...] = (),
        top: int = 10,
        rescan_every: int = 30,
        thread_top: int = 3,
        switches_every_s: float = _SWITCHES_EVERY_S,
    ) -> None:
        self._watch = set(watch_pids)
        self._top, self._rescan_every, self._thread_top = top, rescan_every, thread_top
        self._switches_every_s = switches_every_s
        self._tracked: dict[int, _Tracked] = {}
        self._scan_cpu: dict[int, float] = {}
        self._samples = 0
        self._last_time: float | None = None
        self._watched_identity: dict[int, tuple[str, str]] = {}
        self._lost: dict[int, tuple[str, str]] = {}  # watched servers that exited, awaiting a restart
        self._last_cpu = cpu_seconds_by_pid()  # every process's CPU at the last full reading
        self._last_cpu_at = time.monotonic()
        # The host's counters at the last sample: the system row's rates, the busy CPU to account for.
        self._counters = HostCounters()
        self._last, self._last_at = self._counters.read(), time.monotonic()
        for pid in self._watch:
            self._track(pid)

    def sample(self, ts: float, monotonic: float) -> HostSample:
        elapsed = None if self._last_time is None else monotonic - self._last_time
        self._last_time = monotonic
        events: list[dict] = []
        host, host_at = self._counters.read(), time.monotonic()
        counters, explained = self._read_tracked(ts, events)
        busy = host_busy_seconds(host.cpu) - host_busy_seconds(self._last.cpu)
        unexplained_pct = (busy - explained) / max(host_at - self._last_at, 1e-9) * 100
        if self._samples % self._rescan_every == 0 or self._lost or unexplained_pct >= _UNEXPLAINED_CPU_PCT:
            totals, read_at = cpu_seconds_by_pid(), time.monotonic()
            if self._samples % self._rescan_every == 0:
                events += self._rescan(totals)
            events += self._newcomers(totals, read_at)
            self._last_cpu, self._last_cpu_at = totals, read_at
        self._samples += 1
        system = self._system_row(ts, elapsed, host)
        self._last, self._last_at = host, host_at
        rows = []
        by_cpu = []
        for pid, tracked in list(self._tracked.items()):
            if pid not in counters:  # tracked from this sample on
                try:
                    counters[pid] = process_counters(tracked.process, tracked.stat)
                except _GONE:
                    events += self._gone(ts, pid, tracked)
                    continue
            row = self._process_row(ts, pid, tracked, counters[pid])
            rows.append(row)
            by_cpu.append((row["cpu_pct"] or 0.0, pid))
        threaded = set(self._watch) | {pid for _, pid in sorted(by_cpu, reverse=True)[: self._thread_top]}
        for row in rows:
            if row["pid"] not in threaded:
                continue
            tracked = self._tracked[row["pid"]]
            if row["pid"] not in self._watch and row["cpu_pct"] == 0:
                # Its own counter, the sum of its threads', did not move: no thread of it ran a clock tick,
                # and reading them (a pread each) would say only that. Read afresh once it runs again.
                row["max_thread_cpu_pct"] = 0.0
                tracked.thread_times, tracked.threads_at = {}, None
                continue
            row.update(self._thread_rates(tracked, row["num_threads"]))
            busiest = row["max_thread_cpu_pct"]
            # The process and its threads are read a moment apart, and the kernel counts CPU in
            # clock ticks: a thread can read a tick above its process, never truly be above it.
            if busiest is not None and row["cpu_pct"] is not None:
                row["max_thread_cpu_pct"] = min(busiest, row["cpu_pct"])
        return HostSample(system, rows, events)

    def close(self) -> None:
        """Let go of the files held open."""
        for tracked in self._tracked.values():
            tracked.close()
        self._counters.close()

    def _read_tracked(self, ts: float, events: list[dict]) -> tuple[dict[int, ProcessCounters], float]:
        """The tracked processes' counters, and the CPU seconds they used since they were last read:
        what accounts for the host's busy CPU. Every process is read only when something else was busy
        (``_UNEXPLAINED_CPU_PCT`` of a core and more), at each rescan, and while a watched server is gone
        (its successor is looked for): a process that becomes busy is still found in the sample it does."""
        counters: dict[int, ProcessCounters] = {}
        explained = 0.0
        for pid, tracked in list(self._tracked.items()):
            try:
                counters[pid] = reading = process_counters(tracked.process, tracked.stat)
            except _GONE:
                events += self._gone(ts, pid, tracked)
                if self._lost:  # its successor may already be running
                    events += self._find_restarts(sorted(self._last_cpu.keys() - self._tracked.keys()))
                continue
            explained += max(0.0, reading.cpu_s - tracked.cpu_seconds)
        return counters, explained

    def _system_row(self, ts: float, elapsed: float | None, host: HostReading) -> dict:
        rates: dict[str, float | None] = dict.fromkeys(host.io)
        if elapsed:
            for key, now in host.io.items():
                before = self._last.io[key]
                if now is not None and before is not None:
                    rates[key] = max(0.0, (now - before) / elapsed)
        switch_rate = max(0.0, (host.ctx_switches - self._last.ctx_switches) / elapsed) if elapsed else None
        # The CPU times against the last sample's: busy is what psutil.cpu_percent counts (all but idle
        # and I/O wait), each share what psutil.cpu_times_percent gives (guest time is in user already).
        spent = {name: max(0.0, now - self._last.cpu.get(name, 0.0)) for name, now in host.cpu.items()}
        total = sum(value for name, value in spent.items() if name not in ("guest", "guest_nice"))
        share = {name: value / total * 100 if total > 0 else 0.0 for name, value in spent.items()}
        return {
            "ts": ts,
            "cpu_pct": max(0.0, 100.0 - share.get("idle", 0.0) - share.get("iowait", 0.0))
            if total > 0
            else None,
            "cpu_system_pct": share.get("system") if total > 0 else None,
            "cpu_count": psutil.cpu_count(),
            "load1": os.getloadavg()[0],
            "procs_running": host.procs_running,
            "ctx_switches_per_s": switch_rate,
            "mem_used_bytes": host.mem_used,
            "mem_total_bytes": host.mem_total,
            "swap_used_bytes": host.swap_used,
            "swap_in_per_s": rates.get("swap_in"),
            "swap_out_per_s": rates.get("swap_out"),
            "disk_read_bytes_per_s": rates.get("disk_read"),
            "disk_write_bytes_per_s": rates.get("disk_write"),
            "net_rx_bytes_per_s": rates.get("net_rx"),
            "net_tx_bytes_per_s": rates.get("net_tx"),
        }

    def _rescan(self, totals: dict[int, float]) -> list[dict]:
        """Track the top processes by CPU since the last rescan, and restarted watched ones."""
        events: list[dict] = []
        # A process born since the last rescan used all its CPU since then, not none of it.
        # The busiest since the last rescan; one that used no CPU in all that time is not worth a row.
        used = {pid: cpu - self._scan_cpu.get(pid, 0.0) for pid, cpu in totals.items()}
        busiest = sorted((pid for pid in used if used[pid] > 0), key=used.__getitem__, reverse=True)
        self._scan_cpu = totals
        keep = set(self._watch) | set(busiest[: self._top])
        for pid in list(self._tracked):
            if pid not in keep:
                self._tracked.pop(pid).close()
        for pid in keep:
            if pid not in self._tracked:
                # its rate from the last full reading, over that true interval (not the moment since now)
                self._track(pid, since=(self._last_cpu.get(pid, 0.0), self._last_cpu_at))
        for pid, ident in self._watched_identity.items():
            if pid not in totals:
                self._lost.setdefault(pid, ident)
        if self._lost:
            events += self._find_restarts(list(totals))
        return events

    def _newcomers(self, totals: dict[int, float], read_at: float) -> list[dict]:
        """Processes born since the last full reading (a restarted server?), and any untracked process
        that used a tenth of a core or more since then, recorded from now with its CPU from that reading:
        its first rate is over that true interval (one diluted over a long one is read again, exactly,
        at the next sample, since its CPU is still unaccounted for)."""
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
        from the last full reading, so its first rate covers the sample in which it became busy."""
        stat = open_stat(pid)
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                first = process_counters(process, stat)
                used, read_at = since if since is not None else (first.cpu_s, time.monotonic())
                cmdline = redact_cmdline(" ".join(process.cmdline()))
                tracked = _Tracked(process, process.name(), cmdline, used, read_at, cores_allowed(pid))
                tracked.minor_faults, tracked.stat = first.minor_faults, stat
        except _GONE:
            if stat is not None:
                stat.close()
            return
        self._tracked[pid] = tracked
        if pid in self._watch:
            self._watched_identity[pid] = (tracked.name, tracked.cmdline)

    def _process_row(self, ts: float, pid: int, tracked: _Tracked, counters: ProcessCounters) -> dict:
        now = time.monotonic()
        elapsed = now - tracked.read_at
        cpu = max(0.0, (counters.cpu_s - tracked.cpu_seconds) / elapsed * 100) if elapsed > 0 else None
        faults, fault_rate = counters.minor_faults, None
        if faults is not None and tracked.minor_faults is not None and elapsed > 0:
            fault_rate = max(0.0, (faults - tracked.minor_faults) / elapsed)
        tracked.cpu_seconds, tracked.read_at, tracked.minor_faults = counters.cpu_s, now, faults
        return {
            "ts": ts,
            "pid": pid,
            "name": tracked.name,
            "cmdline": tracked.cmdline,
            "cpu_pct": cpu,
            "rss_bytes": counters.rss_bytes,
            "num_threads": counters.threads,
            "cores_allowed": tracked.cores_allowed,
            "minor_faults_per_s": fault_rate,
            **dict.fromkeys(_THREAD_COLUMNS),
        }

    def _thread_rates(self, tracked: _Tracked, thread_count: int | None) -> dict[str, float | None]:
        """Since the last reading of the process's threads: its busiest thread's CPU (100 = a core) and
        the time its threads waited for a core (100 = one thread waiting throughout); and their context
        switches a second (see _switch_rates). A thread born in between counts from zero: a pool that
        starts threads per request is part of the story."""
        rates: dict[str, float | None] = dict.fromkeys(_THREAD_COLUMNS)
        if tracked.threads is None:
            tracked.threads = ThreadReader(tracked.process.pid)
        try:
            now = tracked.threads.times(tracked.process, thread_count)
        except _GONE:
            return rates
        read_at = time.monotonic()
        previous, previous_at = tracked.thread_times, tracked.threads_at
        tracked.thread_times, tracked.threads_at = now, read_at
        if previous and previous_at is not None and read_at > previous_at:
            elapsed = read_at - previous_at
            busiest = waited = 0
            waits_known = True
            for tid, times in now.items():  # one pass: a server's hundreds of threads, each second
                before = previous.get(tid)
                waited_before: int | None = 0  # a thread born since counts from zero
                if before is not None:
                    busiest = max(busiest, times.cpu_ns - before.cpu_ns)
                    waited_before = before.wait_ns
                if times.wait_ns is None or waited_before is None:
                    waits_known = False
                else:
                    waited += times.wait_ns - waited_before
            rates["max_thread_cpu_pct"] = max(0.0, busiest / 1e9 / elapsed * 100)
            if waits_known and now:
                rates["run_queue_wait_pct"] = max(0, waited) / 1e9 / elapsed * 100
        rates.update(self._switch_rates(tracked, now, read_at))
        return rates

    def _switch_rates(
        self, tracked: _Tracked, now: dict[int, ThreadTimes], read_at: float
    ) -> dict[str, float]:
        """The threads' context switches a second, counted every ``switches_every_s`` and averaged over
        that: a thread's ``status`` costs 13 us, and a server's hundreds of threads read each second
        would cost more than all the rest of a sample. Only the threads given a CPU since their last
        count are read again (an idle pool thread has not switched)."""
        if tracked.threads is None or (
            tracked.switches_at is not None and read_at - tracked.switches_at < self._switches_every_s
        ):
            return {}
        base, base_at = tracked.switches, tracked.switches_at
        ran = [
            tid
            for tid, t in now.items()
            if tid not in base or t.timeslices is None or base[tid][2] != t.timeslices
        ]
        fresh = tracked.threads.switches(ran)
        counts = {}
        for tid, times in now.items():
            if tid in fresh:
                counts[tid] = (*fresh[tid], times.timeslices)
            elif tid in base and tid not in ran:
                counts[tid] = base[tid]
        tracked.switches, tracked.switches_at = counts, read_at
        if base_at is None or read_at <= base_at or not counts:
            return {}
        elapsed = read_at - base_at
        voluntary = sum(c[0] - base.get(tid, (0, 0, None))[0] for tid, c in counts.items())
        involuntary = sum(c[1] - base.get(tid, (0, 0, None))[1] for tid, c in counts.items())
        return {
            "ctx_switches_voluntary_per_s": max(0, voluntary) / elapsed,
            "ctx_switches_involuntary_per_s": max(0, involuntary) / elapsed,
        }

    def _gone(self, ts: float, pid: int, tracked: _Tracked) -> list[dict]:
        self._tracked.pop(pid).close()
        if pid not in self._watch:
            return []
        if pid in self._watched_identity:
            self._lost[pid] = self._watched_identity[pid]
        return [
            {"ts": ts, "kind": "process_exit", "pid": pid, "message": f"{tracked.name} (pid {pid}) exited"}
        ]
