"""Find the serving process when the user did not name it: from the request source.

The process listening on the ``--metrics-url`` port, or holding the
``--requests-log`` file open, is the server; the recorder then watches it
(busiest thread, restarts) as if it had been given with ``--pid``.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import psutil


def server_pids(metrics_url: str | None, requests_log: str | None) -> tuple[int, ...]:
    found: list[int] = []
    port = urlparse(metrics_url).port if metrics_url else None
    if port is not None:
        found += _listening_on(port)
    if requests_log and not found:
        found += _holding_open(os.path.realpath(requests_log))
    return tuple(sorted(set(found)))


def _listening_on(port: int) -> list[int]:
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    return [
        c.pid
        for c in connections
        if c.pid and c.status == psutil.CONN_LISTEN and getattr(c.laddr, "port", None) == port
    ]


def _holding_open(path: str) -> list[int]:
    pids = []
    for process in psutil.process_iter(["pid"]):
        try:
            if any(f.path == path for f in process.open_files()):
                pids.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return pids
