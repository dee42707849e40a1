"""A tiny inference service for the recorder's end-to-end test (loopback only).

    python tests/helpers/fake_service.py PORT LOG_PATH

POST or GET /infer "serves" a request in a few milliseconds and appends one
JSON line to LOG_PATH; GET /burst?ms=M&seconds=S makes every request of the
next S seconds take M ms longer (a latency burst for the flight recorder's
test); GET /metrics exposes vLLM-named metrics through prometheus_client. It
stops by itself after 60 s in case a test forgets it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry()
SUCCESS = Counter("vllm:request_success", "finished requests", registry=REGISTRY)
TOKENS = Counter("vllm:generation_tokens", "generated tokens", registry=REGISTRY)
RUNNING = Gauge("vllm:num_requests_running", "running", registry=REGISTRY)
WAITING = Gauge("vllm:num_requests_waiting", "waiting", registry=REGISTRY)
QUEUE = Histogram("vllm:request_queue_time_seconds", "queue time", registry=REGISTRY)
E2E = Histogram("vllm:e2e_request_latency_seconds", "latency", registry=REGISTRY)
LOCK = threading.Lock()
BURST = {"until": 0.0, "ms": 0.0}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if self.path.startswith("/metrics"):
            body = generate_latest(REGISTRY)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/burst"):
            query = parse_qs(urlparse(self.path).query)
            BURST["ms"] = float(query["ms"][0])
            BURST["until"] = time.time() + float(query["seconds"][0])
            self.send_response(200)
            self.end_headers()
            return
        start = time.time()
        RUNNING.inc()
        time.sleep(0.004 + (BURST["ms"] / 1000 if start < BURST["until"] else 0.0))
        RUNNING.dec()
        latency = time.time() - start
        SUCCESS.inc()
        TOKENS.inc(16)
        QUEUE.observe(0.0005)
        E2E.observe(latency)
        with LOCK, open(self.server.log_path, "a", encoding="utf-8") as log:
            log.write(
                json.dumps(
                    {
                        "ts": start,
                        "latency_ms": latency * 1000,
                        "stage_forward_ms": latency * 1000,
                        "input_len": 32,
                        "status": "ok",
                    }
                )
                + "\n"
            )
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    port, log_path = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.log_path = log_path
    threading.Timer(60, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
