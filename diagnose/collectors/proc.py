"""Reading ``/proc`` at a busy host's pace: the few small reads the host collector makes every second.

Opening a ``/proc`` file costs more than reading it: a thread's ``schedstat`` read through a file
kept open (one ``pread``) costs 1.6 us, opened, read and closed anew 8 us; a process's ``stat``
4.7 us against 12.6 us. So the files read every sample (the tracked processes' ``stat``, the watched
servers' threads' ``schedstat``) are held open, and a file of a process that exited fails to read
(ESRCH) whatever process has its pid since: a reused pid is never read as the old process. Where
there is no ``/proc``, psutil reads the same counters, more slowly, and the rest is not recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

import psutil

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_RELIST_EVERY = 10  # a pool that replaces threads at the same count is seen within this many readings
_READ_BYTES = 4096  # a first read's room: every file read each sample fits it on most hosts


def read_file(path: str) -> bytes:
    """A small file in one read (os.open and os.read cost half of Python's buffered file for 300 bytes),
    read on to its end where it is larger."""
    handle = os.open(path, os.O_RDONLY)
    try:
        data = os.read(handle, _READ_BYTES)
        if len(data) < _READ_BYTES:
            return data
        chunks = [data]
        while chunk := os.read(handle, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(handle)


class HeldFile:
    """A ``/proc`` file kept open and read again from its start with one ``pread``, into room for all of
    it: the host's files grow with the machine (``/proc/stat`` holds a line a core and an interrupt
    count each, 20 KB and more on a GPU host of 128 cores, with the context switches and the run queue
    after them; ``net/dev`` a line an interface, hundreds on a Kubernetes node)."""

    __slots__ = ("_fd", "_room")

    def __init__(self, path: str) -> None:
        self._fd: int | None = os.open(path, os.O_RDONLY)
        self._room = _READ_BYTES

    def read(self) -> bytes:
        if self._fd is None:
            raise ProcessLookupError("closed")
        data = os.pread(self._fd, self._room, 0)
        while len(data) >= self._room:  # perhaps cut: read it whole again, into twice the room
            self._room *= 2
            data = os.pread(self._fd, self._room, 0)
        if not data:
            raise ProcessLookupError("nothing to read")
        return data

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def open_stat(pid: int) -> HeldFile | None:
    """The process's ``stat`` held open; None where there is no ``/proc`` (psutil reads it then)."""
    try:
        return HeldFile(f"/proc/{pid}/stat")
    except OSError:
        return None


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
            stat = read_file(f"/proc/{name}/stat")
            # after "pid (comm) " (comm may hold spaces): state ... utime (12th) stime (13th)
            fields = stat[stat.rindex(b")") + 2 :].split(None, 13)
            totals[int(name)] = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, ValueError, IndexError):
            continue  # gone between the listing and the read, or not ours to read
    return totals


def host_busy_seconds(cpu: dict[str, float]) -> float:
    """CPU seconds the host's processes ran (user, nice, system): what the processes' own counters add
    up to, without interrupts, I/O wait or steal."""
    return cpu.get("user", 0.0) + cpu.get("nice", 0.0) + cpu.get("system", 0.0)


class ProcessCounters(NamedTuple):
    """A process's cumulative counters at one reading."""

    cpu_s: float
    rss_bytes: int
    threads: int
    minor_faults: int | None


def process_counters(process: psutil.Process, stat: HeldFile | None) -> ProcessCounters:
    """CPU, resident memory, threads and minor faults from one read of ``stat`` (psutil where there is no
    ``/proc``); psutil.NoSuchProcess once the process exited."""
    if stat is None:
        with process.oneshot():
            times = process.cpu_times()
            return ProcessCounters(
                times.user + times.system, process.memory_info().rss, process.num_threads(), None
            )
    try:
        raw = stat.read()
        # after "pid (comm) ": state(0) ... minflt(7) ... utime(11) stime(12) ... num_threads(17) ... rss(21)
        fields = raw[raw.rindex(b")") + 2 :].split(None, 22)
        if fields[0] == b"Z":
            raise ProcessLookupError("a zombie")
        return ProcessCounters(
            (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS,
            int(fields[21]) * _PAGE_SIZE,
            int(fields[17]),
            int(fields[7]),
        )
    except (OSError, ValueError, IndexError) as error:
        raise psutil.NoSuchProcess(process.pid) from error


def procs_running() -> int | None:
    """The host's run queue now: threads running or runnable (``/proc/stat``), None where not Linux."""
    try:
        stat = read_file("/proc/stat")
        return int(stat[stat.index(b"procs_running") + 13 :].split(None, 1)[0])
    except (OSError, ValueError):
        return None


class ThreadTimes(NamedTuple):
    """One thread's cumulative CPU and run-queue wait in nanoseconds, and the times it was given a CPU
    (unchanged: it has not switched since). Integers as the kernel counts them: a server's hundreds of
    threads are read every second, and each conversion costs."""

    cpu_ns: int
    wait_ns: int | None = None
    timeslices: int | None = None


class ThreadReader:
    """One process's threads: their ``schedstat`` held open and read every sample; their ``status`` (the
    context switches, 13 us a thread, kept open or not) read only when asked, for the threads that ran.

    The thread list is read again when the process's thread count changes, and every few readings
    (a pool may replace threads at the same count)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._task = f"/proc/{pid}/task"
        self._files: dict[int, int] = {}  # tid -> its schedstat's descriptor, held open
        self._listed_count: int | None = None
        self._readings = 0

    def times(self, process: psutil.Process, thread_count: int | None = None) -> dict[int, ThreadTimes]:
        """Each thread's times; psutil.NoSuchProcess once the process exited."""
        if not self._files and not os.path.isdir(self._task):
            try:
                return {
                    t.id: ThreadTimes(round((t.user_time + t.system_time) * 1e9)) for t in process.threads()
                }
            except (psutil.Error, OSError) as error:
                raise psutil.NoSuchProcess(self.pid) from error
        if thread_count != self._listed_count or self._readings % _RELIST_EVERY == 0:
            self._relist(thread_count)
        self._readings += 1
        times = {}
        ended = []
        pread = os.pread  # the loop runs for every thread of a server each second: nothing more in it
        for tid, fd in self._files.items():
            try:
                # schedstat: nanoseconds on a CPU, nanoseconds runnable and waiting, timeslices
                on_cpu, waiting, slices = pread(fd, 128, 0).split()
                times[tid] = ThreadTimes(int(on_cpu), int(waiting), int(slices))
            except (OSError, ValueError):
                ended.append(tid)
        for tid in ended:
            os.close(self._files.pop(tid))
        if not times and not os.path.isdir(self._task):
            raise psutil.NoSuchProcess(self.pid)
        return times

    def switches(self, tids: Iterable[int]) -> dict[int, tuple[int, int]]:
        """(voluntary, involuntary) context switches so far of each of ``tids`` still running."""
        counts = {}
        for tid in tids:
            try:
                status = read_file(f"{self._task}/{tid}/status")
                voluntary = int(status[status.index(b"\nvoluntary_ctxt_switches:") + 25 :].split(None, 1)[0])
                involuntary = int(
                    status[status.index(b"nonvoluntary_ctxt_switches:") + 27 :].split(None, 1)[0]
                )
            except (OSError, ValueError, IndexError):
                continue  # the thread ended between the reads
            counts[tid] = (voluntary, involuntary)
        return counts

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def _relist(self, thread_count: int | None) -> None:
        try:
            tids = {int(name) for name in os.listdir(self._task)}
        except OSError:
            tids = set()
        for tid in self._files.keys() - tids:
            os.close(self._files.pop(tid))
        for tid in tids - self._files.keys():
            try:
                self._files[tid] = os.open(f"{self._task}/{tid}/schedstat", os.O_RDONLY)
            except OSError:
                continue  # ended since the listing
        self._listed_count = thread_count


class HostReading(NamedTuple):
    """The host's counters at one reading: CPU times in seconds by psutil's field names, and the
    cumulative counters from which the system row's rates come."""

    cpu: dict[str, float]
    ctx_switches: float
    procs_running: int | None
    mem_total: int
    mem_used: int
    swap_used: int
    io: dict[str, float | None]  # swap_in, swap_out, disk_read, disk_write, net_rx, net_tx (bytes)


# /proc/stat's cpu line, in psutil's names (guest time is also counted in user, as psutil says)
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
_SECTOR = 512  # /proc/diskstats counts 512-byte sectors, whatever the disk's own sector size


class HostCounters:
    """The system row's counters: on Linux five ``/proc`` files held open, one ``pread`` each (about
    0.1 ms; psutil's six calls for the same cost 0.8 ms, a third of a sample); psutil elsewhere. The
    figures are psutil's: memory used is total less available, swap used total less free, disk
    traffic that of whole disks (partitions would count it twice), network that of every interface."""

    def __init__(self) -> None:
        try:
            self._files: dict[str, HeldFile] | None = {
                name: HeldFile(f"/proc/{name}")
                for name in ("stat", "meminfo", "vmstat", "diskstats", "net/dev")
            }
        except OSError:
            self._files = None
        self._disks: set[str] = set()
        self._devices: tuple[str, ...] = ()

    def read(self) -> HostReading:
        if self._files is None:
            return _psutil_reading()
        try:
            raw = {name: held.read() for name, held in self._files.items()}
        except OSError:
            return _psutil_reading()
        stat = raw["stat"]
        cpu_line = stat[: stat.index(b"\n")].split()[1:]
        cpu = {name: int(value) / _CLOCK_TICKS for name, value in zip(_CPU_FIELDS, cpu_line, strict=False)}
        memory = _fields(raw["meminfo"], (b"MemTotal:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:"))
        vmstat = _fields(raw["vmstat"], (b"pswpin ", b"pswpout "))
        disk_read, disk_write = self._disk_sectors(raw["diskstats"])
        net_rx = net_tx = 0
        for line in raw["net/dev"].split(b"\n")[2:]:
            if b":" in line:
                values = line.split(b":", 1)[1].split()
                net_rx += int(values[0])
                net_tx += int(values[8])
        return HostReading(
            cpu=cpu,
            ctx_switches=float(_after(stat, b"\nctxt ") or 0),
            procs_running=_after(stat, b"\nprocs_running "),
            mem_total=memory[0] * 1024,
            mem_used=(memory[0] - memory[1]) * 1024,
            swap_used=(memory[2] - memory[3]) * 1024,
            io={
                "swap_in": float(vmstat[0] * _PAGE_SIZE),
                "swap_out": float(vmstat[1] * _PAGE_SIZE),
                "disk_read": float(disk_read * _SECTOR),
                "disk_write": float(disk_write * _SECTOR),
                "net_rx": float(net_rx),
                "net_tx": float(net_tx),
            },
        )

    def close(self) -> None:
        for held in (self._files or {}).values():
            held.close()

    def _disk_sectors(self, diskstats: bytes) -> tuple[int, int]:
        rows = [line.split() for line in diskstats.split(b"\n") if line.strip()]
        devices = tuple(row[2].decode() for row in rows)
        if devices != self._devices:  # a disk came or went: which are whole disks, as psutil tells
            self._devices = devices
            self._disks = {name for name in devices if os.path.exists(f"/sys/block/{name.replace('/', '!')}")}
        read = write = 0
        for row in rows:
            if row[2].decode() in self._disks:
                read, write = read + int(row[5]), write + int(row[9])
        return read, write


def _fields(text: bytes, keys: tuple[bytes, ...]) -> list[int]:
    """The number after each key ("MemTotal:", "pswpin"), 0 for a key the kernel does not write."""
    return [_after(text, (b"" if text.startswith(key) else b"\n") + key) or 0 for key in keys]


def _after(text: bytes, key: bytes) -> int | None:
    at = text.find(key)
    if at < 0:
        return None
    return int(text[at + len(key) :].split(None, 1)[0])


def _psutil_reading() -> HostReading:
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    disk, net = psutil.disk_io_counters(nowrap=False), psutil.net_io_counters(nowrap=False)
    return HostReading(
        cpu=psutil.cpu_times()._asdict(),
        ctx_switches=float(psutil.cpu_stats().ctx_switches),
        procs_running=procs_running(),
        mem_total=memory.total,
        mem_used=memory.total - memory.available,
        swap_used=swap.used,
        io={
            "swap_in": float(swap.sin),
            "swap_out": float(swap.sout),
            "disk_read": None if disk is None else float(disk.read_bytes),
            "disk_write": None if disk is None else float(disk.write_bytes),
            "net_rx": None if net is None else float(net.bytes_recv),
            "net_tx": None if net is None else float(net.bytes_sent),
        },
    )
