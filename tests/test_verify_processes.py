"""``diagnose verify``'s ``processes_now`` probe against a /proc the test writes: the server's threads,
faults and start, the run queue, swap and the contending command, read twice a (fake) second apart."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from diagnose.collectors.identity import HostIdentity
from diagnose.verify import Host, verify
from tests.conftest import DUMPS

TICKS = os.sysconf("SC_CLK_TCK")
SERVER = ("python", "python -m serve --port 8000")  # the fixtures' server, pid 4242
START = 1764460800.0  # the fixtures' first sample
BOOT = START - 86_400


@dataclass
class _Process:
    name: str
    cmdline: str
    started: float  # epoch s
    cpu: float = 0.0  # cores it uses
    faults_per_s: float = 0.0
    threads: dict[int, float] = field(default_factory=dict)  # tid -> cores
    forced_share: float = 0.2  # of its context switches, 1,000 a second
    ticks: dict[int, float] = field(default_factory=dict)
    used: float = 0.0
    faults: float = 0.0
    switches: tuple[float, float] = (0.0, 0.0)


class FakeProc:
    """A /proc under a root: processes, the run queue, cores, swap; ``advance`` moves its clock."""

    def __init__(
        self, root: Path, cores: int = 2, run_queue: int = 2, swap_per_s: float = 0.0, swap_total=4 << 30
    ):
        self.root, self.cores, self.run_queue = root, cores, run_queue
        self.swap_per_s, self.swap_total, self.swapped = swap_per_s, swap_total, 0.0
        self.now = START + 1200
        self.processes: dict[int, _Process] = {}

    def add(self, pid: int, name: str, cmdline: str, started: float = START - 3600, **how) -> None:
        self.processes[pid] = _Process(name, cmdline, started, **how)

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.swapped += self.swap_per_s * seconds / 4096
        for p in self.processes.values():
            p.used += p.cpu * seconds
            p.faults += p.faults_per_s * seconds
            for tid, cores in p.threads.items():
                p.ticks[tid] = p.ticks.get(tid, 0.0) + cores * seconds
            p.switches = (
                p.switches[0] + 1000 * seconds * (1 - p.forced_share),
                p.switches[1] + 1000 * seconds * p.forced_share,
            )
        self.write()

    def write(self) -> None:
        proc = self.root / "proc"
        proc.mkdir(parents=True, exist_ok=True)
        cpus = "".join(f"cpu{i} 1 2 3 4\n" for i in range(self.cores))
        (proc / "stat").write_text(f"cpu 1 2 3 4\n{cpus}btime {BOOT:.0f}\nprocs_running {self.run_queue}\n")
        (proc / "vmstat").write_text(f"pswpin {self.swapped / 2:.0f}\npswpout {self.swapped / 2:.0f}\n")
        free = self.swap_total // 2
        (proc / "meminfo").write_text(
            f"SwapTotal: {self.swap_total // 1024} kB\nSwapFree: {free // 1024} kB\n"
        )
        for pid, p in self.processes.items():
            folder = proc / str(pid)
            (folder / "task").mkdir(parents=True, exist_ok=True)
            start = round((p.started - BOOT) * TICKS)
            (folder / "stat").write_text(
                _stat(pid, p.name, round(p.used * TICKS), round(p.faults), len(p.threads) or 1, start)
            )
            (folder / "cmdline").write_text(p.cmdline.replace(" ", "\0") + "\0")
            for tid in p.threads:
                task = folder / "task" / str(tid)
                task.mkdir(exist_ok=True)
                (task / "stat").write_text(
                    _stat(tid, p.name, round(p.ticks.get(tid, 0.0) * TICKS), 0, 1, start)
                )
                share = 1 / len(p.threads)
                (task / "status").write_text(
                    f"Name:\t{p.name}\nvoluntary_ctxt_switches:\t{p.switches[0] * share:.0f}\n"
                    f"nonvoluntary_ctxt_switches:\t{p.switches[1] * share:.0f}\n"
                )

    def host(self) -> Host:
        self.write()
        return Host(
            self.root, lambda argv, timeout: None, sleep=self.advance, clock=self.clock, identity=_ANY_HOST
        )


def _ANY_HOST() -> HostIdentity:
    """A host the test makes says nothing of which it is: the dump's host is not told from it."""
    return HostIdentity(None)


def _stat(pid: int, name: str, cpu_ticks: int, faults: int, threads: int, start: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
    # cstime priority nice num_threads itrealvalue starttime ...
    utime, stime = cpu_ticks - cpu_ticks // 4, cpu_ticks // 4
    return f"{pid} ({name}) S 1 1 1 0 -1 0 {faults} 0 0 0 {utime} {stime} 0 0 20 0 {threads} 0 {start} 0 0\n"


def _check(found, cause: str, name: str):
    (item,) = [v for v in found.verified if v.cause == cause]
    (check,) = [c for c in item.checks if c.check == name]
    return item, check


def _checked(dump: str, proc: FakeProc, cause: str, name: str):
    """The check ``name`` of ``cause`` as verify runs it on the fixture ``dump`` against ``proc``."""
    return _check(verify(str(DUMPS / dump), host=proc.host()), cause, name)[1]


def _probe(found):
    (probe,) = [p for p in found.probes if p.probe == "processes_now"]
    return probe


def test_a_server_thread_at_a_full_core_confirms_a_cpu_bound_stage(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(4242, *SERVER, cpu=1.3, threads={4242: 0.97, 4243: 0.2, 4244: 0.13})
    proc.add(4242 + 17, "python", "python /opt/jobs/other.py", cpu=0.1, threads={4259: 0.1})
    found = verify(str(DUMPS / "cpu-bound-stage"), host=proc.host())
    item, check = _check(found, "cpu-bound-stage", "thread_pinned_now")
    assert check.outcome == "confirms", (check, _probe(found))
    assert "pid 4242 (python)" in check.says and "97%" in check.says
    assert item.verified_score == pytest.approx(1 - (1 - item.score) * 0.6)


def test_a_busy_server_with_no_thread_near_a_core_refutes_it_and_an_idle_one_leaves_it_open(tmp_path):
    spread = FakeProc(tmp_path / "a")
    spread.add(4242, *SERVER, cpu=1.6, threads={t: 0.2 for t in range(4242, 4250)})
    check = _checked("cpu-bound-stage", spread, "cpu-bound-stage", "thread_pinned_now")
    assert check.outcome == "refutes"
    idle = FakeProc(tmp_path / "b")
    idle.add(4242, *SERVER, cpu=0.05, threads={4242: 0.05})
    check = _checked("cpu-bound-stage", idle, "cpu-bound-stage", "thread_pinned_now")
    assert check.outcome == "inconclusive"


def test_a_server_restarted_within_the_recording_confirms_the_cold_start_under_its_new_pid(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(5120, *SERVER, started=START + 300, cpu=0.4, threads={5120: 0.4})  # pid 4242 is gone
    found = verify(str(DUMPS / "cold-start-contamination"), host=proc.host())
    _, check = _check(found, "cold-start-contamination", "started_since_now")
    assert check.outcome == "confirms" and "pid 5120 (python)" in check.says
    older = FakeProc(tmp_path / "older")
    older.add(4242, *SERVER, started=START - 7200, cpu=0.4, threads={4242: 0.4})
    check = _checked("cold-start-contamination", older, "cold-start-contamination", "started_since_now")
    assert check.outcome == "refutes"


def test_a_server_started_after_the_recording_ended_says_nothing_of_it(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(4242, *SERVER, started=START + 1100, cpu=0.4, threads={4242: 0.4})  # the dump ends at +600 s
    check = _checked("cold-start-contamination", proc, "cold-start-contamination", "started_since_now")
    assert check.outcome == "inconclusive"


def test_threads_over_the_cores_and_preempted_confirm_over_parallelism_and_threads_that_fit_refute_it(
    tmp_path,
):
    crowded = FakeProc(tmp_path / "a", cores=2, run_queue=6)
    crowded.add(4242, *SERVER, cpu=1.9, threads={t: 0.24 for t in range(4242, 4250)}, forced_share=0.6)
    check = _checked("over-parallelism", crowded, "over-parallelism", "oversubscribed_now")
    assert check.outcome == "confirms" and "3.0 threads" in check.says
    fitting = FakeProc(tmp_path / "b", cores=8, run_queue=4)
    fitting.add(4242, *SERVER, cpu=2.0, threads={t: 0.5 for t in range(4242, 4246)}, forced_share=0.05)
    check = _checked("over-parallelism", fitting, "over-parallelism", "oversubscribed_now")
    assert check.outcome == "refutes"


def test_swap_traffic_now_confirms_swapping_and_a_host_without_swap_refutes_it(tmp_path):
    paging = FakeProc(tmp_path / "a", swap_per_s=8 << 20)
    paging.add(4242, *SERVER, cpu=0.5, threads={4242: 0.5})
    check = _checked("memory-swapping", paging, "memory-swapping", "swapping_now")
    assert check.outcome == "confirms"
    none = FakeProc(tmp_path / "b", swap_total=0)
    none.add(4242, *SERVER, cpu=0.5, threads={4242: 0.5})
    check = _checked("memory-swapping", none, "memory-swapping", "swapping_now")
    assert check.outcome == "refutes"


def test_pages_faulted_in_for_every_request_confirm_memory_cleanup(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(4242, *SERVER, cpu=0.6, faults_per_s=40_000, threads={4242: 0.6})
    found = verify(str(DUMPS / "memory-cleanup-per-request"), host=proc.host())
    _, check = _check(found, "memory-cleanup-per-request", "faults_now")
    assert check.outcome == "confirms" and "40,000 pages a second" in check.says
    quiet = FakeProc(tmp_path / "quiet")
    quiet.add(4242, *SERVER, cpu=0.6, faults_per_s=3, threads={4242: 0.6})
    check = _checked("memory-cleanup-per-request", quiet, "memory-cleanup-per-request", "faults_now")
    assert check.outcome == "refutes"


def test_the_contending_command_running_now_confirms_co_located_contention_never_the_server_itself(tmp_path):
    job = "python3 /opt/jobs/refresh_features.py --upload"  # the fixture's contender
    running = FakeProc(tmp_path / "a")
    running.add(4242, *SERVER, cpu=0.9, threads={4242: 0.9})
    running.add(7001, "python3", job, started=START + 1190, cpu=1.8, threads={7001: 0.9, 7002: 0.9})
    found = verify(str(DUMPS / "co-located-contention"), host=running.host())
    _, check = _check(found, "co-located-contention", "contender_running_now")
    assert check.outcome == "confirms" and "pid 7001 (python3)" in check.says
    absent = FakeProc(tmp_path / "b")
    absent.add(4242, *SERVER, cpu=0.9, threads={4242: 0.9})
    check = _checked("co-located-contention", absent, "co-located-contention", "contender_running_now")
    assert check.outcome == "inconclusive"


def test_without_a_proc_the_probe_says_why_and_a_server_not_running_is_said(tmp_path):
    found = verify(
        str(DUMPS / "cpu-bound-stage"), host=Host(tmp_path, lambda argv, timeout: None, identity=_ANY_HOST)
    )
    _, check = _check(found, "cpu-bound-stage", "thread_pinned_now")
    assert check.outcome == "not run" and "no /proc under" in check.source
    gone = FakeProc(tmp_path / "gone")
    gone.add(999, "nginx", "nginx: worker process", cpu=0.1, threads={999: 0.1})
    found = verify(str(DUMPS / "cpu-bound-stage"), host=gone.host())
    _, check = _check(found, "cpu-bound-stage", "thread_pinned_now")
    assert check.outcome == "inconclusive" and _probe(found).facts["live.server.found"] is False


def test_latency_in_no_stage_and_the_main_thread_busy_now_confirm_work_on_the_event_loop(tmp_path):
    """The testbed's event-loop recording: 10490 is its server, tokenizing in the handler."""
    from diagnose.dump.reader import load_dump
    from diagnose.verify.run import _server

    recording = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "cpu-bound-stage-event-loop"
    server = _server(load_dump(str(recording / "dump")))
    assert server is not None and server.name and server.cmdline
    loop = FakeProc(tmp_path / "loop")
    loop.add(10490, server.name, server.cmdline, cpu=0.9, threads={10490: 0.78, 10491: 0.12})
    found = verify(str(recording / "dump"), host=loop.host())
    _, check = _check(found, "cpu-bound-stage", "event_loop_busy_now")
    assert check.outcome == "confirms" and "main thread" in check.says and "78%" in check.says
    worker = FakeProc(tmp_path / "worker")  # the same CPU on a worker thread: not the loop
    worker.add(10490, server.name, server.cmdline, cpu=0.9, threads={10490: 0.1, 10491: 0.78})
    _, check = _check(
        verify(str(recording / "dump"), host=worker.host()), "cpu-bound-stage", "event_loop_busy_now"
    )
    assert check.outcome == "inconclusive"


def test_a_job_is_the_same_job_with_new_arguments_and_another_script_is_not():
    from diagnose.verify.processes_now import command_key

    job = command_key("/work/.venv/bin/python -m testbed.job --seconds 14.7 --memory-mb 512")
    assert job == ("python", "-m", "testbed.job")
    assert command_key("python -m testbed.job --seconds 9.1") == job
    assert command_key("/work/.venv/bin/python -m testbed.service --port 8000") != job
    assert command_key("python3 /opt/jobs/refresh_features.py --upload") == (
        "python3",
        "/opt/jobs/refresh_features.py",
    )
    assert command_key("") == ()


_DUMP = """Process 4242: python -m serve --port 8000
Python v3.11.7 (/usr/bin/python3.11)

Thread 4242 (active+gil): "MainThread"
    resize (serve/preprocessing.py:88)
    preprocess (serve/handlers.py:40)
    run (asyncio/events.py:84)
Thread 4250 (active): "model-0"
    run (onnxruntime/capi/onnxruntime_inference_collection.py:220)
    forward (serve/model.py:61)
Thread 4251 (idle): "ThreadPoolExecutor-0_0"
    _worker (concurrent/futures/thread.py:81)
"""


def test_a_py_spy_dump_is_read_thread_by_thread():
    from diagnose.verify.stacks import parse_dump, read_stacks, stage_words

    threads = parse_dump(_DUMP)
    assert [(t.active, t.frames[0]) for t in threads] == [
        (True, "resize (serve/preprocessing.py:88)"),
        (True, "run (onnxruntime/capi/onnxruntime_inference_collection.py:220)"),
        (False, "_worker (concurrent/futures/thread.py:81)"),
    ]
    assert stage_words("tokenize") == ("tokeniz",) and stage_words("image_decode") == ("imag", "decod")
    reading = read_stacks([_DUMP, _DUMP], "preprocess")
    assert reading.facts["live.stacks.active_samples"] == 4  # two active threads a dump, idle ones left out
    assert reading.facts["live.stacks.stage_share"] == 0.5


def test_the_servers_stacks_on_the_stage_confirm_it_and_without_py_spy_the_probe_says_why(tmp_path):
    proc = FakeProc(tmp_path / "p")
    proc.add(4242, *SERVER, cpu=1.2, threads={4242: 0.9, 4250: 0.3})
    host = proc.host()
    calls = []

    def py_spy(argv, timeout):
        calls.append(argv)
        return _DUMP if argv[:2] == ["py-spy", "dump"] else None

    host.run = py_spy
    found = verify(str(DUMPS / "cpu-bound-stage"), host=host)
    _, check = _check(found, "cpu-bound-stage", "stage_in_stacks_now")
    assert check.outcome == "confirms" and "50%" in check.says
    assert all(call[:5] == ["py-spy", "dump", "--pid", "4242", "--nonblocking"] for call in calls)
    elsewhere = FakeProc(tmp_path / "q")
    elsewhere.add(4242, *SERVER, cpu=1.2, threads={4242: 0.9})
    host = elsewhere.host()
    host.run = lambda argv, timeout: _DUMP.replace("preprocess", "handle")
    _, check = _check(
        verify(str(DUMPS / "cpu-bound-stage"), host=host), "cpu-bound-stage", "stage_in_stacks_now"
    )
    assert check.outcome == "refutes"
    missing = FakeProc(tmp_path / "r")
    missing.add(4242, *SERVER, cpu=1.2, threads={4242: 0.9})
    _, check = _check(
        verify(str(DUMPS / "cpu-bound-stage"), host=missing.host()), "cpu-bound-stage", "stage_in_stacks_now"
    )
    assert check.outcome == "not run" and "pip install py-spy" in check.source


def test_a_restarted_server_is_found_though_its_recorded_command_line_had_its_secret_masked():
    from diagnose.collectors.redact import redact_cmdline
    from diagnose.verify.processes_now import ServerIdentity, _Proc, find_server

    live = "vllm serve llama --api-key s3cret --port 8000"
    recorded = ServerIdentity(frozenset({41}), "vllm", redact_cmdline(live))
    assert "s3cret" not in recorded.cmdline
    processes = {
        77: _Proc(77, "vllm", live, 0, 0, 1, 0),
        78: _Proc(78, "vllm", "vllm serve other", 0, 0, 1, 0),
    }
    assert find_server(processes, recorded) == {77}


def test_a_server_not_running_leaves_no_hole_in_any_sentence(tmp_path):
    """Where the probe could not measure a figure, the check says what it could not measure and why,
    never "its busiest thread at none of a core"."""
    gone = FakeProc(tmp_path / "gone")
    gone.add(999, "nginx", "nginx: worker process", cpu=0.1, threads={999: 0.1})
    found = verify(str(DUMPS / "cpu-bound-stage"), host=gone.host())
    checks = [c for v in found.verified for c in v.checks if c.probe == "processes_now"]
    assert checks
    for check in checks:
        words = f"{check.says} {check.test}".replace(",", " ").replace(";", " ").split()
        assert "none" not in words, check
        if check.outcome == "inconclusive":
            assert check.test == "the dump's server is not running now: its figures cannot be read", check
