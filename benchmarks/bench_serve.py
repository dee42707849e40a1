"""diagnose serve under alert traffic: alerts diagnosed a minute with N workers, and its memory with a
thousand alerts waiting.

    python benchmarks/bench_serve.py [--hosts 40] [--minutes 60] [--gpus 8] [--workers 1,2,4]
    python benchmarks/bench_serve.py --latency-ms 50 --waiting 1000

The store is a real Prometheus holding ``--hosts`` synthetic hosts' node_exporter
and dcgm-exporter series (bench_sweep.py's, backfilled with promtool; one host
in ten held down by thermal slowdown), behind a proxy that answers each query
``--latency-ms`` later, as a store across a network does. One Alertmanager
notification carries an alert for every host, started at the end of the
series; the time until every alert is diagnosed gives alerts a minute for each
worker count, and the share of the throttled hosts whose report names
gpu-throttling first. Then ``--waiting`` alerts are posted to a service whose
store never answers (nothing finishes): its resident memory before and after,
and the queue file's size.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_sweep import _remote, _serve, _throttled, backfill  # noqa: E402
from benchmarks.quick import add_quick  # noqa: E402
from tests.helpers.service import free_port, wait_for  # noqa: E402

TOKEN = "bench-serve-token"


class _Serve:
    def __init__(self, folder: Path, prometheus: str, workers: int) -> None:
        folder.mkdir(parents=True)
        (folder / "token").write_text(TOKEN)
        self.url = f"http://127.0.0.1:{free_port()}"
        command = [
            sys.executable, "-m", "diagnose", "serve", "--prometheus", prometheus,
            "--data", str(folder / "data"),
            "--listen", self.url.removeprefix("http://"), "--token-file", str(folder / "token"),
            "--workers", str(workers), "--before", "30m", "--after", "1s", "--queue-max", "100000",
        ]  # fmt: skip
        self.folder = folder
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ready() -> bool:
            try:
                return urllib.request.urlopen(f"{self.url}/-/healthy", timeout=1).status == 200
            except OSError:
                return False

        wait_for(ready, timeout=60)

    def call(self, path: str, body: dict | None = None):
        request = urllib.request.Request(
            f"{self.url}{path}",
            None if body is None else json.dumps(body).encode(),
            {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def _notification(hosts: list[str], starts_at: float, offset: int = 0) -> dict:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(starts_at))
    return {
        "version": "4",
        "status": "firing",
        "receiver": "diagnose",
        "groupKey": "{}",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "HighP99Latency", "instance": f"{host}:9100"},
                "annotations": {},
                "startsAt": stamp,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": f"{offset + index:016x}",
            }
            for index, host in enumerate(hosts)
        ],
    }


def _diagnosed(prometheus: str, folder: Path, workers: int, hosts: list[str], starts_at: float):
    serve = _Serve(folder, prometheus, workers)
    try:
        began = time.monotonic()
        serve.call("/alerts", _notification(hosts, starts_at))
        wait_for(
            lambda: all(a["state"] in ("done", "failed") for a in serve.call("/api/alerts")),
            timeout=3600,
        )
        seconds = time.monotonic() - began
        alerts = serve.call("/api/alerts")
    finally:
        serve.stop()
    throttled = [a for a in alerts if _throttled(int(a["instance"].split("-")[1].split(":")[0]))]
    found = sum(bool(a["findings"]) and a["findings"][0]["id"] == "gpu-throttling" for a in throttled)
    failed = sum(a["state"] == "failed" for a in alerts)
    return seconds, found, len(throttled), failed


def _silent_store() -> tuple[str, socket.socket]:
    """A store that accepts connections and never answers: every diagnosis waits (its timeout is 30 s)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", listener


def _waiting_memory(folder: Path, count: int) -> tuple[float, float, float, float]:
    store, listener = _silent_store()
    serve = _Serve(folder, store, 1)
    try:
        process = psutil.Process(serve.process.pid)
        time.sleep(1.0)
        before = process.memory_info().rss / (1 << 20)
        began = time.monotonic()
        batch = 100
        for offset in range(0, count, batch):
            hosts = [f"gpu-{i:04d}" for i in range(offset, min(count, offset + batch))]
            serve.call("/alerts", _notification(hosts, time.time() - 60, offset))
        accepting = time.monotonic() - began
        time.sleep(1.0)
        after = process.memory_info().rss / (1 << 20)
        size = (folder / "data" / "alerts.sqlite").stat().st_size / (1 << 20)
    finally:
        serve.process.kill()
        serve.process.wait(timeout=30)
        listener.close()
    return before, after, size, count / accepting


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--workers", default="1,2,4", help="worker counts to measure, comma-separated")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="each query answered this much later")
    parser.add_argument("--waiting", type=int, default=1000, help="alerts waiting for the memory figure")
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.hosts, args.minutes, args.gpus, args.workers, args.waiting = 4, 35, 2, "2", 50
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        print("prometheus and promtool are not installed (the distribution's package): nothing measured")
        return
    start = (int(time.time()) - 3 * 3600) // 60 * 60
    hosts = [f"gpu-{h:04d}" for h in range(args.hosts)]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        server, local = _serve(backfill(folder, args.hosts, start, args.minutes, args.gpus), folder)
        rows = []
        try:
            with _remote(local, args.latency_ms / 1000) as (url, _):
                for workers in (int(w) for w in args.workers.split(",")):
                    out = folder / f"serve-{workers}"
                    rows.append((workers, *_diagnosed(url, out, workers, hosts, start + args.minutes * 60)))
        finally:
            server.terminate()
            server.wait(timeout=30)
        print(
            f"{args.hosts} alerts, one a host ({args.gpus} GPUs, 30 min pulled each at 15 s), "
            f"each query answered {args.latency_ms:g} ms later"
        )
        print("| workers | seconds | alerts a minute | throttled hosts named first | failed |")
        print("|---:|---:|---:|---:|---:|")
        for workers, seconds, found, throttled, failed in rows:
            per_minute = len(hosts) / seconds * 60
            print(f"| {workers} | {seconds:.1f} | {per_minute:.1f} | {found} of {throttled} | {failed} |")
        before, after, size, rate = _waiting_memory(folder / "waiting", args.waiting)
        print(
            f"{args.waiting} alerts waiting: resident {before:.0f} MiB before, {after:.0f} MiB after "
            f"(+{after - before:.1f} MiB); the queue file {size:.2f} MiB; accepted at {rate:.0f} alerts/s"
        )


if __name__ == "__main__":
    main()
