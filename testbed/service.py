"""The testbed's inference service: a real ASGI app, tokenizer, model, batcher, metrics and request log.

    python -m testbed.service --port 8700 --log requests.jsonl [--max-batch 8 --batch-window-ms 5]

``POST /generate`` with ``{"prompt": "...", "max_tokens": 16}`` tokenises the
prompt on the tokenizer thread, runs the model on the model thread (through a
dynamic batcher when ``--max-batch`` is above 1), and answers with the tokens
ranked highest at the last position. ``GET /metrics`` is Prometheus text
(``prometheus_client``), ``GET /health`` says whether it is up, and ``POST
/start_profile`` turns a deterministic profiler (``cProfile``) on in every
thread, as serving engines' endpoints of that name do, and says so in the
service's log; ``POST /admin/release_memory`` hands the model's free memory
back once, as a service's memory-tidying endpoint does. A watchdog thread
says in that log when a model step has not returned for 60 s, as serving
engines' watchdogs do; ``POST /fault/hang`` injects such a stall (a thread
holding the model's lock while it waits on a peer that never answers).

Each request is one JSON line in the dump format's ``requests`` columns. The
client's send time (header ``x-sent-at``, epoch seconds; client and service
share the host's clock) is the arrival, so ``stage_network_ms`` holds the time
before the handler ran, waiting for the event loop included.

The tokenizer and the model are made on the first request, not at start-up,
as many services do lazily: the requests that arrive meanwhile pay for it.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import os
import queue
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from testbed.model import MAX_LEN, VOCAB, Model
from testbed.service_options import Settings, parse
from testbed.tokenizer import TextCodec, train

MAX_ANSWER_TOKENS = 64
# A model step running longer is reported, as serving engines' watchdogs do: vLLM's default iteration
# timeout. Well above this service's longest real step (a batch of 64 long prompts: 20-30 s).
WATCHDOG_S = 60.0

LATENCY = Histogram(
    "testbed_request_latency_seconds",
    "End-to-end latency of /generate, from the client's send",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
REQUESTS = Counter("testbed_requests", "Requests answered", ["status"])
WAITING = Gauge("testbed_queue_depth", "Requests waiting for the model")
RUNNING = Gauge("testbed_running", "Requests in the model now")
TOKENS = Counter("testbed_generated_tokens", "Answer tokens generated")
BATCH = Histogram("testbed_batch_size", "Requests per model call", buckets=(1, 2, 4, 8, 16, 32, 64))


@dataclass
class _Pending:
    ids: list[int]
    queued: float  # perf_counter when it joined the batcher's queue
    done: asyncio.Future


@dataclass
class Service:
    settings: Settings
    codec: TextCodec | None = None
    models: list[Model] = field(default_factory=list)
    _idle_models: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _init_lock: threading.Lock = field(default_factory=threading.Lock)
    _queue: asyncio.Queue | None = None
    _log_lock: threading.Lock = field(default_factory=threading.Lock)
    _step_began: float | None = None  # monotonic start of the model step now running
    _leaked: list[bytearray] = field(default_factory=list)

    def __post_init__(self) -> None:
        start = self._start_profiler if self.settings.profile else None
        workers = self.settings.model_workers
        # Held by each model step: one at a time, or a slot each with several workers.
        self._step_lock = threading.Lock() if workers == 1 else threading.BoundedSemaphore(workers)
        self.tokenizer_pool = ThreadPoolExecutor(1, "tokenizer", initializer=start)
        self.model_pool = ThreadPoolExecutor(workers, "model", initializer=start)
        self._log = self.settings.log.open("a", encoding="utf-8", buffering=1)
        if self.settings.profile:
            self._start_profiler()  # the event loop's thread too
        threading.Thread(target=self._watchdog, name="watchdog", daemon=True).start()

    @staticmethod
    def _start_profiler() -> None:
        """A deterministic profiler left on, as after a debugging session: every call pays for it."""
        profiler = cProfile.Profile()
        profiler.enable()
        threading.current_thread().profiler = profiler  # kept alive for the thread's life

    async def start_profiling(self) -> None:
        """The profiler on in the event loop's thread and in each worker thread, from now on."""
        if self.settings.profile:
            return
        self.settings.profile = True
        self._start_profiler()
        loop = asyncio.get_running_loop()
        for pool in (self.tokenizer_pool, self.model_pool):
            await loop.run_in_executor(pool, self._start_profiler)
        _say("cProfile profiler started on every thread")

    def ready(self) -> TextCodec:
        """The tokenizer, and a model per worker, made by the first caller (lazily, like many services)."""
        with self._init_lock:
            if self.codec is not None and (self.models or self.settings.step_ms > 0):
                return self.codec
            began = time.perf_counter()
            if self.codec is None:
                self.codec = TextCodec(train())
            if not self.models and not self.settings.step_ms > 0:
                for worker in range(self.settings.model_workers):
                    self.models.append(
                        Model(
                            device=self.settings.device,
                            decomposed=self.settings.decomposed_graph,
                            optimizations=self.settings.graph_optimizations,
                            profile_to=self.settings.ort_profile if worker == 0 else None,
                            intra_op_threads=self.settings.intra_op_threads,
                            cleanup=self.settings.memory_cleanup,
                        )
                    )
                    self._idle_models.put(self.models[-1])
            time.sleep(max(0.0, self.settings.load_s - (time.perf_counter() - began)))  # the weights' load
            return self.codec

    def release_memory(self) -> None:
        """Each model hands its free memory back after its next forward."""
        for model in self.models:
            model.release_memory()
        _say("released the model's cached memory")

    def tokenize(self, prompt: str) -> tuple[list[int], float, float]:
        started = time.perf_counter()
        codec = self.ready()
        for _ in range(self.settings.tokenize_passes):
            ids = codec.encode(prompt, slow=self.settings.slow_tokenizer)
        return ids, started, time.perf_counter()

    def forward(self, batch: list[list[int]]) -> tuple[np.ndarray, float, float]:
        started = time.perf_counter()
        if self.settings.step_ms > 0:
            time.sleep(self.settings.step_ms / 1000)
            return np.zeros((len(batch), VOCAB), dtype="float32"), started, time.perf_counter()
        self.ready()
        model = self._idle_models.get()
        try:
            logits = model.forward([ids[-MAX_LEN:] for ids in batch])
        finally:
            self._idle_models.put(model)
        return logits, started, time.perf_counter()

    async def run_model(self, ids: list[int]) -> tuple[np.ndarray, dict[str, float], int]:
        """This request's logits, its waiting and forward times (ms), and the size of its batch."""
        loop = asyncio.get_running_loop()
        if self.settings.max_batch <= 1:
            WAITING.inc()
            submitted = time.perf_counter()
            logits, started, ended = await loop.run_in_executor(self.model_pool, self._counted_forward, [ids])
            return logits[0], {"queue": started - submitted, "forward": ended - started}, 1
        pending = _Pending(ids, time.perf_counter(), loop.create_future())
        WAITING.inc()
        await self._batch_queue().put(pending)
        logits, times, size = await pending.done
        return logits, times, size

    def _counted_forward(self, batch: list[list[int]]) -> tuple[np.ndarray, float, float]:
        """The forward, with the waiting and running gauges moved as the batch leaves one for the other."""
        WAITING.dec(len(batch))
        RUNNING.inc(len(batch))
        self._step_began = time.monotonic()
        try:
            with self._step_lock:
                return self.forward(batch)
        finally:
            self._step_began = None
            RUNNING.dec(len(batch))

    def _watchdog(self) -> None:
        """Say once per step when the model's step has not returned for WATCHDOG_S, as engines' do."""
        reported = None
        while True:
            time.sleep(1.0)
            began = self._step_began
            if began is not None and began != reported and time.monotonic() - began >= WATCHDOG_S:
                reported = began
                _say(f"Watchdog timeout: the model step has not returned for {WATCHDOG_S:.0f} s")

    def hang(self, seconds: float) -> None:
        """Fault: a helper thread takes the model's lock, then waits on a peer that never answers.

        As an exporter or checkpoint thread that holds the engine's lock while blocked on a dead
        connection: the model's next step waits for the lock, requests stay running, nothing is
        generated, until the socket's timeout lets go.
        """

        def stuck() -> None:
            ours, peer = socket.socketpair()
            with self._step_lock, ours, peer:
                ours.settimeout(seconds)
                try:
                    ours.recv(1)  # the peer never writes
                except TimeoutError:
                    pass

        threading.Thread(target=stuck, name="exporter", daemon=True).start()
        _say("exporter: connecting to the metrics sink")

    def _batch_queue(self) -> asyncio.Queue:
        if self._queue is None:
            self._queue = asyncio.Queue()
            asyncio.get_running_loop().create_task(self._batcher())
        return self._queue

    async def _batcher(self) -> None:
        """Take the first waiting request, wait up to the window for more (up to the batch size), run."""
        loop = asyncio.get_running_loop()
        window = self.settings.batch_window_ms / 1000
        while True:
            batch = [await self._queue.get()]
            formed = time.perf_counter()  # the batch starts forming: the model is free
            deadline = formed + window
            while len(batch) < self.settings.max_batch:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except TimeoutError:
                    break
            dispatched = time.perf_counter()
            BATCH.observe(len(batch))
            try:
                logits, started, ended = await loop.run_in_executor(
                    self.model_pool, self._counted_forward, [p.ids for p in batch]
                )
            except Exception as error:  # noqa: BLE001 - every waiting request learns of it
                for p in batch:
                    p.done.set_exception(error)
                continue
            for row, p in enumerate(batch):
                # Waiting while the previous batch ran is queueing; waiting for this one to fill is batching.
                joined = max(formed, p.queued)
                times = {
                    "batch_wait": dispatched - joined,
                    "queue": joined - p.queued + started - dispatched,
                    "forward": ended - started,
                }
                p.done.set_result((logits[row], times, len(batch)))

    def write(self, record: dict) -> None:
        with self._log_lock:
            self._log.write(json.dumps(record) + "\n")


def make_app(service: Service) -> Starlette:
    async def generate(request: Request) -> Response:
        handler_start = time.time()
        begun = time.perf_counter()
        sent = _float(request.headers.get("x-sent-at"), handler_start)
        record: dict = {"ts": round(sent, 6), "id": request.headers.get("x-request-id")}
        status, code = "ok", 200
        try:
            body = await request.json()
            prompt = str(body.get("prompt", ""))
            max_tokens = max(1, min(int(body.get("max_tokens", 16)), MAX_ANSWER_TOKENS))
            loop = asyncio.get_running_loop()
            submitted = time.perf_counter()
            if service.settings.tokenize_on_loop:
                # Blocks the event loop: every other request's handler waits, before any timer of its own
                # starts. Such a service logs neither that wait nor a network stage: it cannot see them.
                ids, tok_start, tok_end = service.tokenize(prompt)
            else:
                tokenized = loop.run_in_executor(service.tokenizer_pool, service.tokenize, prompt)
                ids, tok_start, tok_end = await tokenized
            logits, times, size = await service.run_model(ids)
            post_start = time.perf_counter()
            answer = np.argsort(logits)[::-1][:max_tokens].tolist()
            text = service.codec.decode(answer)
            post_end = time.perf_counter()
            if not service.settings.tokenize_on_loop:
                record.update(
                    stage_network_ms=_ms(handler_start - sent),
                    stage_tokenize_queue_ms=_ms(tok_start - submitted),  # waiting for the tokenizer thread
                )
            record.update(
                stage_queue_ms=_ms(times["queue"]),  # waiting for the model
                stage_tokenize_ms=_ms(tok_end - tok_start),
                stage_forward_ms=_ms(times["forward"]),
                stage_postprocess_ms=_ms(post_end - post_start),
                input_len=len(ids),
                output_len=len(answer),
                batch_size=size,
            )
            if "batch_wait" in times:
                record["stage_batch_wait_ms"] = _ms(times["batch_wait"])
            TOKENS.inc(len(answer))
            response: Response = JSONResponse({"text": text, "tokens": len(answer)})
        except (ValueError, TypeError, AttributeError) as error:
            status, code = "error", 400
            response = JSONResponse({"error": str(error)}, status_code=code)
        if service.settings.leak_kb:
            service._leaked.append(bytearray(b"x" * (service.settings.leak_kb * 1024)))
        latency = handler_start - sent + time.perf_counter() - begun
        record.update(latency_ms=_ms(latency), status=status)
        service.write(record)
        LATENCY.observe(latency)
        REQUESTS.labels(status).inc()
        return response

    async def fault_hang(request: Request) -> Response:
        seconds = _float(request.query_params.get("seconds"), 90.0)
        service.hang(seconds)
        return JSONResponse({"hanging_s": seconds})

    async def release_memory(_: Request) -> Response:
        service.release_memory()
        return JSONResponse({"released": True})

    async def start_profile(_: Request) -> Response:
        await service.start_profiling()
        return JSONResponse({"profiling": True})

    async def tokenize_cost(request: Request) -> Response:
        """One pass of the tokenizer over each prompt given, on its thread: what a prompt costs it here."""
        prompts = [str(p) for p in (await request.json()).get("prompts", [])]
        if not prompts:
            return JSONResponse({"error": "give prompts"}, status_code=400)

        def timed() -> float:
            codec = service.ready()
            began = time.perf_counter()
            for prompt in prompts:
                codec.encode(prompt, slow=service.settings.slow_tokenizer)
            return (time.perf_counter() - began) * 1000 / len(prompts)

        mean_ms = await asyncio.get_running_loop().run_in_executor(service.tokenizer_pool, timed)
        return JSONResponse({"mean_ms": mean_ms, "prompts": len(prompts)})

    async def tokenize_passes(request: Request) -> Response:
        service.settings.tokenize_passes = max(1, int((await request.json()).get("passes", 1)))
        _say(f"tokenizing each prompt {service.settings.tokenize_passes} times")
        return JSONResponse({"passes": service.settings.tokenize_passes})

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True, "pid": os.getpid()})

    return Starlette(
        routes=[
            Route("/generate", generate, methods=["POST"]),
            Route("/start_profile", start_profile, methods=["POST"]),
            Route("/fault/hang", fault_hang, methods=["POST"]),
            Route("/admin/release_memory", release_memory, methods=["POST"]),
            Route("/admin/tokenize_cost", tokenize_cost, methods=["POST"]),
            Route("/admin/tokenize_passes", tokenize_passes, methods=["POST"]),
            Route("/metrics", metrics),
            Route("/health", health),
        ]
    )


def _say(message: str) -> None:
    """One line of the service's log, stamped as the recorder's log follower reads it."""
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", flush=True)


def _ms(seconds: float) -> float:
    return round(max(seconds, 0.0) * 1000, 3)


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def main(argv: list[str] | None = None) -> None:
    settings, port = parse(argv, description=__doc__.split("\n\n")[0])
    app = make_app(Service(settings))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
