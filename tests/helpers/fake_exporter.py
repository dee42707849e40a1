"""A host's exporters in one page, for diagnose pull's test against a real Prometheus (loopback only).

    python tests/helpers/fake_exporter.py PORT HOST_NUMBER SERVED_LOG

Serves node_exporter, dcgm-exporter and vLLM metric names on /metrics with
values that change every 3 s, and appends what it served (time and values)
to SERVED_LOG, so the test can compare the pulled dump with what was served
at those times. Host 1's GPUs are held at 60 % of their maximum clock by
thermal slowdown, and GPU 0 reports an Xid 79 from 10 s after start; it
also runs process-exporter with two groups: ``vllm`` (1.5 cores, one
``tokenizer`` thread at 90 % beside 30 ``python`` threads at 1 % each) and
``backup`` (a quarter of a core). Host 2's server restarts (its process start
time moves) 15 s after start, and it has no process-exporter.
Stops by itself after 180 s.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GIB, MIB = 1 << 30, 1 << 20
START = time.time()


def values(host: int, now: float) -> dict[str, float]:
    phase = int(now // 3)
    elapsed = now - START
    return {
        "load1": float(phase % 10 + host),
        "mem_available": float(64 * GIB - (10 + phase % 5) * GIB),
        "idle0": 0.5 * elapsed,  # each CPU half busy: cpu_pct 50
        "idle1": 0.5 * elapsed,
        "util0": float(60 + (phase * 7) % 40),
        "util1": 50.0 + host,
        "fb_used0": float(1000 + (phase % 7) * 100),
        "xid0": 79.0 if host == 1 and elapsed > 10 else 0.0,
        "waiting": float(phase % 4),
        "success": 5.0 * elapsed,  # 5 requests a second
        # host 2's server "restarts" 15 s after start: its process start time moves
        "process_start": START + 15 if host == 2 and elapsed > 15 else START,
        "vllm_rss": float((8 + phase % 3) * GIB),
        "elapsed": elapsed,
    }


def page(host: int, v: dict[str, float]) -> str:
    lines = [
        f"node_load1 {v['load1']}",
        f"node_memory_MemTotal_bytes {64 * GIB}",
        f"node_memory_MemAvailable_bytes {v['mem_available']}",
        f'node_cpu_seconds_total{{cpu="0",mode="idle"}} {v["idle0"]}',
        f'node_cpu_seconds_total{{cpu="1",mode="idle"}} {v["idle1"]}',
    ]
    for gpu in (0, 1):
        labels = (
            f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-{host}"'
        )
        used = v["fb_used0"] if gpu == 0 else 2000.0
        hot = host == 1  # thermal slowdown (NVML's 0x20) holds the SM clock at 60 % of its maximum
        lines += [
            f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} {1188 if hot else 1980}",
            f"DCGM_FI_DEV_MAX_SM_CLOCK{{{labels}}} 1980",
            f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{labels}}} {0x20 if hot else 0}",
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {89 if hot else 61}",
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {v['util0'] if gpu == 0 else v['util1']}",
            f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}",
            f"DCGM_FI_DEV_FB_FREE{{{labels}}} {81559 - used}",
            f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {v['xid0'] if gpu == 0 else 0}",
        ]
    served = v["success"]
    lines += [
        f'vllm:num_requests_waiting{{model_name="m"}} {v["waiting"]}',
        f'vllm:request_success_total{{model_name="m"}} {served}',
        # every request takes 0.2 s: all of them fall in the (0.1, 0.25] bucket
        'vllm:e2e_request_latency_seconds_bucket{model_name="m",le="0.1"} 0',
        f'vllm:e2e_request_latency_seconds_bucket{{model_name="m",le="0.25"}} {served}',
        f'vllm:e2e_request_latency_seconds_bucket{{model_name="m",le="+Inf"}} {served}',
        f'vllm:e2e_request_latency_seconds_sum{{model_name="m"}} {0.2 * served}',
        f'vllm:e2e_request_latency_seconds_count{{model_name="m"}} {served}',
        f"process_start_time_seconds {v['process_start']}",
    ]
    if host == 1:
        lines += _process_exporter(v)
    return "\n".join(lines) + "\n"


def _process_exporter(v: dict[str, float]) -> list[str]:
    """process-exporter's groups: CPU counters (user + system), resident memory, threads by name."""
    t = v["elapsed"]
    lines = []
    for group, cores, rss in (("vllm", 1.5, v["vllm_rss"]), ("backup", 0.25, float(GIB))):
        lines += [
            f'namedprocess_namegroup_cpu_seconds_total{{groupname="{group}",mode="user"}} {0.8 * cores * t}',
            f'namedprocess_namegroup_cpu_seconds_total{{groupname="{group}",mode="system"}} {0.2 * cores * t}',
            f'namedprocess_namegroup_memory_bytes{{groupname="{group}",memtype="resident"}} {rss}',
            f'namedprocess_namegroup_num_procs{{groupname="{group}"}} 1',
            f'namedprocess_namegroup_num_threads{{groupname="{group}"}} {31 if group == "vllm" else 1}',
        ]
    for group, thread, count, cores in (("vllm", "tokenizer", 1, 0.9), ("vllm", "python", 30, 0.3)):
        labels = f'groupname="{group}",threadname="{thread}"'
        lines += [
            f"namedprocess_namegroup_thread_count{{{labels}}} {count}",
            f'namedprocess_namegroup_thread_cpu_seconds_total{{{labels},mode="user"}} {cores * t}',
            f'namedprocess_namegroup_thread_cpu_seconds_total{{{labels},mode="system"}} 0',
        ]
    return lines


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        now = time.time()
        v = values(self.server.host, now)
        body = page(self.server.host, v).encode()
        with self.server.lock, open(self.server.log, "a", encoding="utf-8") as log:
            log.write(json.dumps({"t": now, **v}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    port, host, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.host, server.log, server.lock = host, log, threading.Lock()
    threading.Timer(180, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
