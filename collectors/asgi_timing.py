"""Request timing for an ASGI service: one JSON line per request, in the columns of a dump's requests table.

Copy this file into the service (standard library only: no need to install
diagnose, with its pandas and Textual, into a production image):

    from asgi_timing import RequestTiming, note, stage

    app.add_middleware(RequestTiming, path="/var/log/infer/requests.jsonl")  # Starlette / FastAPI
    app = RequestTiming(app, path="/var/log/infer/requests.jsonl")          # any ASGI app

    async def generate(request):
        with stage("tokenize"):
            ids = tokenizer.encode(prompt)
        with stage("forward"):
            out = await model.generate(ids)
        note(input_len=len(ids), output_len=len(out), batch_size=batch.size)

Each line holds ``ts`` (the request's arrival, epoch seconds), ``id``,
``latency_ms`` (arrival to the last byte sent), ``status`` (the HTTP code),
``path``, one ``stage_<name>_ms`` per stage timed (summed when a stage runs
more than once), what ``note`` recorded, and for a streamed response
``ttft_ms`` (to its first non-empty body chunk, or to ``first_token()``) and,
with ``output_len``, ``tpot_ms``. Give the file to ``diagnose record
--requests-log`` or put it in a dump as ``requests.jsonl``. A stage or note
outside a timed request does nothing; timing never raises into the service.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import os
import threading
import time
from contextlib import contextmanager

_CURRENT: contextvars.ContextVar[dict | None] = contextvars.ContextVar("diagnose_request", default=None)


class RequestTiming:
    """ASGI middleware: times every HTTP request it passes through and appends its line to ``path``."""

    def __init__(self, app, path: str, prefix: str | None = None) -> None:
        self.app = app
        self._path = path
        self._prefix = prefix or f"{os.getpid()}-"
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._out = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - open for the app's life

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        record = {"stages": {}, "noted": {}, "first_byte": None, "first_token": None, "status": None}
        arrived, started = time.time(), time.perf_counter()
        token = _CURRENT.set(record)

        async def timed_send(message) -> None:
            if message.get("type") == "http.response.start":
                record["status"] = message.get("status")
            elif message.get("type") == "http.response.body" and message.get("body"):
                if record["first_byte"] is None:
                    record["first_byte"] = time.perf_counter()
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        except BaseException:
            record["status"] = record["status"] or 500
            raise
        finally:
            _CURRENT.reset(token)
            self._write(arrived, started, time.perf_counter(), scope.get("path"), record)

    def _write(self, arrived: float, started: float, ended: float, path: str | None, record: dict) -> None:
        row = {
            "ts": round(arrived, 6),
            "id": f"{self._prefix}{next(self._ids)}",
            "latency_ms": round((ended - started) * 1000, 3),
            "status": record["status"],
            "path": path,
        }
        row.update({f"stage_{name}_ms": round(ms, 3) for name, ms in record["stages"].items()})
        row.update(record["noted"])
        first = record["first_token"] or record["first_byte"]
        streamed = first is not None and (record["first_token"] is not None or ended - first > 0.001)
        if streamed:
            row["ttft_ms"] = round((first - started) * 1000, 3)
            output = record["noted"].get("output_len")
            if isinstance(output, int) and output > 1:
                row["tpot_ms"] = round((ended - first) * 1000 / (output - 1), 3)
        try:
            with self._lock:
                self._out.write(json.dumps(row) + "\n")
        except (OSError, ValueError, TypeError):
            pass  # a full disk or an odd note must not fail the request


@contextmanager
def stage(name: str):
    """Time a stage of the current request (``stage_<name>_ms``); stages of one name add up."""
    record = _CURRENT.get()
    began = time.perf_counter()
    try:
        yield
    finally:
        if record is not None:
            record["stages"][name] = record["stages"].get(name, 0.0) + (time.perf_counter() - began) * 1000


def note(**fields: object) -> None:
    """Record ``input_len``, ``output_len``, ``batch_size`` (or others) on the current request's line."""
    record = _CURRENT.get()
    if record is not None:
        record["noted"].update({k: v for k, v in fields.items() if isinstance(v, int | float | str | bool)})


def first_token() -> None:
    """Mark the first generated token of a streamed answer (TTFT), where it is not the first byte sent."""
    record = _CURRENT.get()
    if record is not None and record["first_token"] is None:
        record["first_token"] = time.perf_counter()
