"""The ``processes_now`` probe: the server's threads and faults, the run queue and swap, from /proc.

What the dump saw of the server's CPU, threads and memory, checked on the
host as it is now: reads of ``/proc`` a second apart over ten seconds
(``Host.sample_s``, ``Host.samples``) give each thread's share of a core (in
its busiest second, as the recorder's samples would), the server's forced
context switches and page faults a second, the run queue against the cores,
swap traffic, and the busiest process that is not the server. The server is
the dump's (its pid, or where that pid is gone, a process with its name and
command line: a restarted server has a new pid); the contender is the dump's
contending command, matched by what it runs (:func:`command_key`). Everything
is read under ``Host.root``, so tests give a /proc of their own; nothing is
signalled or paused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from diagnose.collectors.redact import redact_cmdline
from diagnose.facts.model import FactValue
from diagnose.units import counted

SAMPLE_S = 1.0
SAMPLES = 10  # intervals read: a thread's share of a core swings from second to second under bursty load
PAGE_BYTES = 4096  # /proc/vmstat counts swap traffic in pages


@dataclass(frozen=True)
class ServerIdentity:
    """The dump's server: its pids, and the name and command line it last had there."""

    pids: frozenset[int]
    name: str | None
    cmdline: str | None


@dataclass(frozen=True)
class _Proc:
    pid: int
    name: str
    cmdline: str
    cpu_ticks: int  # utime + stime
    minor_faults: int
    threads: int
    start_ticks: int  # since boot


@dataclass(frozen=True)
class _Snapshot:
    at: float
    processes: dict[int, _Proc]
    thread_ticks: dict[tuple[int, int], int]  # (pid, tid) -> utime + stime, the server's threads
    switches: tuple[int, int]  # the server's threads: voluntary, involuntary
    run_queue: int | None
    boot: int | None  # the boot time, epoch s (btime)
    swapped_pages: tuple[int, int] | None  # pswpin, pswpout


def _read_stat(text: str) -> tuple[str, list[str]] | None:
    """A /proc/PID/stat line: the command name and the fields after it (state first)."""
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < open_at:
        return None
    return text[open_at + 1 : close_at], text[close_at + 2 :].split()


def _text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def _process(proc: Path, pid: int) -> _Proc | None:
    stat = _text(proc / str(pid) / "stat")
    parsed = _read_stat(stat) if stat else None
    if parsed is None or len(parsed[1]) < 20:
        return None
    name, fields = parsed
    cmdline = (_text(proc / str(pid) / "cmdline") or "").replace("\0", " ").strip()
    try:
        cpu, faults = int(fields[11]) + int(fields[12]), int(fields[7])
        return _Proc(pid, name, cmdline, cpu, faults, int(fields[17]), int(fields[19]))
    except ValueError:
        return None


def _threads(proc: Path, pid: int) -> tuple[dict[tuple[int, int], int], int, int]:
    ticks: dict[tuple[int, int], int] = {}
    voluntary = involuntary = 0
    try:
        tids = [int(p.name) for p in (proc / str(pid) / "task").iterdir() if p.name.isdigit()]
    except OSError:
        return ticks, 0, 0
    for tid in tids:
        task = proc / str(pid) / "task" / str(tid)
        parsed = _read_stat(_text(task / "stat") or "")
        switches = _keyed(_text(task / "status"), ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
        if parsed is None or len(parsed[1]) < 13 or not (parsed[1][11] + parsed[1][12]).isdigit():
            continue  # the thread ended between the listing and the reads
        ticks[(pid, tid)] = int(parsed[1][11]) + int(parsed[1][12])
        voluntary += switches.get("voluntary_ctxt_switches", 0)
        involuntary += switches.get("nonvoluntary_ctxt_switches", 0)
    return ticks, voluntary, involuntary


def _keyed(text: str | None, keys: tuple[str, ...]) -> dict[str, int]:
    found = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[0] in keys and parts[1].isdigit():
            found[parts[0]] = int(parts[1])
    return found


def snapshot(
    root: Path, at: float, server: ServerIdentity | set[int] | None, everyone: bool = True
) -> tuple[_Snapshot, set[int]]:
    """Every process's counters (or, ``everyone`` False, the server's only), and the server's threads':
    the server found by its identity (first read) or given as the pids found before (later reads, so
    all read the same processes)."""
    proc = root / "proc"
    if not everyone and isinstance(server, set):
        pids = sorted(server)
    else:
        try:
            pids = [int(p.name) for p in proc.iterdir() if p.name.isdigit()]
        except OSError:
            pids = []
    processes = {pid: found for pid in pids if (found := _process(proc, pid)) is not None}
    if isinstance(server, ServerIdentity):
        server = find_server(processes, server)
    server_pids = server or set()
    thread_ticks: dict[tuple[int, int], int] = {}
    voluntary = involuntary = 0
    for pid in server_pids & processes.keys():
        ticks, v, i = _threads(proc, pid)
        thread_ticks.update(ticks)
        voluntary, involuntary = voluntary + v, involuntary + i
    host = _keyed(_text(proc / "stat"), ("procs_running", "btime"))
    vmstat = _keyed(_text(proc / "vmstat"), ("pswpin", "pswpout"))
    swapped = (vmstat["pswpin"], vmstat["pswpout"]) if len(vmstat) == 2 else None
    taken = _Snapshot(
        at,
        processes,
        thread_ticks,
        (voluntary, involuntary),
        host.get("procs_running"),
        host.get("btime"),
        swapped,
    )
    return taken, server_pids


def find_server(processes: dict[int, _Proc], server: ServerIdentity) -> set[int]:
    """The dump's server among the processes now: its own pid where that still runs the same program,
    else every process with its name and command line (a restart gives the same program a new pid)."""
    same_pid = {
        pid
        for pid in server.pids
        if pid in processes and (not server.name or processes[pid].name == server.name)
    }
    if same_pid:
        return same_pid
    if not server.name or not server.cmdline:
        return set()
    recorded = server.cmdline.strip()
    # the recorder masked the command line's secrets (--api-key ***): the live one is masked alike
    return {
        pid
        for pid, p in processes.items()
        if p.name == server.name and recorded in (p.cmdline, redact_cmdline(p.cmdline))
    }


@dataclass(frozen=True)
class Reading:
    """What the probe gives: live facts, details worth showing, or why it could not read."""

    facts: dict[str, FactValue]
    details: tuple[str, ...]
    not_run: str | None = None


def read_processes_now(
    root: Path,
    server: ServerIdentity | None,
    span: tuple[float, float] | None,
    contender: str | None,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    sample_s: float = SAMPLE_S,
    samples: int = SAMPLES,
) -> Reading:
    """Reads of /proc ``sample_s`` apart over ``samples`` intervals, and the live facts they give (see
    the module's docstring): rates over the whole window, the busiest thread in its busiest second
    (as the recorder's per-second samples read it), the run queue's median."""
    if not (root / "proc" / "stat").exists():
        return Reading({}, (), not_run=f"no /proc under {root}: this probe reads Linux's process table")
    first, pids = snapshot(root, clock(), server)
    readings = [first]
    for index in range(max(samples, 1)):
        sleep(sample_s)
        # between the first read and the last only the server's threads and the run queue are needed
        last = index == max(samples, 1) - 1
        readings.append(snapshot(root, clock(), pids, everyone=last)[0])
    second = readings[-1]
    elapsed = max(second.at - first.at, 1e-3)
    ticks = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    cores = _cores(root)
    facts: dict[str, FactValue] = {}
    details: list[str] = []
    if server is not None:
        facts["live.server.found"] = bool(pids & second.processes.keys())
        if not facts["live.server.found"]:
            who = ", ".join(filter(None, (server.name, server.cmdline))) or "no name recorded"
            pid_list = ", ".join(str(p) for p in sorted(server.pids))
            details.append(f"the dump's server (pid {pid_list}: {who}) is not running now")
    alive = sorted(pids & second.processes.keys() & first.processes.keys())
    if alive:
        _server_facts(facts, details, first, second, alive, elapsed, ticks, span)
        busiest, main = _busiest_threads(readings, ticks)
        facts["live.server.busiest_thread_pct"] = busiest * 100
        facts["live.server.main_thread_pct"] = main * 100
    queues = sorted(r.run_queue for r in readings if r.run_queue is not None)
    if queues and cores:
        median = queues[len(queues) // 2]
        facts["live.host.run_queue_per_core"] = median / cores
        details.append(
            f"run queue {median} on {counted(cores, 'core')} (median of {counted(len(queues), 'read')})"
        )
    if first.swapped_pages and second.swapped_pages:
        swap_in = (second.swapped_pages[0] - first.swapped_pages[0]) * PAGE_BYTES / elapsed
        swap_out = (second.swapped_pages[1] - first.swapped_pages[1]) * PAGE_BYTES / elapsed
        facts["live.host.swap_traffic_per_s"] = swap_in + swap_out
        details.append(f"swap in {swap_in / 2**20:.1f} MiB/s, out {swap_out / 2**20:.1f} MiB/s")
    memory = _keyed(_text(root / "proc" / "meminfo"), ("SwapTotal", "SwapFree"))
    if "SwapTotal" in memory:
        facts["live.host.swap_total_bytes"] = float(memory["SwapTotal"] * 1024)
    _other_facts(facts, details, first, second, pids | {os.getpid()}, elapsed, ticks, contender)
    return Reading(facts, tuple(details))


def _server_facts(
    facts: dict[str, FactValue],
    details: list[str],
    first: _Snapshot,
    second: _Snapshot,
    alive: list[int],
    elapsed: float,
    ticks: float,
    span: tuple[float, float] | None,
) -> None:
    cpu = sum(second.processes[p].cpu_ticks - first.processes[p].cpu_ticks for p in alive) / ticks / elapsed
    faults = sum(second.processes[p].minor_faults - first.processes[p].minor_faults for p in alive) / elapsed
    voluntary = second.switches[0] - first.switches[0]
    involuntary = second.switches[1] - first.switches[1]
    facts["live.server.process"] = ", ".join(f"pid {p} ({second.processes[p].name})" for p in alive)
    facts["live.server.cpu_pct"] = cpu * 100
    threads = sum(second.processes[p].threads for p in alive)
    facts["live.server.threads"] = threads
    facts["live.server.minor_faults_per_s"] = faults
    if voluntary + involuntary > 0:
        facts["live.server.involuntary_share"] = involuntary / (voluntary + involuntary)
    if second.boot is not None:
        started = second.boot + min(second.processes[p].start_ticks for p in alive) / ticks
        facts["live.server.age_s"] = max(second.at - started, 0.0)
        if span is not None and started <= span[1]:  # a start after the dump ended says nothing of it
            facts["live.server.started_in_dump"] = started > span[0]
    details.append(
        f"server {facts['live.server.process']}: {cpu * 100:.0f} % of a core, "
        f"{counted(threads, 'thread')}, {faults:,.0f} page faults/s"
    )


def _busiest_threads(readings: list[_Snapshot], ticks: float) -> tuple[float, float]:
    """The server's busiest thread in its busiest interval, and its main thread (where an async server
    runs its event loop) in its own busiest interval, in cores."""
    busiest = main = 0.0
    for before, after in zip(readings, readings[1:], strict=False):
        elapsed = max(after.at - before.at, 1e-3)
        for (pid, tid), value in after.thread_ticks.items():
            if (pid, tid) in before.thread_ticks:
                share = (value - before.thread_ticks[(pid, tid)]) / ticks / elapsed
                busiest = max(busiest, share)
                main = max(main, share) if tid == pid else main
    return busiest, main


def _other_facts(
    facts: dict[str, FactValue],
    details: list[str],
    first: _Snapshot,
    second: _Snapshot,
    excluded: set[int],
    elapsed: float,
    ticks: float,
    contender: str | None,
) -> None:
    """The busiest process that is not the server (nor this one), and the contender's own CPU now."""
    usage = {
        pid: (p.cpu_ticks - first.processes[pid].cpu_ticks) / ticks / elapsed * 100
        for pid, p in second.processes.items()
        if pid in first.processes and pid not in excluded
    }
    if usage:
        pid = max(usage, key=lambda p: usage[p])
        facts["live.other.busiest"] = f"pid {pid} ({second.processes[pid].name})"
        facts["live.other.busiest_pct"] = usage[pid]
        details.append(f"busiest other process: pid {pid} ({second.processes[pid].name}), {usage[pid]:.0f} %")
    if contender:
        key = command_key(contender)
        mine = [pid for pid in usage if key and command_key(second.processes[pid].cmdline) == key]
        facts["live.other.contender_pct"] = sum(usage[p] for p in mine)


def command_key(cmdline: str) -> tuple[str, ...]:
    """What a command runs, without its options: the program's name and the words before the first
    option (``-m`` and its module kept). A job run with new arguments each time (``--seconds 14.7``)
    is the same job; another script run by the same interpreter is not."""
    words = cmdline.split()
    if not words:
        return ()
    key, rest = [Path(words[0]).name], iter(words[1:])
    for word in rest:
        if word == "-m":
            key += [word, next(rest, "")]
        elif word.startswith("-"):
            break
        else:
            key.append(word)
    return tuple(key)


def _cores(root: Path) -> int | None:
    text = _text(root / "proc" / "stat") or ""
    count = sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return count or None
