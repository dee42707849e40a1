"""The queue's alerts diagnosed a few at a time, each in a worker process, as the fleet sweep does.

A thread claims queued alerts while fewer than ``workers`` run, hands each to a
process pool (``spawn``: the web server's threads are never forked), and
writes each result back to the queue. A worker that dies (killed for its
memory, say) fails its alert with that reason and the pool is made anew. On
stop the workers are ended and what they were doing stays ``running`` in the
queue, to be queued again at the next start.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from diagnose.processes.pool import worker_pool
from diagnose.serve.diagnosis import Result, Settings, diagnose_alert
from diagnose.serve.queue import AlertQueue, Job

log = logging.getLogger("diagnose.serve")

_IDLE_S = 1.0  # how often an idle dispatcher looks at the queue without being woken


class Dispatcher:
    def __init__(
        self,
        queue: AlertQueue,
        settings: Settings,
        workers: int,
        finished: Callable[[Job, Result], None] = lambda job, result: None,
    ) -> None:
        self._queue, self._settings, self._workers, self._finished = queue, settings, workers, finished
        self._running: dict[Future, Job] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._pool = self._new_pool()
        self._thread = threading.Thread(target=self._run, name="diagnose-dispatcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """New alerts were queued: look now, not at the next idle tick."""
        self._wake.set()

    def busy(self) -> int:
        with self._lock:
            return len(self._running)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=10)
        for child in multiprocessing.active_children():  # the pool's workers: their alerts stay queued
            child.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)  # its queues closed, nothing left behind

    def _new_pool(self) -> ProcessPoolExecutor:
        return worker_pool(self._workers, "spawn")

    def _run(self) -> None:
        while not self._stopping:
            try:
                self._fill()
            except Exception:  # noqa: BLE001 - the dispatcher must outlive one bad turn (a locked store, say)
                log.exception("the dispatcher's turn failed; trying again")
            self._wake.wait(_IDLE_S)
            self._wake.clear()

    def _fill(self) -> None:
        while self.busy() < self._workers and not self._stopping:
            job = self._queue.claim()
            if job is None:
                return
            log.info("diagnosing %s on %s (%s)", job.name, job.instance, job.key)
            try:
                future = self._pool.submit(diagnose_alert, job, self._settings)
            except BrokenProcessPool:
                self._pool.shutdown(wait=False)
                self._pool = self._new_pool()
                future = self._pool.submit(diagnose_alert, job, self._settings)
            with self._lock:
                self._running[future] = job
            future.add_done_callback(self._done)

    def _done(self, future: Future) -> None:
        with self._lock:
            job = self._running.pop(future)
        if self._stopping:
            return  # left running in the queue: queued again at the next start
        try:
            result = future.result()
        except BrokenProcessPool:
            result = Result(job.key, None, [], "the worker process diagnosing it died (out of memory?)")
        except Exception as error:  # noqa: BLE001 - a result that could not come back is this alert's failure
            result = Result(job.key, None, [], f"not diagnosed: {type(error).__name__}: {error}")
        if result.problem is None and result.folder is not None:
            self._queue.finish(job.key, result.folder, result.findings)
            log.info("diagnosed %s on %s: %s", job.name, job.instance, _top(result))
        else:
            self._queue.fail(job.key, result.problem or "no report", result.folder)
            log.warning("could not diagnose %s on %s: %s", job.name, job.instance, result.problem)
        try:
            self._finished(job, result)
        finally:
            self._wake.set()


def _top(result: Result) -> str:
    if not result.findings:
        return "no hypothesis"
    first = result.findings[0]
    return f"{first['id']} {first['score']:.2f}"
