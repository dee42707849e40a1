"""The load engine: Locust used as a library, in a process of its own.

    python -m diagnose.load.engine RUN.json OUT/        (what ``diagnose load`` starts)

Importing Locust patches the standard library with gevent, so nothing else of diagnose imports this
module: ``diagnose load`` starts it as a child, and Locust's workers load it through
``locustfile.py``. The child runs the sweep (sweep.py, plain Python) with a Locust runner underneath:
a ``LocalRunner``, or a ``MasterRunner`` whose workers are ``locust --worker`` processes started by
the user, on this machine or others (docs/load.md).

Each Locust process runs one ``Dispatcher`` user. For each stage it receives (Locust's custom
messages, so the same code runs local and distributed) it draws its share of the arrivals, a Poisson
stream at rate / processes, and sends each request at its time in a greenlet of its own: open loop,
so a slow service meets the same traffic, as in production. Only the baseline is a closed loop (one
request at a time, by design). Each request is also fired as a Locust request event, so Locust's own
statistics and web UI see the run. The rows go back to the runner in messages, and the child writes
``requests.jsonl`` (the dump format's columns), ``manifest.yaml`` and ``capacity.json``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import gevent.pool
import gevent.queue
import locust  # noqa: I001 - first of all: gevent patches the standard library as Locust is imported
import numpy as np
import pandas as pd
import requests
from locust import User, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from diagnose.engines.metrics import parse_families
from diagnose.errors import DiagnoseError, ExitCode, LoadError
from diagnose.load.plan import (
    Api,
    Prompt,
    Settings,
    Stage,
    StageKind,
    Target,
    error_said,
    prompt_from_json,
    stage_from_json,
    target_from_json,
    to_json,
)
from diagnose.load.sweep import StageRun, run_sweep
from diagnose.load.workload import (
    Replay,
    poisson_arrivals,
    prompts_for,
    replay_arrivals,
    replay_prompts,
    stage_seed,
)

STAGE_MESSAGE = "diagnose_stage"
ROWS_MESSAGE = "diagnose_rows"
MAX_OUTSTANDING = 2_000  # requests waiting at once per process: past this the service is far past its knee
ROWS_PER_MESSAGE = 2_000
# Every process gets the stage before its first arrival: Locust workers by message, a run's one process at
# once (a second a stage there would be waiting for nothing, a minute over a long sweep).
WORKERS_START_DELAY_S = 1.0
LOCAL_START_DELAY_S = 0.2
MEMORY_EVERY_S = 1.0
BASELINE_TRIES = 5
COLUMNS = (
    "ts",
    "latency_ms",
    "ttft_ms",
    "tpot_ms",
    "output_len",
    "input_words",
    "status",
    "code",
    "error",
    "lag_ms",
    "sender",
)


class Dispatcher(User):
    """One per Locust process: sends each stage's arrivals when they fall due."""

    def on_start(self) -> None:
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=MAX_OUTSTANDING)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    @task
    def next_stage(self) -> None:
        order = _inbox(self.environment).get()
        rows = self._run(order)
        runner = self.environment.runner
        assert runner is not None
        chunks = [rows[i : i + ROWS_PER_MESSAGE] for i in range(0, len(rows), ROWS_PER_MESSAGE)] or [[]]
        for number, chunk in enumerate(chunks):
            last = number == len(chunks) - 1
            runner.send_message(ROWS_MESSAGE, {"stage": order["stage"]["index"], "rows": chunk, "last": last})

    def _run(self, order: dict[str, Any]) -> list[dict[str, Any]]:
        stage = stage_from_json(order["stage"])
        target = target_from_json(order["target"])
        pool = [prompt_from_json(p) for p in order["prompts"]]
        replay = Replay(**order["replay"]) if order.get("replay") else None
        start_at, stream, processes = order["start_at"], _index(self.environment), order["processes"]
        rows: list[dict[str, Any]] = []
        gevent.sleep(max(0.0, start_at - time.time()))
        prompts: Iterable[Prompt]
        if stage.kind is StageKind.BASELINE:
            if stream == 0:  # one request at a time, from one process only
                if replay is not None:
                    prompts = replay_prompts(replay, np.arange(min(10_000, len(replay.gaps))), order["seed"])
                else:
                    prompts = prompts_for(pool, 10_000, order["seed"] + stage.index)
                for prompt in prompts:
                    if time.time() >= start_at + stage.duration_s or _refused(rows):
                        break
                    rows.append(self._send(target, prompt, stage.name, time.time()))
            return rows
        assert stage.rate_rps is not None
        seed = order["seed"] + stage.index
        if replay is not None:  # the log's own gaps and lengths, scaled to the stage's rate
            arrivals, which = replay_arrivals(
                replay, stage.rate_rps, stage.duration_s, seed, stream, processes
            )
            prompts = replay_prompts(replay, which, stage_seed(order["seed"], stage.index, stream))
        else:
            arrivals = poisson_arrivals(stage.rate_rps / processes, stage.duration_s, seed, stream)
            prompts = prompts_for(pool, len(arrivals), stage_seed(order["seed"], stage.index, stream))
        group = gevent.pool.Group()
        for at, prompt in zip(arrivals, prompts, strict=True):
            due = start_at + float(at)
            gevent.sleep(max(0.0, due - time.time()))
            if len(group) >= MAX_OUTSTANDING:
                note = f"not sent: {MAX_OUTSTANDING} requests outstanding"
                rows.append(_row(due, prompt, "error", stream, error=note))
                continue
            group.spawn(lambda p=prompt, d=due: rows.append(self._send(target, p, stage.name, d)))
        group.join()
        return rows

    def _send(self, target: Target, prompt: Prompt, name: str, due: float) -> dict[str, Any]:
        sent = time.time()
        row = _row(sent, prompt, "ok", _index(self.environment), lag_ms=(sent - due) * 1000)
        try:
            with gevent.Timeout(target.timeout_s, TimeoutError):
                _exchange(self.session, target, prompt, row, sent)
        except TimeoutError:
            _fail(row, "timeout", f"no whole answer within {target.timeout_s:g} s")
        except requests.RequestException as error:
            _fail(row, "error", _short(error))
        except ValueError as error:  # a stream whose events are not JSON: the answer is not OpenAI's
            _fail(row, "error", f"an answer that is not the API's: {_short(error)}")
        failed = row["status"] != "ok"
        latency = (time.time() - sent) * 1000 if failed else row["latency_ms"]
        self.environment.events.request.fire(
            request_type="POST",
            name=name,
            response_time=latency,
            response_length=0,
            exception=RuntimeError(row["error"]) if failed else None,
            context={},
        )
        return row


def _refused(rows: list[dict[str, Any]]) -> bool:
    """The first BASELINE_TRIES requests alone all failed: the run stops with what the service said."""
    return len(rows) >= BASELINE_TRIES and all(row["status"] != "ok" for row in rows)


def _row(
    sent: float, prompt: Prompt, status: str, sender: int, error: str = "", lag_ms: float = 0.0
) -> dict[str, Any]:
    """One request as the dump's requests table holds it (plus how late it was sent)."""
    nan = float("nan")
    return {
        "ts": sent,
        "latency_ms": nan,
        "ttft_ms": nan,
        "tpot_ms": nan,
        "output_len": nan,
        "input_words": prompt.words,
        "status": status,
        "code": 0,
        "error": error,
        "lag_ms": lag_ms,
        "sender": sender,  # which Locust process sent it (0 alone; a worker's index, distributed)
    }


def _fail(row: dict[str, Any], status: str, error: str) -> None:
    row["status"], row["error"] = status, error


def _short(error: Exception) -> str:
    text = str(error)
    return (text[:160] + "...") if len(text) > 160 else text


def _exchange(
    session: requests.Session, target: Target, prompt: Prompt, row: dict[str, Any], sent: float
) -> None:
    """One request, its answer read to the end: the row's latency, and for a stream TTFT, TPOT and
    the tokens (the usage the server reports, else one per content chunk)."""
    streamed = target.api is not Api.HTTP
    with session.post(
        target.url,
        json=_body(target, prompt),
        headers=target.headers,
        stream=streamed,
        timeout=target.timeout_s,
    ) as response:
        row["code"] = response.status_code
        if response.status_code != 200:
            _fail(row, "error", f"HTTP {response.status_code}: {error_said(response.text)}")
            return
        if not streamed:
            answer = response.content
            row["latency_ms"] = (time.time() - sent) * 1000
            row["output_len"] = _usage_tokens(answer)
            return
        first, chunks, usage = None, 0, None
        for line in response.iter_lines():
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if event.get("usage"):
                usage = event["usage"].get("completion_tokens")
            if _has_content(event):
                chunks += 1
                first = first or time.time()
        ended = time.time()
    row["latency_ms"] = (ended - sent) * 1000
    tokens = usage if isinstance(usage, int) and usage > 0 else chunks
    row["output_len"] = tokens
    if first is not None:
        row["ttft_ms"] = (first - sent) * 1000
        if tokens > 1:
            row["tpot_ms"] = (ended - first) * 1000 / (tokens - 1)


def _has_content(event: dict[str, Any]) -> bool:
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or choice.get("text"):
            return True
    return False


def _usage_tokens(answer: bytes) -> float:
    try:
        usage = json.loads(answer).get("usage") or {}
    except (ValueError, AttributeError):
        return float("nan")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return float(tokens) if isinstance(tokens, int) else float("nan")


def _body(target: Target, prompt: Prompt) -> dict[str, Any]:
    if target.api is Api.CHAT:
        return {
            **({"model": target.model} if target.model else {}),
            "messages": [{"role": "user", "content": prompt.text}],
            "max_tokens": prompt.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    if target.api is Api.COMPLETIONS:
        return {
            **({"model": target.model} if target.model else {}),
            "prompt": prompt.text,
            "max_tokens": prompt.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    return _fill(target.body or {"prompt": "{{prompt}}", "max_tokens": "{{max_tokens}}"}, prompt)


def _fill(template: Any, prompt: Prompt) -> Any:
    """The body template with "{{prompt}}" and "{{max_tokens}}" replaced wherever they are a whole value."""
    if template == "{{prompt}}":
        return prompt.text
    if template == "{{max_tokens}}":
        return prompt.max_tokens
    if isinstance(template, dict):
        return {key: _fill(value, prompt) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, prompt) for value in template]
    return template


def _inbox(environment: Environment) -> gevent.queue.Queue:
    inbox = getattr(environment, "diagnose_inbox", None)
    if inbox is None:
        inbox = gevent.queue.Queue()
        environment.diagnose_inbox = inbox  # type: ignore[attr-defined]
    return inbox


def _index(environment: Environment) -> int:
    runner = environment.runner
    return runner.worker_index if isinstance(runner, WorkerRunner) else 0


def listen_for_stages(environment: Environment) -> None:
    """A process that sends load: each stage message goes to its dispatcher's inbox."""
    assert environment.runner is not None
    environment.runner.register_message(
        STAGE_MESSAGE, lambda environment, msg, **_: _inbox(environment).put(msg.data)
    )


class Conductor:
    """The process that runs the sweep: sends each stage to every dispatcher and gathers the rows."""

    def __init__(
        self,
        environment: Environment,
        target: Target,
        prompts: list[Prompt],
        settings: Settings,
        metrics_url: str | None,
        replay: dict[str, Any] | None = None,
    ) -> None:
        self.environment = environment
        self.target = target
        self.prompts = [to_json(p) for p in prompts] if replay is None else []
        self.replay = replay
        self.settings = settings
        self.metrics_url = metrics_url
        self._rows: list[dict[str, Any]] = []
        self._finished = 0
        self._all_in = gevent.event.Event()
        assert environment.runner is not None
        environment.runner.register_message(ROWS_MESSAGE, self._received)

    def _received(self, environment: Environment, msg: Any, **_: Any) -> None:
        self._rows.extend(msg.data["rows"])
        if msg.data["last"]:
            self._finished += 1
            if self._finished >= self.settings.processes:
                self._all_in.set()

    def run_stage(self, stage: Stage) -> StageRun:
        self._rows, self._finished = [], 0
        self._all_in.clear()
        delay = WORKERS_START_DELAY_S if self.settings.processes > 1 else LOCAL_START_DELAY_S
        started = time.time() + delay
        order = {
            "stage": to_json(stage),
            "target": to_json(self.target),
            "prompts": self.prompts,
            "replay": self.replay,
            "start_at": started,
            "processes": self.settings.processes,
            "seed": self.settings.seed,
        }
        runner = self.environment.runner
        assert runner is not None
        memory: list[tuple[float, float]] = []
        sampler = gevent.spawn(self._sample_memory, memory) if stage.kind is StageKind.SOAK else None
        runner.send_message(STAGE_MESSAGE, order)
        self._all_in.wait()
        if sampler is not None:
            sampler.kill()
        rows = pd.DataFrame(self._rows, columns=list(COLUMNS))
        frame = pd.DataFrame(memory, columns=["ts", "rss_bytes"]).assign(source=f"{self.metrics_url}")
        return StageRun(rows, started, frame if len(memory) else None)

    def _sample_memory(self, memory: list[tuple[float, float]]) -> None:
        """The server's resident memory from its /metrics, where it says it (prometheus_client does)."""
        if not self.metrics_url:
            return
        session = requests.Session()
        while True:
            try:
                text = session.get(self.metrics_url, timeout=2).text
            except requests.RequestException:
                return
            value = _resident(text)
            if value is None:
                return
            memory.append((time.time(), value))
            gevent.sleep(MEMORY_EVERY_S)


def _resident(exposition: str) -> float | None:
    """``process_resident_memory_bytes`` from a /metrics page, read by prometheus_client's parser."""
    try:
        families = list(parse_families(exposition))
    except ValueError:  # not Prometheus text: nothing to read
        return None
    for family in families:
        for sample in family.samples:
            if sample.name == "process_resident_memory_bytes":
                return float(sample.value)
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run_file, out = Path(args[0]), Path(args[1])
    run = json.loads(run_file.read_text(encoding="utf-8"))
    target = target_from_json(run["target"])
    settings = Settings(**run["settings"])
    prompts = [prompt_from_json(p) for p in run["prompts"]]
    environment = Environment(user_classes=[Dispatcher], events=locust.events)
    if settings.processes > 1:
        environment.create_master_runner(run.get("master_bind", "127.0.0.1"), run.get("master_port", 5557))
    else:
        environment.create_local_runner()
        listen_for_stages(environment)
    conductor = Conductor(environment, target, prompts, settings, run.get("metrics_url"), run.get("replay"))
    runner = environment.runner
    assert runner is not None
    try:
        if isinstance(runner, MasterRunner):
            _wait_for_workers(runner, settings.processes, run.get("workers_timeout_s", 120.0))
        runner.start(settings.processes, spawn_rate=settings.processes)
        sweep = run_sweep(
            conductor.run_stage, settings, say=lambda line: print(line, file=sys.stderr, flush=True)
        )
    except DiagnoseError as error:
        print(f"diagnose: error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        runner.quit()
    from diagnose.load.report import write_run

    write_run(replace(sweep, notes=[*run.get("notes", []), *sweep.notes]), target, out)
    return ExitCode.OK


def _wait_for_workers(runner: MasterRunner, count: int, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    print(
        f"waiting for {count} Locust workers (locust --worker -f ...; docs/load.md)",
        file=sys.stderr,
        flush=True,
    )
    while runner.worker_count < count:
        if time.time() > deadline:
            raise LoadError(
                f"{runner.worker_count} of {count} Locust workers connected within {timeout_s:.0f} s "
                "(each started with: locust --worker -f $(diagnose load --locustfile) --master-host HOST)"
            )
        gevent.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
