"""The services benchmarks/bench_load.py loads, each with a capacity known apart from ``diagnose load``:
the testbed's paced service (its capacity set by its configuration) and llama.cpp's server (its capacity
measured by a closed loop that never lets it idle)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from diagnose.load.plan import Prompt
from tests.helpers.service import free_port

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Paced:
    """A configuration of the testbed's service whose capacity its settings set: model workers each
    sleeping ``step_ms`` a call, or one batcher that fills batches of up to ``batch`` for at most
    ``window_ms`` and runs one at a time (so a batched service's workers add nothing)."""

    workers: int
    step_ms: float
    batch: int = 1
    window_ms: float = 0.0

    @property
    def at_once(self) -> int:
        """Requests the service runs at once: a batch, or one a worker."""
        return self.batch if self.batch > 1 else self.workers

    @property
    def capacity_rps(self) -> float:
        return self.at_once * 1000 / self.step_ms

    @property
    def label(self) -> str:
        if self.batch > 1:
            return f"batches of {self.batch} x {self.step_ms:g} ms, {self.window_ms:g} ms window"
        return f"{self.workers} x {self.step_ms:g} ms"

    @property
    def name(self) -> str:
        if self.batch > 1:
            return f"b{self.batch}x{self.step_ms:g}w{self.window_ms:g}"
        return f"{self.workers}x{self.step_ms:g}"

    def service_args(self) -> tuple[str, ...]:
        if self.batch <= 1:
            return ()
        return ("--max-batch", str(self.batch), "--batch-window-ms", f"{self.window_ms:g}")

    def clients(self) -> int:
        """A closed loop that never lets the service idle: four waiting for each request it runs."""
        return 4 * self.at_once


CONFIGURATIONS = (
    Paced(1, 50.0),
    Paced(4, 100.0),
    Paced(8, 400.0),
    Paced(2, 20.0),
    Paced(1, 100.0, batch=8, window_ms=20.0),
    Paced(1, 200.0, batch=4, window_ms=50.0),
)
SLOTS = (2, 4)  # llama.cpp's --parallel: the real engine's configurations


class _Served:
    """A server process on a port of its own, answering /health, stopped on leaving the ``with``."""

    def _start(self, command: list[str], url: str, cores: set[int] | None = None) -> None:
        self.url = url
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if cores:  # before its threads start: they inherit it
            os.sched_setaffinity(self.process.pid, cores)
        try:
            _wait_healthy(url)
        except RuntimeError:
            self.__exit__()
            raise

    def __enter__(self) -> _Served:
        return self

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


class Service(_Served):
    """The testbed's service, paced, on a port of its own; optionally pinned to some cores."""

    def __init__(self, workers: int, step_ms: float, *extra: str, cores: set[int] | None = None) -> None:
        port = free_port()
        self.log = Path(tempfile.mkdtemp(prefix="bench-load-")) / "service.jsonl"
        command = [
            sys.executable, "-m", "testbed.service", "--port", str(port), "--log", str(self.log),
            "--model-workers", str(workers), "--step-ms", str(step_ms), *extra,
        ]  # fmt: skip
        self._start(command, f"http://127.0.0.1:{port}", cores)


class LlamaServer(_Served):
    """llama.cpp's server (built first where this machine has no build: five to nine minutes) serving
    the testbed's tiny model with ``slots`` slots, each with the context the engine scenarios give one."""

    def __init__(self, slots: int) -> None:
        from testbed.llm import engine
        from testbed.llm.scenarios import SLOT_CONTEXT
        from testbed.tokenizer import words

        built = engine.ensure(say=lambda line: print(line, file=sys.stderr))
        port = free_port()
        command = [
            str(built.server), "-m", str(engine.model(words())), "--host", "127.0.0.1", "--port", str(port),
            "--metrics", "--no-webui", "--parallel", str(slots), "-c", str(slots * SLOT_CONTEXT),
        ]  # fmt: skip
        self._start(command, f"http://127.0.0.1:{port}")


def completion_bodies(prompts: Iterable[Prompt]) -> list[bytes]:
    """Streamed /v1/completions bodies of these prompts (send each once: llama.cpp's server answers a
    prompt it has seen from its cache, faster)."""
    return [
        json.dumps({"prompt": p.text, "max_tokens": p.max_tokens, "stream": True}).encode() for p in prompts
    ]


_JSON = {"Content-Type": "application/json"}


def saturated_rps(endpoint: str, bodies: list[bytes], clients: int, seconds: float) -> float:
    """What the service completes when it is never idle, measured apart from diagnose load: a closed loop
    of ``clients`` each sending the next body when its answer came (read to its end, a stream too),
    counted after the first fifth.

    Each client keeps its connection open, as diagnose load's engine (and any client of a busy service)
    does: a connection a request costs the service its own work, about 3 % of a batched service's
    capacity at 75 req/s, which would then be measured as less than the load sees."""
    done: list[float] = []
    start = time.monotonic()
    parts = urlsplit(endpoint)

    def client(first: int) -> None:
        k = first
        connection = http.client.HTTPConnection(parts.netloc, timeout=60)
        try:
            while time.monotonic() - start < seconds:
                response = _post(connection, parts.path, bodies[k % len(bodies)])
                if response.status != 200:
                    raise RuntimeError(f"{endpoint} answered {response.status} under a closed loop")
                done.append(time.monotonic() - start)
                k += clients
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counted = [t for t in done if seconds / 5 <= t <= seconds]
    return len(counted) / (seconds * 4 / 5)


def _post(connection: http.client.HTTPConnection, path: str, body: bytes) -> http.client.HTTPResponse:
    """The answer, read to its end, on the kept connection; on a new one where the server had closed it
    (llama.cpp's server closes a connection after a streamed answer without saying so)."""
    try:
        return _answer(connection, path, body)
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
        connection.close()  # the next request opens a new one
        return _answer(connection, path, body)


def _answer(connection: http.client.HTTPConnection, path: str, body: bytes) -> http.client.HTTPResponse:
    connection.request("POST", path, body=body, headers=_JSON)
    response = connection.getresponse()
    response.read()
    return response


GENERATE_BODY = [json.dumps({"prompt": "a short prompt of a few words", "max_tokens": 4}).encode()]


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=0.5).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer /health within 60 s")
