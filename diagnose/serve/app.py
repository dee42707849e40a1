"""``diagnose serve``'s web application (Starlette): Alertmanager's webhook in, reports out.

Routes: ``POST /alerts`` (Alertmanager's webhook), ``GET /`` (recent alerts
and their top hypotheses), ``GET /reports/KEY`` (``.json``, ``.md``: one
alert's report, KEY its fingerprint and start), ``GET /latest?alert=&instance=``
(the newest report of an alert on a host: what ``diagnose alerts``'s rules
link), ``GET /api/alerts`` (the index as JSON), and ``GET /-/healthy`` for probes. Every route
but the probe asks for the configured bearer token or basic-auth pair, as
Alertmanager's ``http_config`` sends it. What is refused gets a 4xx with the
reason, logged; a full queue gets a 503, which Alertmanager retries (it never
retries a 4xx).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from diagnose.pull import Auth
from diagnose.pull.pull import iso_utc
from diagnose.serve import notify
from diagnose.serve.diagnosis import Result, Settings
from diagnose.serve.dispatcher import Dispatcher
from diagnose.serve.pages import index_page
from diagnose.serve.queue import AlertQueue, Job, QueueFull, State
from diagnose.serve.webhook import WebhookError, read_notification

log = logging.getLogger("diagnose.serve")

_KEY = re.compile(r"[0-9A-Za-z]{1,64}-\d{8}T\d{6}Z")
_OPEN = ("/-/healthy",)  # what a probe reads without credentials: says nothing of the alerts


@dataclass(frozen=True)
class ServeConfig:
    settings: Settings  # what each diagnosis needs
    store: Path  # the queue's SQLite file
    credentials: tuple[Auth, ...]  # what a request may present; at least one
    workers: int = 2
    queue_bound: int = 1000
    max_body_bytes: int = 4 << 20
    instance_label: str = "instance"
    notify_url: str | None = None
    public_url: str = ""  # the service's own address, for links in notifications


def make_app(config: ServeConfig) -> Starlette:
    queue = AlertQueue(config.store, config.queue_bound)
    notifying = _Notifier(config)
    dispatcher = Dispatcher(queue, config.settings, config.workers, notifying.send)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        again = queue.recover()
        if again:
            log.info("queued again %d alerts a stop interrupted", again)
        dispatcher.start()
        yield
        dispatcher.stop()

    async def receive(request: Request) -> Response:
        body = await _body(request, config.max_body_bytes)
        try:
            notification = read_notification(body)
        except WebhookError as error:
            return _refuse(request, error.status, str(error))
        accepted, skipped = [], []
        for index, alert in enumerate(notification.alerts):
            instance = alert.labels.get(config.instance_label, "").strip()
            if instance:
                accepted.append((alert, instance))
            else:
                skipped.append(f"alerts[{index}] ({alert.name}) has no {config.instance_label!r} label")
        if not accepted:
            return _refuse(
                request,
                422,
                f"no alert names a host to pull: {'; '.join(skipped) or 'the list is empty'} "
                f"(diagnose serve reads the host from the {config.instance_label!r} label)",
            )
        try:
            outcomes = await run_in_threadpool(queue.accept, accepted)
        except QueueFull as full:
            log.warning("refused %d alerts for now: %s", len(accepted), full)
            return JSONResponse({"error": f"{full}: send again later"}, 503, {"Retry-After": "60"})
        dispatcher.wake()
        for (alert, instance), outcome in zip(accepted, outcomes, strict=True):
            log.info("%s %s on %s (%s): %s", alert.status, alert.name, instance, alert.key, outcome)
        for reason in skipped:
            log.warning("skipped: %s", reason)
        return JSONResponse(
            {
                "alerts": [
                    {"key": alert.key, "outcome": str(outcome)}
                    for (alert, _), outcome in zip(accepted, outcomes, strict=True)
                ],
                "skipped": skipped,
            }
        )

    async def index(request: Request) -> Response:
        entries, counts = await run_in_threadpool(lambda: (queue.recent(), queue.counts()))
        return HTMLResponse(index_page(entries, counts))

    async def alerts_json(request: Request) -> Response:
        entries = await run_in_threadpool(queue.recent)
        return JSONResponse(
            [
                {
                    "key": e.job.key,
                    "alert": e.job.name,
                    "instance": e.job.instance,
                    "starts_at": iso_utc(e.job.starts_at),
                    "state": str(e.state),
                    "findings": e.findings,
                    "problem": e.problem,
                    "report": f"/reports/{e.job.key}" if e.state is State.DONE else None,
                }
                for e in entries
            ]
        )

    async def report(request: Request) -> Response:
        name = request.path_params["name"]
        key, _, suffix = name.partition(".")
        files = {"": ("report.html", "text/html"), "json": ("report.json", "application/json"),
                 "md": ("report.md", "text/markdown")}  # fmt: skip
        if not _KEY.fullmatch(key) or suffix not in files:
            return _refuse(
                request, 404, f"{name}: not a report's address (/reports/FINGERPRINT-START[.json|.md])"
            )
        entry = await run_in_threadpool(queue.entry, key)
        if entry is None:
            return _refuse(request, 404, f"{key}: no such alert")
        if entry.state is not State.DONE or entry.folder is None:
            reason = entry.problem if entry.state is State.FAILED else f"it is {entry.state}"
            return JSONResponse({"error": f"{key}: no report: {reason}"}, 404)
        file, media = files[suffix]
        path = Path(entry.folder) / file
        if not path.is_file():
            return _refuse(request, 404, f"{key}: its report's {file} is no longer in {entry.folder}")
        return FileResponse(path, media_type=media)

    async def latest(request: Request) -> Response:
        """``/latest?alert=NAME&instance=HOST``: where a rule's annotation points (a rule cannot know the
        fingerprint): the newest incident's report, or what became of it."""
        name, instance = request.query_params.get("alert", ""), request.query_params.get("instance", "")
        if not name or not instance:
            return _refuse(request, 400, "expected /latest?alert=NAME&instance=HOST")
        entry = await run_in_threadpool(queue.latest, name, instance)
        if entry is None:
            return _refuse(request, 404, f"no alert {name} on {instance} received")
        if entry.state is State.DONE:
            return RedirectResponse(f"/reports/{entry.job.key}", 303)
        reason = entry.problem if entry.state is State.FAILED else f"it is {entry.state}; try again shortly"
        return JSONResponse({"error": f"{entry.job.key}: no report: {reason}"}, 404)

    async def healthy(request: Request) -> Response:
        return Response("ok\n", media_type="text/plain")

    routes = [
        Route("/alerts", receive, methods=["POST"]),
        Route("/", index),
        Route("/api/alerts", alerts_json),
        Route("/latest", latest),
        Route("/reports/{name}", report),
        Route("/-/healthy", healthy),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(_Authenticated, credentials=config.credentials)
    app.add_exception_handler(_TooLarge, _too_large)
    return app


class _Notifier:
    """Posts each finished alert to ``--notify`` from a thread of its own: a slow notifier never holds
    the dispatcher."""

    def __init__(self, config: ServeConfig) -> None:
        self._url, self._public = config.notify_url, config.public_url.rstrip("/")

    def send(self, job: Job, result: Result) -> None:
        if self._url is None:
            return
        body = notify.message(job, result, f"{self._public}/reports/{job.key}")
        threading.Thread(target=notify.post, args=(self._url, body), daemon=True).start()


class _TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes (--max-body)")


async def _body(request: Request, limit: int) -> bytes:
    """The body, read no further than ``limit`` whatever Content-Length claims."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _too_large(request: Request, error: Exception) -> Response:
    return _refuse(request, 413, str(error))


def _refuse(request: Request, status: int, reason: str) -> Response:
    client = request.client.host if request.client else "unknown"
    log.warning("refused %s %s from %s (%d): %s", request.method, request.url.path, client, status, reason)
    return JSONResponse({"error": reason}, status)


class _Authenticated:
    """Every request but the probe's presents one of the configured credentials (compared in constant
    time); one that does not gets 401, and a browser is asked for basic auth where that is configured."""

    def __init__(self, app: ASGIApp, credentials: tuple[Auth, ...]) -> None:
        self._app = app
        self._accepted = [auth.headers()["Authorization"].encode() for auth in credentials]
        self._basic = any(auth.basic for auth in credentials)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN:
            await self._app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if any(hmac.compare_digest(given, accepted) for accepted in self._accepted):
            await self._app(scope, receive, send)
            return
        reason = "no credentials" if not given else "wrong credentials"
        client = (scope.get("client") or ("unknown",))[0]
        log.warning("refused %s %s from %s (401): %s", scope["method"], scope["path"], client, reason)
        headers = {"WWW-Authenticate": 'Basic realm="diagnose serve"'} if self._basic else {}
        response = Response(
            json.dumps(
                {"error": f"{reason}: give the bearer token or basic auth diagnose serve was started with"}
            ),
            401,
            headers,
            media_type="application/json",
        )
        await response(scope, receive, send)
