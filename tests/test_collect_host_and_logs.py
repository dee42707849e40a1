"""Host sampling through psutil, following logs, scraping metrics, writing dumps."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import psutil
import pytest

from diagnose.collectors.allocator import allocator_rows, record_allocator
from diagnose.collectors.follow import FileFollower
from diagnose.collectors.host import HostCollector
from diagnose.collectors.logs import events_from_lines
from diagnose.collectors.prometheus import MetricsScraper
from diagnose.collectors.requests_log import RequestLog, parse_map
from diagnose.collectors.writer import DumpWriter
from diagnose.engines.metrics import engine_maps, parse_samples
from diagnose.errors import DiskFull, InputError
from diagnose.units import parse_duration
from tests.conftest import SHARED_DATA


class _FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class _FakeProcess:
    """psutil.Process and /proc at their boundary: CPU, thread counters and page faults that the test
    advances by hand."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.user = 0.0
        self.thread_times = {pid: 0.0, pid + 1: 0.0}
        self.thread_waits = {pid: 0.0, pid + 1: 0.0}
        self.switches = {pid: (0, 0), pid + 1: (0, 0)}  # (voluntary, involuntary)
        self.faults = 0

    def oneshot(self):
        return contextlib.nullcontext()

    def cpu_times(self):
        return types.SimpleNamespace(user=self.user, system=0.0)

    def name(self) -> str:
        return "python"

    def cmdline(self) -> list[str]:
        return ["python", "server.py"]

    def memory_info(self):
        return types.SimpleNamespace(rss=123 << 20)

    def num_threads(self) -> int:
        return len(self.thread_times)

    def threads(self):
        return [
            types.SimpleNamespace(id=t, user_time=v, system_time=0.0) for t, v in self.thread_times.items()
        ]

    def counters(self):
        from diagnose.collectors.proc import ProcessCounters

        return ProcessCounters(self.user, 123 << 20, len(self.thread_times), self.faults)


class _FakeThreads:
    """proc.ThreadReader at its boundary: the fake process's threads, in the kernel's nanoseconds."""

    def __init__(self, processes: dict[int, _FakeProcess], pid: int) -> None:
        self._process = processes[pid]

    def times(self, process, thread_count=None) -> dict:
        from diagnose.collectors.proc import ThreadTimes

        fake = self._process
        return {
            tid: ThreadTimes(round(cpu * 1e9), round(fake.thread_waits.get(tid, 0.0) * 1e9))
            for tid, cpu in fake.thread_times.items()
        }

    def switches(self, tids) -> dict:
        return {
            tid: self._process.switches.get(tid, (0, 0)) for tid in tids if tid in self._process.thread_times
        }

    def close(self) -> None:
        pass


class _FakeHostCounters:
    """proc.HostCounters at its boundary: the host's busy CPU is the fake processes' CPU, on ``cores``
    cores of the fake clock, so no reading of the real host decides what the test sees."""

    def __init__(self, clock: _FakeClock, processes: dict[int, _FakeProcess], cores: float) -> None:
        self._clock, self._processes, self._cores = clock, processes, cores

    def read(self):
        from diagnose.collectors.proc import HostReading

        user = sum(p.user for p in self._processes.values())
        return HostReading(
            cpu={"user": user, "system": 0.0, "idle": max(0.0, self._clock.now * self._cores - user)},
            ctx_switches=0.0,
            procs_running=1,
            mem_total=8 << 30,
            mem_used=2 << 30,
            swap_used=0,
            io=dict.fromkeys(("swap_in", "swap_out", "disk_read", "disk_write", "net_rx", "net_tx"), 0.0),
        )

    def close(self) -> None:
        pass


def _fake_host(monkeypatch, clock: _FakeClock, processes: dict[int, _FakeProcess], cores: float = 2.0):
    """The host collector's view of the machine, every reading of it faked: the host's real process table
    is never read, whatever pids the test uses."""
    import diagnose.collectors.host as host_module

    full_readings: list[float] = []

    def every_process() -> dict[int, float]:
        full_readings.append(clock.now)
        return {p.pid: p.user for p in processes.values()}

    monkeypatch.setattr(host_module, "time", clock)
    monkeypatch.setattr(host_module.psutil, "Process", lambda pid: processes[pid])
    monkeypatch.setattr(host_module, "cpu_seconds_by_pid", every_process)
    monkeypatch.setattr(host_module, "open_stat", lambda pid: None)
    monkeypatch.setattr(host_module, "process_counters", lambda process, stat: process.counters())
    monkeypatch.setattr(host_module, "ThreadReader", lambda pid: _FakeThreads(processes, pid))
    monkeypatch.setattr(host_module, "HostCounters", lambda: _FakeHostCounters(clock, processes, cores))
    monkeypatch.setattr(host_module, "cores_allowed", lambda pid: cores)
    return full_readings


def test_busiest_thread_is_the_largest_thread_cpu_delta_over_the_true_interval(monkeypatch):
    """Deterministic whatever the machine's load: psutil's process table, its process and the clock are
    faked, so a process born on the host between the two samples is never read."""
    clock, fake = _FakeClock(), _FakeProcess(4242)
    _fake_host(monkeypatch, clock, {fake.pid: fake})
    host = HostCollector(watch_pids=(fake.pid,), top=0, thread_top=0)
    host.sample(time.time(), clock.now)
    clock.now += 2.0
    fake.user += 1.5  # 1.5 s of CPU in 2 s: 75 % of a core, of which one thread did 1.4 s
    fake.thread_times = {fake.pid: 0.1, fake.pid + 1: 1.4}
    sample = host.sample(time.time(), clock.now)
    row = next(r for r in sample.processes if r["pid"] == fake.pid)
    assert row["cpu_pct"] == pytest.approx(75.0)
    assert row["max_thread_cpu_pct"] == pytest.approx(70.0)
    assert row["name"] == "python" and row["cmdline"] == "python server.py" and row["num_threads"] == 2
    assert 0 <= sample.system["cpu_pct"] <= 100 and sample.system["mem_total_bytes"] > 0
    assert sample.system["swap_in_per_s"] is not None


def test_a_process_threads_waits_switches_and_faults_are_rates_over_the_true_interval(monkeypatch):
    """Over-parallelism's evidence, per process: the threads' summed run-queue wait (100 = one thread
    waiting throughout) and context switches, a thread born in between counted from zero, one that
    ended not at all; and the process's minor page faults a second."""
    clock, fake = _FakeClock(), _FakeProcess(4242)
    _fake_host(monkeypatch, clock, {fake.pid: fake}, cores=1.5)
    host = HostCollector(watch_pids=(fake.pid,), top=0, thread_top=0, switches_every_s=0)
    first = host.sample(time.time(), clock.now)
    assert first.processes[0]["run_queue_wait_pct"] is None  # no interval yet: no rate
    clock.now += 2.0
    fake.user += 1.0
    fake.faults += 3000
    fake.thread_times = {fake.pid: 0.5, fake.pid + 2: 0.5}  # thread pid+1 ended, pid+2 was born
    fake.thread_waits = {fake.pid: 1.0, fake.pid + 2: 2.0}
    fake.switches = {fake.pid: (40, 10), fake.pid + 2: (60, 30)}
    row = host.sample(time.time(), clock.now).processes[0]
    assert row["run_queue_wait_pct"] == pytest.approx(150.0)  # 3 s of waiting in 2 s
    assert row["ctx_switches_voluntary_per_s"] == pytest.approx(50.0)
    assert row["ctx_switches_involuntary_per_s"] == pytest.approx(20.0)
    assert row["minor_faults_per_s"] == pytest.approx(1500.0)
    assert row["cores_allowed"] == 1.5
    assert row["max_thread_cpu_pct"] == pytest.approx(25.0)  # only the thread seen twice has a rate


def test_an_idle_process_among_the_busiest_few_has_its_threads_left_unread(monkeypatch):
    """thread_top names the busiest few, however idle they are: one whose own CPU did not move (the sum
    of its threads') reads 0 for its busiest thread without a read of them; once it runs again its
    threads are read afresh, and its busiest thread counts from that reading."""
    import diagnose.collectors.host as host_module

    clock, server, worker = _FakeClock(), _FakeProcess(4242), _FakeProcess(5000)
    worker.thread_times = {5000: 0.0, 5001: 0.0, 5002: 0.0}
    processes = {server.pid: server, worker.pid: worker}
    _fake_host(monkeypatch, clock, processes)
    read: list[int] = []

    class Counting(_FakeThreads):
        def __init__(self, processes, pid):
            super().__init__(processes, pid)
            self._pid = pid

        def times(self, process, thread_count=None):
            read.append(self._pid)
            return super().times(process, thread_count)

    monkeypatch.setattr(host_module, "ThreadReader", lambda pid: Counting(processes, pid))
    host = HostCollector(watch_pids=(server.pid,), top=1, thread_top=2, rescan_every=30)
    worker.user = 0.01  # it ran once: the rescan tracks it as one of the busiest, its threads read
    host.sample(time.time(), clock.now)
    read.clear()
    for _ in range(3):
        clock.now += 1.0
        server.user += 0.2
        rows = {r["pid"]: r for r in host.sample(time.time(), clock.now).processes}
        assert rows[worker.pid]["cpu_pct"] == 0 and rows[worker.pid]["max_thread_cpu_pct"] == 0.0
    assert read == [server.pid] * 3  # the watched server's, every sample, however idle
    clock.now += 1.0
    worker.user += 0.9
    worker.thread_times = {5000: 0.0, 5001: 0.9, 5002: 0.0}
    rows = {r["pid"]: r for r in host.sample(time.time(), clock.now).processes}
    assert rows[worker.pid]["cpu_pct"] == pytest.approx(90.0) and rows[worker.pid]["max_thread_cpu_pct"] is None
    clock.now += 1.0
    worker.user += 0.5
    worker.thread_times = {5000: 0.0, 5001: 1.4, 5002: 0.0}
    rows = {r["pid"]: r for r in host.sample(time.time(), clock.now).processes}
    assert rows[worker.pid]["max_thread_cpu_pct"] == pytest.approx(50.0)


def test_context_switches_are_counted_every_switches_every_s_over_that_true_interval(monkeypatch):
    """A thread's status costs more than the rest of its reading: the switches are counted every
    ``switches_every_s`` and their rates are over the interval between two counts; the rows between
    carry none, never a rate over one sample made from counts that were not read."""
    clock, fake = _FakeClock(), _FakeProcess(4242)
    _fake_host(monkeypatch, clock, {fake.pid: fake})
    host = HostCollector(watch_pids=(fake.pid,), top=0, thread_top=0, switches_every_s=10)
    rates = []
    for step in range(7):  # samples 2 s apart, 12 s in all
        fake.switches = {fake.pid: (30 * step, 6 * step), fake.pid + 1: (0, 0)}
        (row,) = host.sample(time.time(), clock.now).processes
        rates.append((row["ctx_switches_voluntary_per_s"], row["ctx_switches_involuntary_per_s"]))
        clock.now += 2.0
    assert rates[:5] == [(None, None)] * 5  # counted at 0 s; the next count is due at 10 s
    assert rates[5] == (pytest.approx(15.0), pytest.approx(3.0))  # 150 and 30 more in 10 s
    assert rates[6] == (None, None)


def test_this_process_threads_are_read_from_proc():
    """The real /proc path, for this process: a thread's counters only grow, and the page faults are
    read; relative figures only, which hold on a loaded machine."""
    from diagnose.collectors.proc import ThreadReader, open_stat, process_counters, procs_running

    if not os.path.isdir(f"/proc/{os.getpid()}/task"):
        pytest.skip("no /proc on this system")
    reader = ThreadReader(os.getpid())
    mine = threading.get_native_id()
    try:
        before, switched = reader.times(psutil.Process()), reader.switches([mine])
        sum(range(200_000))
        time.sleep(0.01)  # one voluntary switch at least
        after, switched_after = reader.times(psutil.Process()), reader.switches([mine])
    finally:
        reader.close()
    assert after[mine].cpu_ns >= before[mine].cpu_ns and after[mine].wait_ns is not None
    assert after[mine].timeslices > before[mine].timeslices
    assert switched_after[mine][0] > switched[mine][0] and switched_after[mine][1] >= switched[mine][1]
    faults = process_counters(psutil.Process(), open_stat(os.getpid())).minor_faults
    assert faults > 0 and procs_running() >= 1


def test_an_idle_thread_status_is_not_read_again(monkeypatch):
    """A pool's idle thread, not given a CPU since its switches were last counted, keeps its counts
    without a second read of its status: what keeps a server of hundreds of idle threads cheap to sample."""
    import diagnose.collectors.host as host_module
    import diagnose.collectors.proc as proc_module

    if not os.path.isdir(f"/proc/{os.getpid()}/task"):
        pytest.skip("no /proc on this system")
    started, stop = threading.Event(), threading.Event()

    def idle() -> None:
        started.set()
        stop.wait()

    thread = threading.Thread(target=idle, daemon=True)
    thread.start()
    started.wait()
    time.sleep(0.05)  # asleep in stop.wait() from here on
    monkeypatch.setattr(host_module, "cpu_seconds_by_pid", _own_cpu_seconds)  # not the host's table
    host = HostCollector(watch_pids=(os.getpid(),), top=0, thread_top=0, switches_every_s=0)
    try:
        host.sample(time.time(), time.monotonic())
        read, real = [], proc_module.read_file
        monkeypatch.setattr(proc_module, "read_file", lambda path: read.append(path) or real(path))
        time.sleep(0.05)
        (row,) = host.sample(time.time(), time.monotonic()).processes
    finally:
        stop.set()
        host.close()
    tid = thread.native_id
    assert not any(path.endswith(f"/{tid}/status") for path in read)
    assert any(path.endswith(f"/{threading.get_native_id()}/status") for path in read)  # this one ran
    assert row["ctx_switches_voluntary_per_s"] is not None


def test_a_process_file_kept_open_never_reads_a_successor_under_its_pid():
    """A process's stat held open fails once the process is gone, whatever has its pid since."""
    from diagnose.collectors.proc import open_stat, process_counters

    child = subprocess.Popen(["sleep", "30"])
    stat = open_stat(child.pid)
    if stat is None:
        child.kill()
        child.wait()
        pytest.skip("no /proc on this system")
    try:
        assert process_counters(psutil.Process(child.pid), stat).threads == 1
        child.kill()
        child.wait()
        with pytest.raises(psutil.NoSuchProcess):
            process_counters(psutil.Process(os.getpid()), stat)
    finally:
        stat.close()


def test_the_host_counters_are_psutils_figures():
    """The system row's counters read from /proc in one pass are what psutil's calls give: the same
    memory total, and counters that psutil reads at or above the first reading and at or below the next."""
    from diagnose.collectors.proc import HostCounters, _psutil_reading

    counters = HostCounters()
    try:
        first, by_psutil, second = counters.read(), _psutil_reading(), counters.read()
    finally:
        counters.close()
    assert first.mem_total == by_psutil.mem_total > 0
    for key, value in by_psutil.io.items():
        if value is not None:
            assert first.io[key] <= value <= second.io[key], key
    assert first.ctx_switches <= by_psutil.ctx_switches <= second.ctx_switches
    for name in ("user", "system", "idle"):
        assert first.cpu[name] <= by_psutil.cpu[name] <= second.cpu[name], name


def test_a_big_hosts_proc_files_are_read_whole(tmp_path):
    """A GPU host of 128 cores writes a /proc/stat of 20 KB and more (a line a core, a count an interrupt),
    the context switches and the run queue after them: read whole, the first time and when it grows."""
    from diagnose.collectors.proc import HeldFile, HostCounters, read_file

    def stat(cores: int, interrupts: int) -> str:
        lines = [f"cpu{n} 100 0 50 9000 3 0 1 0 0 0" for n in range(cores)]
        return "\n".join(
            [
                "cpu  12800 0 6400 1152000 384 0 128 0 0 0",
                *lines,
                "intr " + " ".join(["123456"] * interrupts),
                "ctxt 987654321",
                "btime 1764460800",
                "procs_running 97",
                "procs_blocked 0",
                "",
            ]
        )

    files = {}
    for name, text in {
        "stat": stat(128, 2000),
        "meminfo": "MemTotal: 1000 kB\nMemAvailable: 400 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        "vmstat": "pswpin 0\npswpout 0\n",
        "diskstats": "   8       0 sda 1 0 2 0 3 0 4 0 0 0 0\n",
        "net/dev": "h1\nh2\n" + "".join(f"veth{n}: 5 0 0 0 0 0 0 0 7 0 0 0 0 0 0 0\n" for n in range(400)),
    }.items():
        path = tmp_path / name.replace("/", "_")
        path.write_text(text)
        files[name] = path
    assert len(files["stat"].read_bytes()) > 16_000 and len(files["net/dev"].read_bytes()) > 16_000
    counters = HostCounters()
    counters.close()
    counters._files = {name: HeldFile(str(path)) for name, path in files.items()}
    try:
        reading = counters.read()
        assert reading.ctx_switches == 987654321 and reading.procs_running == 97
        assert reading.io["net_rx"] == 5 * 400 and reading.io["net_tx"] == 7 * 400
        files["stat"].write_text(stat(256, 8000))  # a bigger file in the same place is read whole too
        assert counters.read().procs_running == 97
    finally:
        counters.close()
    assert read_file(str(files["stat"])).endswith(b"procs_blocked 0\n")


def test_cores_allowed_is_the_affinity_capped_by_the_cgroup_quota(tmp_path, monkeypatch):
    """A container limited to 1.5 CPUs on a host whose affinity allows more: the quota decides; without
    a quota, the affinity; a v1 hierarchy is read as well as v2's."""
    from diagnose.collectors import cpu_limits

    pid = os.getpid()
    affinity = len(psutil.Process().cpu_affinity()) if hasattr(psutil.Process, "cpu_affinity") else None
    if affinity is None:
        pytest.skip("no CPU affinity on this system")
    cgroup = tmp_path / "proc-cgroup"
    monkeypatch.setattr(cpu_limits, "Path", lambda p: cgroup if p == f"/proc/{pid}/cgroup" else Path(p))
    cgroup.write_text("0::/kubepods/pod1\n")
    (tmp_path / "root" / "kubepods" / "pod1").mkdir(parents=True)
    (tmp_path / "root" / "kubepods" / "pod1" / "cpu.max").write_text("150000 100000\n")
    assert cpu_limits.cores_allowed(pid, tmp_path / "root") == min(1.5, affinity)
    (tmp_path / "root" / "kubepods" / "pod1" / "cpu.max").write_text("max 100000\n")
    assert cpu_limits.cores_allowed(pid, tmp_path / "root") == affinity
    cgroup.write_text("4:cpu,cpuacct:/docker/abc\n")
    v1 = tmp_path / "root" / "cpu,cpuacct" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_limits.cores_allowed(pid, tmp_path / "root") == 0.5


def _burn(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def _own_cpu_seconds() -> dict[int, float]:
    """The process table as this process alone: what the processes born and gone beside a test are not."""
    times = psutil.Process().cpu_times()
    return {os.getpid(): times.user + times.system}


def test_a_burning_thread_of_this_process_is_its_busiest_thread(monkeypatch):
    """The real psutil path for this process; only relative figures, which hold on a loaded machine.
    The host's process table is not read: the processes born and gone beside the test are not its."""
    import diagnose.collectors.host as host_module

    monkeypatch.setattr(host_module, "cpu_seconds_by_pid", _own_cpu_seconds)
    stop = threading.Event()
    burner = threading.Thread(target=_burn, args=(stop,), daemon=True)
    burner.start()
    try:
        host = HostCollector(watch_pids=(os.getpid(),), top=3)
        host.sample(time.time(), time.monotonic())
        time.sleep(1.0)
        sample = host.sample(time.time(), time.monotonic())
    finally:
        stop.set()
    mine = next(row for row in sample.processes if row["pid"] == os.getpid())
    assert mine["max_thread_cpu_pct"] > 0
    # One thread did nearly all of this process's work, whatever share of a core it got.
    assert mine["max_thread_cpu_pct"] >= mine["cpu_pct"] * 0.6


def test_follower_holds_partial_lines_and_follows_rotation(tmp_path):
    log = tmp_path / "requests.jsonl"
    log.write_text("old line\n")
    follower = FileFollower(log)
    with open(log, "a") as out:
        out.write('{"ts": 1}\n{"ts": 2, "lat')
    assert follower.read_lines() == ['{"ts": 1}']
    with open(log, "a") as out:
        out.write('ency_ms": 5}\n')
    assert follower.read_lines() == ['{"ts": 2, "latency_ms": 5}']
    log.rename(tmp_path / "requests.jsonl.1")
    log.write_text('{"ts": 3}\n')
    assert follower.read_lines() == ['{"ts": 3}']
    log.write_text("")  # truncated in place (copytruncate), noticed at the next poll
    assert follower.read_lines() == []
    with open(log, "a") as out:
        out.write('{"ts": 4}\n')
    assert follower.read_lines() == ['{"ts": 4}']


def test_request_log_maps_columns_and_counts_torn_lines(tmp_path):
    log = tmp_path / "access.jsonl"
    log.write_text("")
    reader = RequestLog.open(str(log), parse_map("t=ts,duration=latency_ms"))
    log.write_text('{"t": 1.5, "duration": 12}\nnot json\n{"duration": 3}\n')
    assert reader.rows() == [{"ts": 1.5, "latency_ms": 12}]
    assert reader.unreadable == 2


def test_csv_request_log_uses_the_files_header(tmp_path):
    log = tmp_path / "requests.csv"
    log.write_text("ts,latency_ms\n")
    reader = RequestLog.open(str(log), {})
    with open(log, "a") as out:
        out.write("1.0,5\n2.0,6\n")
    assert reader.rows() == [{"ts": "1.0", "latency_ms": "5"}, {"ts": "2.0", "latency_ms": "6"}]


@pytest.mark.parametrize("text", ["a", "a=", "=b", "a=b,c"])
def test_bad_map_is_a_clear_error(text):
    with pytest.raises(InputError, match="--map"):
        parse_map(text)


def test_oom_and_xid_lines_become_events():
    lines = [
        "INFO all good",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[ 123.4] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    ]
    events = events_from_lines(lines, 10.0, "server.log")
    assert [e["kind"] for e in events] == ["oom", "xid"]
    assert events[1]["xid"] == 79


def test_engine_stalls_and_deaths_become_events_as_the_vllm_importer_reads_them():
    """Seen live by the recorder, a stall is the same event as in a log given to diagnose file."""
    lines = [
        "ERROR 12-03 10:00:00 [core.py:400] Engine iteration timed out. This should never happen!",
        "[2025-06-01 10:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "INFO watchdog started with a timeout of 300 s",  # configuring a watchdog is no stall
    ]
    events = events_from_lines(lines, 10.0, "server.log")
    assert [e["kind"] for e in events] == ["engine_stall"] * 3 + ["engine_dead"]
    assert events[1]["message"].startswith("[2025-06-01 10:00:00] Scheduler watchdog timeout")


def test_a_statement_of_the_catalogue_seen_live_is_its_event_with_its_figures():
    """What the catalogue knows (statements/) the recorder knows too: llama.cpp out of KV space."""
    lines = [
        "srv  update_slots: failed to find free space in the KV cache, retrying with smaller batch size, "
        "i = 0, n_batch = 512, ret = 1",
        "slot update_slots: id  0 | task 12 | new prompt, n_ctx_slot = 4096, n_keep = 0, n_prompt_tokens = 812",
    ]
    events = events_from_lines(lines, 10.0, "llama-server.log")
    assert [e["kind"] for e in events] == ["kv_cache_full"]
    assert events[0]["statement"].startswith("llama-cpp-") and events[0]["source"] == "llama-server.log"


VLLM_1 = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model="a"} 3
vllm:num_requests_waiting{model="b"} 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc 0.25
# TYPE vllm:request_success counter
vllm:request_success_total 100
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{le="+Inf"} 100
vllm:request_queue_time_seconds_sum 5.0
vllm:request_queue_time_seconds_count 100
"""


def test_scraper_turns_gauges_counters_and_histograms_into_a_server_row(monkeypatch):
    second = (
        VLLM_1.replace("_total 100", "_total 140")
        .replace("_sum 5.0", "_sum 7.0")
        .replace("_count 100", "_count 140")
    )
    pages = iter([VLLM_1, second])
    scraper = MetricsScraper("http://127.0.0.1:1/metrics")
    monkeypatch.setattr(scraper, "fetch", lambda: next(pages))
    first = scraper.sample(1.0, 10.0)
    assert scraper.engine == "vllm"
    assert first == {
        "ts": 1.0,
        "queue_depth": 4.0,
        "running": None,
        "kv_cache_usage_pct": 25.0,
        "swapped": None,
    }
    row = scraper.sample(3.0, 12.0)
    assert row["throughput_rps"] == pytest.approx(20.0)
    assert row["queue_ms"] == pytest.approx(50.0)


SAMPLES = SHARED_DATA / "real-samples" / "formats"


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared real samples are not present")
@pytest.mark.parametrize("folder", ["vllm_metrics", "triton_metrics", "tgi_metrics"])
def test_real_engine_scrapes_parse_and_are_recognised(folder):
    engine = {"vllm_metrics": "vllm", "triton_metrics": "triton", "tgi_metrics": "tgi"}[folder]
    recognised = 0
    for path in sorted((SAMPLES / folder).glob("*.txt")):
        samples = parse_samples(path.read_text(encoding="utf-8").split("\n", 1)[1])
        mapping = engine_maps()[engine]
        names = mapping.sample_names()
        recognised += bool(names & set(samples))
    assert recognised >= 1


@pytest.mark.writes_unregistered  # a column the writer's header lacks is dropped, not a failure
def test_writer_refuses_an_existing_dump_and_completes_the_manifest(tmp_path):
    (tmp_path / "old.csv").write_text("x")
    with pytest.raises(InputError, match="--force"):
        DumpWriter(tmp_path, 1.0)
    writer = DumpWriter(tmp_path / "new", 1.0)
    writer.append("system", [{"ts": 1.0, "cpu_pct": 5, "unexpected": 1}])
    writer.append("events", [{"ts": 1.0, "kind": "restart"}])
    writer.flush()
    writer.close(samples=1)
    manifest = (tmp_path / "new" / "manifest.yaml").read_text()
    assert "complete: true" in manifest and "samples: 1" in manifest
    assert (tmp_path / "new" / "system.csv").read_text().splitlines()[1].startswith("1.0,5")


def test_the_writer_flushes_each_sample_and_syncs_every_few_seconds_and_at_the_end(tmp_path, monkeypatch):
    """A killed recorder loses nothing flushed (the OS has it); the disk is asked to keep it every
    SYNC_EVERY_S and when the dump closes, not each second (a sync costs a tenth of a sample's budget)."""
    import diagnose.collectors.writer as writer_module

    clock, synced = _FakeClock(), []
    monkeypatch.setattr(writer_module, "time", clock)
    monkeypatch.setattr(writer_module.os, "fsync", lambda fd: synced.append(clock.now))
    writer = DumpWriter(tmp_path / "d", 1.0)
    for second in range(25):
        clock.now = 1000.0 + second
        writer.append("system", [{"ts": clock.now, "cpu_pct": 5}])
        writer.flush()
        assert len((tmp_path / "d" / "system.csv").read_text().splitlines()) == second + 2  # flushed
    assert synced == [1010.0, 1020.0]
    writer.close(samples=25)
    assert synced[2:] == [1024.0]


def test_a_full_disk_stops_the_writer_with_disk_full(tmp_path):
    writer = DumpWriter(tmp_path / "d", 1.0)

    class Full:
        def write(self, _):
            raise OSError(errno.ENOSPC, "No space left on device")

    writer._files["events"] = Full()
    with pytest.raises(DiskFull):
        writer.append("events", [{"ts": 1, "kind": "x"}])


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("1h30m", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "0s", "5d"])
def test_bad_durations(text):
    with pytest.raises(InputError):
        parse_duration(text)


def test_allocator_rows_read_memory_stats_without_importing_torch(monkeypatch):
    stats = {
        "allocated_bytes.all.current": 10,
        "reserved_bytes.all.current": 30,
        "active_bytes.all.current": 12,
        "inactive_split_bytes.all.current": 4,
        "num_alloc_retries": 2,
        "num_ooms": 1,
        "num_device_alloc": 140,
        "num_device_free": 120,
    }
    cuda = types.SimpleNamespace(
        device_count=lambda: 1,
        memory_stats=lambda device: stats,
        memory_snapshot=lambda: [
            {
                "device": 0,
                "blocks": [{"state": "inactive", "size": 8}, {"state": "active_allocated", "size": 50}],
            }
        ],
    )
    fake_torch = types.SimpleNamespace(cuda=cuda)
    (row,) = allocator_rows(fake_torch, 5.0, 77)
    assert row == {
        "ts": 5.0,
        "pid": 77,
        "device": 0,
        "allocated_bytes": 10,
        "reserved_bytes": 30,
        "active_bytes": 12,
        "inactive_split_bytes": 4,
        "num_alloc_retries": 2,
        "num_ooms": 1,
        "num_device_alloc": 140,
        "num_device_free": 120,
        "largest_free_block_bytes": 8,
    }
    json.dumps(row)


def test_the_allocator_helper_never_imports_torch_itself(tmp_path, monkeypatch):
    attempts = []

    class RecordTorchImports:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                attempts.append(name)
            return None

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [RecordTorchImports(), *sys.meta_path])
    out = tmp_path / "allocator.jsonl"
    record_allocator(str(out), interval_s=0.02)
    time.sleep(0.2)
    assert attempts == []
    assert out.read_text() == ""  # no torch in the process: nothing to record


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("INFO 12-01 10:00:01 api_server.py:312] Profiler started.", "profiler_start"),
        ("INFO 12-01 10:02:01 api_server.py:320] Profiler stopped.", "profiler_stop"),
        ("[2025-12-01 10:00:01] Profiling starts. Traces will be saved to: /tmp/trace", "profiler_start"),
        ("[2025-12-01 10:01:01] Profiling done. Traces are saved to: /tmp/trace", "profiler_stop"),
        ("2026-12-02 01:00:00 cProfile profiler started on every thread", "profiler_start"),
        ("WARNING torch profiler is not enabled; set VLLM_TORCH_PROFILER_DIR", None),
        ("INFO Starting profiler...", None),  # vLLM's line before the start; the start is the next one
        ("INFO loaded profiling config for CUDA graphs", None),
    ],
)
def test_profiler_lines_become_profiler_events(line, kind):
    events = events_from_lines([line], 5.0, "service.log")
    assert [e["kind"] for e in events] == ([kind] if kind else [])


def test_an_idle_process_that_becomes_busy_is_recorded_that_sample_at_its_true_rate(monkeypatch):
    """A long-lived process that wakes up is read at the sample it does: the host's busy CPU that the
    tracked processes do not account for makes every process be read again, and its first rate is its
    CPU since it was last read, over that true interval, never more than it could use. A sample in
    which nothing else was busy reads the tracked processes alone."""
    clock, server, worker = _FakeClock(), _FakeProcess(4242), _FakeProcess(5000)
    worker.user = 100.0  # hours of life, idle now
    processes = {server.pid: server, worker.pid: worker}
    full_readings = _fake_host(monkeypatch, clock, processes)
    host = HostCollector(watch_pids=(server.pid,), top=0, thread_top=0, rescan_every=10)
    host.sample(time.time(), clock.now)  # a rescan: every process read
    clock.now += 1.0
    server.user += 0.5  # the watched server's own work is accounted for
    first = host.sample(time.time(), clock.now)
    assert worker.pid not in {r["pid"] for r in first.processes}  # idle: not read in full
    assert full_readings == [1000.0, 1000.0]  # at the start, and the first sample's rescan
    clock.now += 2.0
    worker.user += 1.8  # wakes up: 1.8 s of CPU since it was last read, 3 s ago
    woken = host.sample(time.time(), clock.now)
    row = next(r for r in woken.processes if r["pid"] == worker.pid)
    assert full_readings[2:] == [1003.0]
    assert row["cpu_pct"] == pytest.approx(60.0)
    clock.now += 1.0
    worker.user += 0.9
    again = host.sample(time.time(), clock.now)
    assert next(r for r in again.processes if r["pid"] == worker.pid)["cpu_pct"] == pytest.approx(90.0)
    assert full_readings[2:] == [1003.0]  # tracked now: its CPU is accounted for
