"""A pool of worker processes that ends with the process that made it: ``diagnose serve``'s diagnoses,
``diagnose pull --all-instances``' hosts.

concurrent.futures' workers wait on a queue whose writing end each of them holds too, so when the
process that made them is killed outright (the OOM killer, ``kill -9``, a container runtime's last
resort) they never read the end of it: each waits for ever, holding its memory. Each worker here
watches its parent and ends itself within a second of the parent being gone.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

_WATCH_S = 1.0  # how often a worker looks whether the process that made it is still there


def worker_pool(workers: int, start_method: str | None = None) -> ProcessPoolExecutor:
    """A process pool of ``workers`` (started by ``start_method``: the platform's default if None) whose
    workers end when this process is gone."""
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(start_method),
        initializer=_end_with_parent,
        initargs=(os.getpid(),),
    )


def _end_with_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:  # once the parent is gone, the worker is some other process's child
            time.sleep(_WATCH_S)
        os._exit(1)  # nothing of the worker's is worth finishing: its results have nowhere to go

    threading.Thread(target=watch, name="diagnose-end-with-parent", daemon=True).start()
