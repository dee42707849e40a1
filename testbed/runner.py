"""Run one scenario end to end: start the service, record it with `diagnose record`, drive the load,
inject the fault, stop everything it started, and write the dump and ``truth.yaml``.

Every process the runner starts is its child, is asked to stop (SIGTERM, then
SIGKILL) when the run ends or the runner is interrupted, and on Linux is told
by the kernel to stop if the runner itself is killed (``PR_SET_PDEATHSIG``,
through :mod:`testbed.guard`): nothing the testbed starts outlives it. The
kernel sends that signal when the *thread* that started the child ends, so
every child is started from the main thread: the fault injector is a task on
the main thread's event loop, beside the load, not a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import yaml

from testbed.load import LoadPlan, LoadResult, PromptMaker, drive, measure_capacity, schedule
from testbed.scenarios import Scenario
from testbed.strength import CALIBRATION_PROMPTS, cold_window_s, run_strength, set_tokenizer
from testbed.tokenizer import words

# The service's own metrics, named to diagnose as a user of a home-grown service would name them.
_METRICS_MAP = ",".join(
    (
        "testbed_queue_depth=queue_depth",
        "testbed_running=running",
        "testbed_batch_size=batch_size",
        "testbed_requests=throughput_rps",
        "testbed_generated_tokens=tokens_per_s",
        "testbed_request_latency_seconds=e2e_ms",
    )
)
_STARTUP_TIMEOUT_S = 60.0
_STOP_WAIT_S = 10.0


class RunError(Exception):
    """A run that could not be done: said to the user in one line, exit 2."""


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def dump(self) -> Path:
        return self.root / "dump"

    @property
    def graph_profile(self) -> Path:
        return self.root / "onnxruntime_profile.json"

    @property
    def requests_log(self) -> Path:
        return self.root / "service" / "requests.jsonl"

    @property
    def service_output(self) -> Path:
        return self.root / "service" / "output.log"

    @property
    def truth(self) -> Path:
        return self.root / "truth.yaml"


def run(
    scenario: Scenario,
    duration_s: float,
    out: Path,
    seed: int = 0,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] = lambda _: None,
) -> Path:
    """Run ``scenario`` for ``duration_s`` seconds into ``out``; return the dump folder. ``say``: the
    run's lines; ``progress``: where it is now, several times a second (a status line on a terminal)."""
    if (reason := scenario.unavailable()) is not None:
        raise RunError(f"{scenario.name}: cannot run here: {reason}")
    paths = RunPaths(out)
    if out.exists() and any(out.iterdir()):
        raise RunError(f"{out}: exists and is not empty; give a new folder")
    paths.requests_log.parent.mkdir(parents=True, exist_ok=True)
    with Children() as children:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        progress(f"testbed: {scenario.name}: starting the service")
        service = _start_service(children, scenario, port, paths, duration_s)
        wait_healthy(url, service)
        if scenario.restart_at is None:
            _warm(url)  # the lazy start-up is the cold-start scenario's fault, not every run's
        ramp_to = scenario.ramp_to_rps
        if scenario.ramp_to_capacity is not None:
            # Before the recorder starts (it reads the request log from its end): not in the dump.
            mix = schedule(LoadPlan(60.0, scenario.rate_rps, seed=seed))
            progress(f"testbed: {scenario.name}: measuring what the service can serve")
            capacity = asyncio.run(measure_capacity(url, mix, PromptMaker(words(), seed)))
            ramp_to = round(scenario.ramp_to_capacity * capacity, 1)
            say(f"testbed: {scenario.name}: the service serves {capacity:.1f} requests/s; ramp to {ramp_to}")
        tokenizer = None
        if scenario.tokenizer_busy is not None:
            progress(f"testbed: {scenario.name}: timing the tokenizer on the load's prompts")
            prompts = _calibration_prompts(scenario, duration_s, seed)
            tokenizer = set_tokenizer(url, prompts, scenario.rate_rps, scenario.tokenizer_busy)
            say(
                f"testbed: {scenario.name}: the tokenizer takes {tokenizer.one_pass_ms:.1f} ms a prompt; "
                f"{tokenizer.passes} passes for {tokenizer.expected_busy:.0%} busy at {scenario.rate_rps:g}/s"
            )
        started = time.time()
        recorder = children.start(
            [
                sys.executable, "-m", "diagnose", "record", "-o", str(paths.dump),
                "--duration", f"{duration_s + 3:.0f}s", "--requests-log", str(paths.requests_log),
                "--metrics-url", f"{url}/metrics", "--metrics-map", _METRICS_MAP, "--pid", str(service.pid),
                "--log", str(paths.service_output), *settings_options(scenario),
            ],
            paths.root / "recorder.log",
        )  # fmt: skip
        time.sleep(2.0)  # the recorder's first samples before the first request
        plan = LoadPlan(
            duration_s,
            scenario.rate_rps,
            ramp_to,
            None if scenario.shift_at is None else scenario.shift_at * duration_s,
            scenario.length_factor,
            seed=seed,
        )
        load_start = time.time()
        injector = _Injector(children, scenario, duration_s, port, paths, seed)
        shown = LoadProgress(scenario.name, progress)
        result = asyncio.run(_drive_and_inject(url, plan, seed, injector, shown))
        say(f"testbed: {scenario.name}: {result.summary()}")
        progress(f"testbed: {scenario.name}: waiting for the recorder to write the dump")
        if recorder.wait(timeout=duration_s + 60) != 0:
            raise RunError(f"diagnose record failed; see {paths.root / 'recorder.log'}")
    if scenario.graph_profile and paths.graph_profile.exists():  # made before the recorder's folder was
        shutil.copy2(paths.graph_profile, paths.dump / paths.graph_profile.name)
    windows = injector.fault_windows
    strength = run_strength(
        paths.requests_log, scenario, tokenizer, load_start, load_start + duration_s, windows
    )
    if strength and strength.get("held") is False:
        say(f"testbed: {scenario.name}: the fault was weaker than promised: {strength}")
    write_truth(paths, scenario, duration_s, seed, started, load_start, windows, result, ramp_to, strength)
    return paths.dump


def _calibration_prompts(scenario: Scenario, duration_s: float, seed: int) -> list[str]:
    """The load's own first prompts (its lengths, its words), as many as the calibration times; made by a
    maker of their own, so the load's draws are untouched."""
    plan = schedule(LoadPlan(duration_s, scenario.rate_rps, seed=seed))[:CALIBRATION_PROMPTS]
    maker = PromptMaker(words(), seed)
    return [maker.make(request.prompt_tokens) for request in plan]


async def _drive_and_inject(
    url: str, plan: LoadPlan, seed: int, injector: _Injector, shown: LoadProgress
) -> LoadResult:
    result = LoadResult()
    faults = asyncio.create_task(injector.run())
    ticker = asyncio.create_task(shown.run(plan.duration_s, result, injector))
    try:
        return await drive(url, schedule(plan), PromptMaker(words(), seed), result=result)
    finally:
        for task in (faults, ticker):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@dataclass(frozen=True)
class LoadProgress:
    """The load's progress, once a second: time driven, requests so far, and the faults injected."""

    scenario: str
    show: Callable[[str], None]

    async def run(self, duration_s: float, result: LoadResult, injector: _Injector) -> None:
        start = time.monotonic()
        while True:
            line = (
                f"testbed: {self.scenario}: load {time.monotonic() - start:.0f} of {duration_s:.0f} s"
                f" · sent {result.sent:,}, ok {result.ok:,}, failed {result.failed:,}"
            )
            windows = injector.fault_windows
            if windows:
                now = time.time()
                inside = any(began <= now <= ended for began, ended in windows)
                line += f" · fault {'on' if inside else 'off'} ({len(windows)} injected)"
            self.show(line)
            await asyncio.sleep(1.0)


class Children:
    """The processes of one run, stopped together however the run ends."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Children:
        self._previous = {
            signum: signal.signal(signum, self._interrupted) for signum in (signal.SIGTERM, signal.SIGHUP)
        }
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _interrupted(self, signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    def start(self, command: list[str], output: Path) -> subprocess.Popen:
        with self._lock, output.open("ab") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "testbed.guard", str(os.getpid()), *command],
                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": _project_path()},
            )  # fmt: skip
            self.processes.append(process)
            return process

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop_all(self) -> None:
        with self._lock:
            running = [p for p in self.processes if p.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + _STOP_WAIT_S
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def settings_options(scenario: Scenario) -> list[str]:
    """The service's options as the recorder's --setting, so that diagnose compare can tell two runs apart."""
    args = scenario.service_args
    if not args:
        return []
    pairs = []
    for flag, following in zip(args, [*args[1:], "--"], strict=True):
        if flag.startswith("--"):
            value = "on" if following.startswith("--") else following
            pairs.append(f"{flag.lstrip('-').replace('-', '_')}={value}")
    return ["--setting", ",".join(pairs)] if pairs else []


def _project_path() -> str:
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join([root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_service(
    children: Children, scenario: Scenario, port: int, paths: RunPaths, duration_s: float
) -> subprocess.Popen:
    profile = ["--ort-profile", str(paths.graph_profile)] if scenario.graph_profile else []
    load_s = scenario.load_s(duration_s)
    loading = [] if load_s is None else ["--load-s", f"{load_s:.2f}"]
    command = [
        sys.executable, "-m", "testbed.service", "--port", str(port), "--log", str(paths.requests_log),
        *scenario.service_args, *profile, *loading,
    ]  # fmt: skip
    return children.start(command, paths.service_output)


def wait_healthy(url: str, service: subprocess.Popen) -> None:
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if service.poll() is not None:
            raise RunError(f"the service exited at start-up (code {service.returncode}); see its output.log")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise RunError(f"the service did not answer {url}/health within {_STARTUP_TIMEOUT_S:.0f} s")


def _warm(url: str) -> None:
    _post(f"{url}/generate", json.dumps({"prompt": "warm up", "max_tokens": 1}).encode())


def _post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=_STARTUP_TIMEOUT_S):
        pass


class _Injector:
    """Does the scenario's timed events during the load: restarts the service, starts the job.

    A task on the main thread's event loop: the processes it starts must be the
    main thread's children (see the module's docstring), and waiting is done on
    worker threads so the load never stalls.
    """

    def __init__(self, children: Children, scenario: Scenario, duration_s: float, port: int, paths: RunPaths,
                 seed: int) -> None:  # fmt: skip
        self._children, self._scenario, self._duration = children, scenario, duration_s
        self._port, self._paths = port, paths
        self._rng = np.random.default_rng(seed + 7)
        self.fault_windows: list[tuple[float, float]] = []

    async def run(self) -> None:
        scenario = self._scenario
        if scenario.restart_at is not None:
            await asyncio.sleep(scenario.restart_at * self._duration)
            await self._restart()
        elif scenario.profile_at is not None:
            await asyncio.sleep(scenario.profile_at * self._duration)
            await self._profile()
        elif scenario.hang_at is not None:
            await asyncio.sleep(scenario.hang_at * self._duration)
            await self._hang()
        elif scenario.release_memory_at is not None:
            await asyncio.sleep(scenario.release_memory_at * self._duration)
            await asyncio.to_thread(_post, f"http://127.0.0.1:{self._port}/admin/release_memory", b"")
        elif scenario.job_period_s is not None:
            await self._jobs()
        elif "swap" in scenario.tags:
            await self._memory_hog()

    async def _restart(self) -> None:
        old = [p for p in self._children.processes if "testbed.service" in p.args]
        for process in old:
            await asyncio.to_thread(self._children.stop, process)
        began = time.time()
        _start_service(self._children, self._scenario, self._port, self._paths, self._duration)
        self.fault_windows.append((began, began + cold_window_s(self._duration)))  # its cold requests

    async def _profile(self) -> None:
        await asyncio.to_thread(_post, f"http://127.0.0.1:{self._port}/start_profile", b"")

    async def _hang(self) -> None:
        seconds = self._scenario.hang_seconds
        began = time.time()
        await asyncio.to_thread(_post, f"http://127.0.0.1:{self._port}/fault/hang?seconds={seconds:g}", b"")
        self.fault_windows.append((began, began + seconds))

    async def _jobs(self) -> None:
        starts = self._scenario.job_starts(self._rng, self._duration)
        await run_jobs(
            self._children, starts, self._rng, self._scenario.job_seconds, self._paths, self.fault_windows
        )

    async def _memory_hog(self) -> None:
        """One job holding all available memory and part of the swap, from a third of the run to its end."""
        await asyncio.sleep(self._duration / 3)
        spare = psutil.virtual_memory().available + min(psutil.swap_memory().free // 2, 2**30)
        seconds = round(self._duration * 2 / 3, 1)
        began = time.time()
        self._children.start(
            [sys.executable, "-m", "testbed.job", "--seconds", str(seconds),
             "--memory-mb", str(spare // 2**20), "--threads", "0"],
            self._paths.root / "job.log",
        )  # fmt: skip
        self.fault_windows.append((began, began + seconds))


async def run_jobs(
    children: Children,
    starts: Iterator[float],
    rng: np.random.Generator,
    job_seconds: tuple[float, float],
    paths: RunPaths,
    windows: list[tuple[float, float]],
) -> None:
    """The co-located job at each of ``starts`` (seconds from now), for a length drawn from ``job_seconds``
    just before it starts, one at a time; each run's span appended to ``windows``."""
    quick, slow = job_seconds
    origin = time.monotonic()
    for start in starts:
        await asyncio.sleep(max(0.0, origin + start - time.monotonic()))
        seconds = round(float(rng.uniform(quick, slow)), 1)
        began = time.time()
        job = children.start(
            [sys.executable, "-m", "testbed.job", "--seconds", str(seconds), "--memory-mb", "512"],
            paths.root / "job.log",
        )
        windows.append((began, began + seconds))
        await asyncio.to_thread(job.wait)


def write_truth(
    paths: RunPaths,
    scenario: Scenario,
    duration_s: float,
    seed: int,
    started: float,
    load_start: float,
    windows: list[tuple[float, float]],
    result,
    ramp_to_rps: float | None,
    strength: dict | None = None,
    more: dict | None = None,
) -> None:
    """truth.yaml: what was injected and when, the load, and ``more`` (an engine run's own facts)."""
    if not windows and scenario.cause is not None:
        windows = [(load_start + scenario.fault_from * duration_s, load_start + duration_s)]
    truth = {
        "scenario": scenario.name,
        "cause": scenario.cause,
        "summary": scenario.summary,
        "duration_s": duration_s,
        "seed": seed,
        "recording_start": round(started, 3),
        "load_start": round(load_start, 3),
        "fault_windows": [[round(a, 3), round(b, 3)] for a, b in windows],
        "load": {
            "rate_rps": scenario.rate_rps,
            "ramp_to_rps": ramp_to_rps,
            "ramp_to_capacity": scenario.ramp_to_capacity,
            "sent": result.sent,
            "ok": result.ok,
            "failed": result.failed,
            "not_sent": result.skipped,
        },
        "service_args": list(scenario.service_args),
        **({"strength": strength} if strength else {}),
        "host": {"cpus": psutil.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1)},
        **(more or {}),
    }
    paths.truth.write_text(yaml.safe_dump(truth, sort_keys=False), encoding="utf-8")


def runs_under(folders: list[Path]) -> Iterator[Path]:
    """Every run folder (one holding truth.yaml) at or below the given folders, in name order."""
    for folder in folders:
        if (folder / "truth.yaml").is_file():
            yield folder
        else:
            yield from sorted(p.parent for p in folder.glob("*/truth.yaml"))
