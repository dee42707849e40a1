"""A fleet sweep against a real Prometheus: hosts a minute, peak memory, findings found, shards merged.

    python benchmarks/bench_sweep.py [--hosts 200] [--minutes 60] [--gpus 8] [--concurrency 4] [--shards 4]
    python benchmarks/bench_sweep.py --latency-ms 20 --concurrency 8   # a Prometheus across a network

Writes ``--hosts`` synthetic hosts' node_exporter and dcgm-exporter series
(``--gpus`` GPUs each, sampled every 15 s for ``--minutes``) as OpenMetrics, backfills
them into a fresh Prometheus data folder with ``promtool tsdb
create-blocks-from openmetrics`` (the distribution's package, as the tests
use), serves them with ``prometheus``, and sweeps them with ``diagnose pull
--all-instances``: once one host after another (``--max-concurrency 1``), once
``--concurrency`` at a time, and once in ``--shards`` shards merged with
``diagnose fleet merge``. One host in ten has its GPUs held at 60 % of their
clock by thermal slowdown: the share of those found (gpu-throttling likely)
and of the others wrongly flagged is reported. Peak memory is the largest
resident set of any one process of the sweep (the CLI or a worker), from the
OS: the sweep holds at most ``--concurrency`` of them at once.

The store a fleet's metrics live in (Prometheus, Thanos, Mimir, VictoriaMetrics)
is another machine: each query waits for the network and the store's own work.
``--latency-ms`` puts a forwarding proxy between the sweep and the local
Prometheus that answers each request that much later (the store's time to
first byte over the network); the queries a host takes are counted and said.
Without it the Prometheus is on the same two cores as the sweep, and the
speed-up is that of the CPU alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from tests.helpers.service import free_port, wait_for  # noqa: E402

STEP_S = 15
GIB = 1 << 30


def _throttled(host: int) -> bool:
    return host % 10 == 3


def write_openmetrics(path: Path, hosts: int, start: int, minutes: int, gpus: int) -> None:
    """Every family's samples together, as OpenMetrics wants them, in time order within a series."""
    times = list(range(start, start + minutes * 60 + 1, STEP_S))
    names = [f"gpu-{h:04d}" for h in range(hosts)]

    def series(family: str, kind: str, rows) -> list[str]:
        lines = [f"# TYPE {family} {kind}"]
        lines += [
            f"{name}{{{labels}}} {value} {t}" for name, labels, value_of in rows for t, value in value_of()
        ]
        return lines

    with path.open("w", encoding="utf-8") as out:

        def emit(lines: list[str]) -> None:
            out.write("\n".join(lines) + "\n")

        def per_host(metric: str, value, extra: str = ""):
            for h, name in enumerate(names):
                labels = f'instance="{name}:9100",job="gpu-nodes"{extra}'
                yield metric, labels, (lambda h=h: ((t, value(h, t)) for t in times))

        emit(series("up", "gauge", per_host("up", lambda h, t: 1)))
        emit(series("node_load1", "gauge", per_host("node_load1", lambda h, t: 1 + (t // 60 + h) % 4)))
        emit(
            series(
                "node_memory_MemTotal_bytes",
                "gauge",
                per_host("node_memory_MemTotal_bytes", lambda h, t: 64 * GIB),
            )
        )
        emit(
            series(
                "node_memory_MemAvailable_bytes",
                "gauge",
                per_host("node_memory_MemAvailable_bytes", lambda h, t: 40 * GIB - (t // 60 % 5) * GIB),
            )
        )
        rows = []
        for cpu in range(4):
            rows += per_host(
                "node_cpu_seconds_total", lambda h, t: 0.5 * (t - start), f',cpu="{cpu}",mode="idle"'
            )
        emit(series("node_cpu_seconds", "counter", rows))
        for family, value in (
            ("DCGM_FI_DEV_SM_CLOCK", lambda h, t: 1188 if _throttled(h) else 1980),
            ("DCGM_FI_DEV_MAX_SM_CLOCK", lambda h, t: 1980),
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", lambda h, t: 0x20 if _throttled(h) else 0),
            ("DCGM_FI_DEV_GPU_TEMP", lambda h, t: 89 if _throttled(h) else 61),
            ("DCGM_FI_DEV_GPU_UTIL", lambda h, t: 60 + (t // STEP_S * 7 + h) % 35),
            ("DCGM_FI_DEV_FB_USED", lambda h, t: 40_000 + (t // 60 % 7) * 100),
            ("DCGM_FI_DEV_FB_FREE", lambda h, t: 41_559 - (t // 60 % 7) * 100),
        ):
            rows = []
            for gpu in range(gpus):
                rows += per_host(family, value, f',gpu="{gpu}",modelName="NVIDIA H100 80GB HBM3"')
            emit(series(family, "gauge", rows))
        out.write("# EOF\n")


def backfill(folder: Path, hosts: int, start: int, minutes: int, gpus: int) -> Path:
    """The fleet's series written and turned into a Prometheus data folder (``folder/data``)."""
    write_openmetrics(folder / "fleet.om", hosts, start, minutes, gpus)
    command = ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(folder / "fleet.om")]
    subprocess.run([*command, str(folder / "data")], check=True, capture_output=True)
    return folder / "data"


def _serve(data: Path, folder: Path) -> tuple[subprocess.Popen, str]:
    config = folder / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    port = free_port()
    server = subprocess.Popen(
        [
            shutil.which("prometheus") or "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=30d",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return urllib.request.urlopen(f"{url}/-/ready", timeout=1).status == 200
        except OSError:
            return False

    try:
        wait_for(ready, timeout=120)
    except AssertionError:
        server.kill()
        raise SystemExit("prometheus did not become ready within 120 s") from None
    return server, url


@contextmanager
def _remote(url: str, latency_s: float):
    """``url`` as a store across a network: every request answered ``latency_s`` later; yields the
    proxy's URL and a list that counts the requests."""
    served: list[str] = []

    class Delayed(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            time.sleep(latency_s)
            served.append(self.path)
            with urllib.request.urlopen(url + self.path, timeout=60) as answer:
                body, status, kind = answer.read(), answer.status, answer.headers.get("Content-Type")
            self.send_response(status)
            self.send_header("Content-Type", kind or "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", free_port()), Delayed)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", served
    finally:
        proxy.shutdown()
        proxy.server_close()


# Runs one command and prints its wall time and the largest resident set of it and its descendants.
_MEASURE = """
import resource, subprocess, sys, time
began = time.monotonic()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
print(done.returncode, time.monotonic() - began, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(done.stderr[-2000:] if done.returncode else "")
"""


def _sweep(url: str, out: Path, window: tuple[int, int], *options: str) -> tuple[float, float]:
    """(seconds, peak MiB) of one diagnose pull --all-instances."""
    command = [
        sys.executable, "-m", "diagnose", "pull", "--prometheus", url, "--all-instances",
        "--from", str(window[0]), "--to", str(window[1]), "-o", str(out), *options,
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True
    )
    code, seconds, peak_kib = done.stdout.split()
    if code != "0":
        raise SystemExit(f"the sweep failed ({code}): {done.stderr}")
    return float(seconds), int(peak_kib) / 1024


def _found(out: Path, name: str = "fleet.json") -> tuple[int, int, int, int]:
    """(throttled hosts flagged, throttled hosts, others flagged, hosts not analysed)."""
    fleet = json.loads((out / name).read_text())
    hit = miss_flag = throttled = problems = 0
    for host in fleet["hosts"]:
        number = int(host["host"].split("-")[1])
        flagged = any(f["id"] == "gpu-throttling" and f["score"] >= 0.5 for f in host["findings"])
        problems += host["problem"] is not None
        if _throttled(number):
            throttled += 1
            hit += flagged
        else:
            miss_flag += flagged
    return hit, throttled, miss_flag, problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="each query answered this much later, as a store across a network would (default 0: local)",
    )
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.hosts, args.minutes, args.shards, args.gpus = 6, 5, 2, 2
        args.latency_ms = args.latency_ms or 5.0  # the proxy's path runs too
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        print("prometheus and promtool are not installed (the distribution's package): nothing measured")
        return
    start = (int(time.time()) - 3 * 3600) // 60 * 60
    window = (start, start + args.minutes * 60)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        began = time.monotonic()
        backfill(folder, args.hosts, start, args.minutes, args.gpus)
        print(
            f"{args.hosts} hosts of {args.gpus} GPUs, {args.minutes} min at {STEP_S} s, "
            f"backfilled in {time.monotonic() - began:.0f} s"
        )
        server, local = _serve(folder / "data", folder)
        remote = _remote(local, args.latency_ms / 1000) if args.latency_ms > 0 else nullcontext((local, []))
        try:
            with remote as (url, served):
                rows = []
                for label, out, options in (
                    ("one after another", folder / "serial", ("--max-concurrency", "1")),
                    (
                        f"{args.concurrency} at a time",
                        folder / "parallel",
                        ("--max-concurrency", str(args.concurrency)),
                    ),
                ):
                    asked = len(served)
                    seconds, peak = _sweep(url, out, window, *options)
                    hit, throttled, wrong, problems = _found(out)
                    rows.append((label, seconds, peak, hit, throttled, wrong, problems))
                    queries = (len(served) - asked) / args.hosts
                shared = folder / "sharded"
                shard_seconds, shard_peak = 0.0, 0.0
                for index in range(args.shards):
                    seconds, peak = _sweep(url, shared, window, "--shard", f"{index}/{args.shards}")
                    shard_seconds, shard_peak = shard_seconds + seconds, max(shard_peak, peak)
                subprocess.run(
                    [sys.executable, "-m", "diagnose", "fleet", "merge", str(shared)],
                    check=True,
                    capture_output=True,
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
        if args.latency_ms > 0:
            print(f"each query answered {args.latency_ms:g} ms later; {queries:.1f} queries a host")
        print(
            "| sweep | seconds | hosts a minute | peak MiB | throttled hosts found | others flagged "
            "| not analysed |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, seconds, peak, hit, throttled, wrong, problems in rows:
            print(
                f"| {label} | {seconds:.1f} | {args.hosts / seconds * 60:.0f} | {peak:.0f} "
                f"| {hit} of {throttled} | {wrong} | {problems} |"
            )
        print(f"speed-up: {rows[0][1] / rows[1][1]:.2f}x")
        single = (folder / "parallel" / "fleet.json").read_text().replace(str(folder / "parallel"), "@")
        merged = (shared / "fleet.json").read_text().replace(str(shared), "@")
        print(
            f"{args.shards} shards, one after another: {shard_seconds:.1f} s, peak {shard_peak:.0f} MiB; "
            "merged "
            f"{'the same as' if merged == single else 'DIFFERENT from'} the single sweep's fleet.json"
        )


if __name__ == "__main__":
    main()
