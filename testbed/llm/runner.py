"""Run one engine scenario end to end: start llama.cpp's server on the tiny model, measure what it
serves, record it with ``diagnose record`` as its users would (its ``/metrics``, its log, a gateway's
request log), drive the streaming load, inject the fault, and write the dump and ``truth.yaml``.

The processes are started and stopped as testbed.runner starts and stops the
encoder service's (its ``Children``: nothing outlives the run). The request log
is written by the load's client, as a gateway in front of the engine writes
one: llama.cpp's server keeps no access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np

from testbed.llm import engine
from testbed.llm.scenarios import EngineScenario
from testbed.llm.stream import completion_body, drive_stream, stream_one
from testbed.load import LoadPlan, LoadResult, PromptMaker, Request, measure_capacity, schedule
from testbed.runner import (
    Children,
    LoadProgress,
    RunError,
    RunPaths,
    free_port,
    run_jobs,
    settings_options,
    write_truth,
)
from testbed.scenarios import cron_ticks
from testbed.tokenizer import words

_STARTUP_TIMEOUT_S = 120.0
_CAPACITY_SECONDS = 12.0


def run(
    scenario: EngineScenario,
    duration_s: float,
    out: Path,
    seed: int = 0,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] = lambda _: None,
) -> Path:
    """Run ``scenario`` for ``duration_s`` seconds into ``out``; return the dump folder."""
    paths = RunPaths(out)
    if out.exists() and any(out.iterdir()):
        raise RunError(f"{out}: exists and is not empty; give a new folder")
    try:
        built = engine.ensure(say)
    except engine.EngineUnavailable as error:
        raise RunError(f"{scenario.name}: cannot run here: {error}") from None
    model = engine.model(words(), seed=0)  # one model for every run: the seed varies the load
    paths.requests_log.parent.mkdir(parents=True, exist_ok=True)
    with Children() as children:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        progress(f"testbed: {scenario.name}: starting llama.cpp's server")
        server = _start_server(children, built, model, scenario, port, paths)
        _wait_ready(url, server, paths)
        tokens_per_word = _tokens_per_word(url)
        prompts = PromptMaker(words(), seed, tokens_per_word)
        progress(f"testbed: {scenario.name}: measuring what the server serves")
        mix = schedule(LoadPlan(60.0, 1.0, seed=seed))
        capacity = asyncio.run(_capacity(url, mix, PromptMaker(words(), seed + 1, tokens_per_word), scenario))
        rate = round(scenario.load * capacity, 2)
        ramp_to = None if scenario.ramp_to is None else round(scenario.ramp_to * capacity, 2)
        say(
            f"testbed: {scenario.name}: the server serves {capacity:.1f} requests/s of the trace's mix "
            f"({tokens_per_word:.2f} tokens a word); load {rate:g}/s"
            + (f" to {ramp_to:g}/s" if ramp_to else "")
        )
        started = time.time()
        recorder = children.start(
            [
                sys.executable, "-m", "diagnose", "record", "-o", str(paths.dump),
                "--duration", f"{duration_s + 3:.0f}s", "--requests-log", str(paths.requests_log),
                "--metrics-url", f"{url}/metrics", "--pid", str(server.pid),
                "--log", str(paths.service_output), *settings_options(scenario),
            ],
            paths.root / "recorder.log",
        )  # fmt: skip
        time.sleep(2.0)
        plan = LoadPlan(duration_s, rate, ramp_to, seed=seed)
        load_start = time.time()
        injector = _Injector(children, built, model, scenario, duration_s, port, paths, seed)
        result = asyncio.run(
            _drive_and_inject(url, plan, prompts, paths, injector, LoadProgress(scenario.name, progress))
        )
        say(f"testbed: {scenario.name}: {result.summary()}")
        progress(f"testbed: {scenario.name}: waiting for the recorder to write the dump")
        if recorder.wait(timeout=duration_s + 60) != 0:
            raise RunError(f"diagnose record failed; see {paths.root / 'recorder.log'}")
    engine_facts = {
        "engine": "llama.cpp server",
        "llama_cpp_python": built.version,
        "capacity_rps": round(capacity, 2),
        "tokens_per_word": round(tokens_per_word, 3),
        "server_options": scenario.server_options(),
    }
    windows = injector.fault_windows
    truth_scenario = _ForTruth(scenario, rate, ramp_to)
    more = {"engine": engine_facts}
    write_truth(
        paths, truth_scenario, duration_s, seed, started, load_start, windows, result, ramp_to, more=more
    )
    return paths.dump


class _ForTruth:
    """The scenario as truth.yaml's writer reads it, with the rates this machine's capacity set."""

    def __init__(self, scenario: EngineScenario, rate: float, ramp_to: float | None) -> None:
        self.name, self.cause, self.summary = scenario.name, scenario.cause, scenario.summary
        self.fault_from, self.service_args = scenario.fault_from, scenario.server_options()
        self.rate_rps, self.ramp_to_capacity = rate, scenario.ramp_to


async def _drive_and_inject(
    url: str, plan: LoadPlan, prompts: PromptMaker, paths: RunPaths, injector: _Injector, shown: LoadProgress
) -> LoadResult:
    result = LoadResult()
    faults = asyncio.create_task(injector.run())
    ticker = asyncio.create_task(shown.run(plan.duration_s, result, injector))
    try:
        requests = with_long_prompts(schedule(plan), injector.scenario, plan.seed)
        return await drive_stream(url, requests, prompts, paths.requests_log, result=result)
    finally:
        for task in (faults, ticker):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def with_long_prompts(requests: list[Request], scenario: EngineScenario, seed: int) -> list[Request]:
    """The scenario's share of the requests, drawn from the seed, made long prompts with short answers."""
    if not scenario.long_prompt_share:
        return requests
    rng = np.random.default_rng(seed + 11)
    chosen = rng.random(len(requests)) < scenario.long_prompt_share
    return [
        replace(r, prompt_tokens=scenario.long_prompt_tokens, max_tokens=min(r.max_tokens, 32)) if long else r
        for r, long in zip(requests, chosen, strict=True)
    ]


def _threads(value: str) -> str:
    """``--threads 8x``: eight a core of this machine."""
    return str(int(value[:-1]) * (os.cpu_count() or 1)) if value.endswith("x") else value


def _start_server(children: Children, built: engine.Engine, model: Path, scenario: EngineScenario, port: int,
                  paths: RunPaths) -> subprocess.Popen:  # fmt: skip
    given = scenario.server_options()
    threads = ("--threads", "--threads-batch")
    options = [_threads(v) if k in threads else v for k, v in zip(["", *given[:-1]], given, strict=True)]
    command = [
        str(built.server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--metrics",
        "--no-webui", *options,
    ]  # fmt: skip
    return children.start(command, paths.service_output)


def _wait_ready(url: str, server: subprocess.Popen, paths: RunPaths) -> None:
    """Until /health answers 200: the server answers 503 while the model loads."""
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            code = server.returncode
            raise RunError(f"llama.cpp's server exited at start-up (code {code}); see {paths.service_output}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise RunError(f"llama.cpp's server did not answer {url}/health within {_STARTUP_TIMEOUT_S:.0f} s")


def _tokens_per_word(url: str) -> float:
    """How many of this model's tokens a prompt word costs, asked of the server's own tokenizer."""
    text = " ".join(words()[:2_000])
    request = urllib.request.Request(
        f"{url}/tokenize", data=json.dumps({"content": text}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        tokens = json.loads(response.read())["tokens"]
    return len(tokens) / 2_000


async def _capacity(url: str, mix: list[Request], prompts: PromptMaker, scenario: EngineScenario) -> float:
    """Requests a second the server completes when never idle (testbed.load's measure_capacity): twice its
    slots of streaming clients in a closed loop on the load's own mix."""

    async def streamed(client: httpx.AsyncClient, prompt: str, request: Request) -> bool:
        return (await stream_one(client, completion_body(prompt, request.max_tokens))).status == "ok"

    try:
        return await measure_capacity(
            url, mix, prompts, _CAPACITY_SECONDS, 2 * scenario.slots, timeout_s=60.0, complete=streamed
        )
    except RuntimeError as error:
        raise RunError(f"llama.cpp's server: {error}") from None


class _Injector:
    """The scenario's timed events: stop and resume the server, restart it, start the co-located job."""

    def __init__(self, children: Children, built: engine.Engine, model: Path, scenario: EngineScenario,
                 duration_s: float, port: int, paths: RunPaths, seed: int) -> None:  # fmt: skip
        self._children, self._built, self._model, self.scenario = children, built, model, scenario
        self._duration, self._port, self._paths = duration_s, port, paths
        self._rng = np.random.default_rng(seed + 7)
        self.fault_windows: list[tuple[float, float]] = []

    async def run(self) -> None:
        scenario = self.scenario
        if scenario.stop_at is not None:
            await asyncio.sleep(scenario.stop_at * self._duration)
            await self._stop_and_resume()
        elif scenario.restart_at is not None:
            await asyncio.sleep(scenario.restart_at * self._duration)
            await self._restart()
        elif scenario.job_period_s is not None:
            await self._jobs()

    def _server(self) -> subprocess.Popen:
        return next(p for p in reversed(self._children.processes) if str(self._built.server) in p.args)

    async def _stop_and_resume(self) -> None:
        server = self._server()
        began = time.time()
        server.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(self.scenario.stop_seconds)
        finally:
            server.send_signal(signal.SIGCONT)
        self.fault_windows.append((began, time.time()))

    async def _restart(self) -> None:
        await asyncio.to_thread(self._children.stop, self._server())
        began = time.time()
        server = _start_server(
            self._children, self._built, self._model, self.scenario, self._port, self._paths
        )
        await asyncio.to_thread(_wait_ready, f"http://127.0.0.1:{self._port}", server, self._paths)
        self.fault_windows.append((began, began + 60.0))

    async def _jobs(self) -> None:
        assert self.scenario.job_period_s is not None  # run() asked
        starts = cron_ticks(self.scenario.job_period_s, self._rng, self._duration)
        await run_jobs(
            self._children, starts, self._rng, self.scenario.job_seconds, self._paths, self.fault_windows
        )
