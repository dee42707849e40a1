"""`diagnose record` for real on this machine: a loopback service, a CPU burner, and a kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import psutil
import pytest

from diagnose.dump import load_dump
from tests.helpers.service import wait_for


def _load(url: str, stop: threading.Event) -> None:
    deadline = time.monotonic() + 15  # bounded, whatever happens to the test
    while not stop.is_set() and time.monotonic() < deadline:
        urllib.request.urlopen(f"{url}/infer", timeout=2).read()
        time.sleep(0.02)


def _record(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", "record", *args], capture_output=True, text=True, timeout=timeout
    )


def test_record_a_service_and_a_cpu_burner_then_analyse_the_dump(tmp_path, service):
    url, log = service
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    stop = threading.Event()
    load = threading.Thread(target=_load, args=(url, stop), daemon=True)
    load.start()
    try:
        result = _record(
            "-o",
            str(tmp_path / "dump"),
            "--duration",
            "4s",
            "--pid",
            str(burner.pid),
            "--requests-log",
            str(log),
            "--metrics-url",
            f"{url}/metrics",
            "--top",
            "5",
        )
    finally:
        stop.set()
        burner.kill()
        burner.wait()
        load.join(timeout=5)
    assert result.returncode == 0, result.stderr
    assert "recorded" in result.stderr
    dump = load_dump(str(tmp_path / "dump"))
    assert 3 <= len(dump.tables["system"]) <= 5
    assert len(dump.tables["requests"]) > 20
    server = dump.tables["server"]
    assert server["throughput_rps"].max() > 5 and server["e2e_ms"].notna().any()
    processes = dump.tables["processes"]
    burner_rows = processes[processes["pid"] == burner.pid]
    # Relative, so it holds on a loaded machine: the burner's one thread is all of its CPU.
    busiest = burner_rows.dropna(subset=["max_thread_cpu_pct"])
    assert len(busiest) and (busiest["max_thread_cpu_pct"] >= 0.8 * busiest["cpu_pct"]).all()
    assert (busiest["max_thread_cpu_pct"] > 0).all()
    analysed = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(tmp_path / "dump"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert analysed.returncode == 0, analysed.stderr


def test_a_recording_killed_with_sigkill_is_still_a_valid_dump(tmp_path):
    folder = tmp_path / "dump"
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnose", "record", "-o", str(folder), "--no-gpu"], stderr=subprocess.DEVNULL
    )
    try:
        wait_for(
            lambda: (
                (folder / "system.csv").exists()
                and len((folder / "system.csv").read_text().splitlines()) >= 3
            )
        )
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    dump = load_dump(str(folder))
    assert len(dump.tables["system"]) >= 2
    assert "complete: false" in (folder / "manifest.yaml").read_text()


def test_recording_into_an_existing_dump_is_refused(tmp_path):
    (tmp_path / "system.csv").write_text("ts\n1\n")
    result = _record("-o", str(tmp_path), "--duration", "1s", "--no-gpu")
    assert result.returncode == 2
    assert "already exists" in result.stderr and "Traceback" not in result.stderr


def test_record_help_explains_every_option():
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "record", "--help"], capture_output=True, text=True
    )
    for option in (
        "--output",
        "--duration",
        "--interval",
        "--pid",
        "--requests-log",
        "--requests-format",
        "--map",
        "--metrics-url",
        "--engine",
        "--allocator-log",
        "--log",
        "--top",
        "--no-gpu",
        "--no-host",
        "--force",
    ):
        assert option in result.stdout


def test_a_service_on_another_host_is_recorded_from_afar_without_this_hosts_tables(tmp_path, service):
    """--no-host: the service's /metrics and nothing of the machine the recorder runs on (its CPU, its
    processes, its GPUs and kernel logs are another machine's); the manifest names the service's host."""
    import yaml

    url, _ = service
    stop = threading.Event()
    load = threading.Thread(target=_load, args=(url, stop), daemon=True)
    load.start()
    try:
        result = _record(
            "-o", str(tmp_path / "d"), "--duration", "3s", "--no-host", "--metrics-url", f"{url}/metrics",
            "--env", "model=tiny",
        )  # fmt: skip
    finally:
        stop.set()
        load.join(timeout=5)
    assert result.returncode == 0, result.stderr
    dump = load_dump(str(tmp_path / "d"))
    assert set(dump.tables) == {"server"} and dump.tables["server"]["throughput_rps"].max() > 0
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    assert manifest["host"] == "127.0.0.1" and "machine_id" not in manifest and "boot_id" not in manifest
    assert manifest["environment"] == {"model": "tiny"} and manifest["server_pids"] == []
    refused = _record("-o", str(tmp_path / "e"), "--duration", "1s", "--no-host", "--pid", str(os.getpid()),
                      "--metrics-url", f"{url}/metrics")  # fmt: skip
    assert refused.returncode == 2 and "--no-host" in refused.stderr and "Traceback" not in refused.stderr
    nothing = _record("-o", str(tmp_path / "f"), "--duration", "1s", "--no-host")
    assert nothing.returncode == 2 and "--metrics-url or --requests-log" in nothing.stderr


def test_the_server_is_found_from_the_metrics_port(service):
    from diagnose.collectors.discover import server_pids

    url, _ = service
    (pid,) = server_pids(f"{url}/metrics", None)
    assert "fake_service.py" in " ".join(__import__("psutil").Process(pid).cmdline())


def test_a_watched_server_that_comes_back_under_a_new_pid_is_a_restart():
    from diagnose.collectors.host import HostCollector

    command = [sys.executable, "-c", "import time; time.sleep(30)", "diagnose-restart-test"]
    first = subprocess.Popen(command)
    second = None
    try:
        time.sleep(0.3)
        host = HostCollector(watch_pids=(first.pid,), rescan_every=1)
        host.sample(time.time(), time.monotonic())
        first.kill()
        first.wait()
        second = subprocess.Popen(command)
        time.sleep(0.3)
        events = host.sample(time.time(), time.monotonic()).events
        events += host.sample(time.time(), time.monotonic()).events
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
                process.wait()
    kinds = {e["kind"]: e for e in events}
    assert kinds["restart"]["pid"] == second.pid and kinds["restart"]["previous_pid"] == first.pid


def test_a_restart_between_scans_is_seen_at_once_and_stamped_at_the_new_process_birth():
    from diagnose.collectors.host import HostCollector

    command = [sys.executable, "-c", "import time; time.sleep(30)", "diagnose-restart-between-scans"]
    first = subprocess.Popen(command)
    second = None
    try:
        time.sleep(0.3)
        host = HostCollector(watch_pids=(first.pid,), rescan_every=100)
        host.sample(time.time(), time.monotonic())  # the one full scan of this test
        first.kill()
        first.wait()
        events = host.sample(time.time(), time.monotonic()).events
        second = subprocess.Popen(command)
        time.sleep(0.3)
        events += host.sample(time.time(), time.monotonic()).events
        born = psutil.Process(second.pid).create_time()
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
                process.wait()
    (restart,) = [e for e in events if e["kind"] == "restart"]
    assert restart["pid"] == second.pid and restart["previous_pid"] == first.pid
    assert restart["ts"] == pytest.approx(born, abs=0.05)


def test_a_busy_process_born_between_scans_is_recorded_from_the_next_sample():
    from diagnose.collectors.host import HostCollector

    host = HostCollector(top=3, rescan_every=100)
    host.sample(time.time(), time.monotonic())
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass", "diagnose-newborn-test"])
    quiet = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.8)
        rows = host.sample(time.time(), time.monotonic()).processes
    finally:
        for process in (busy, quiet):
            process.kill()
            process.wait()
    recorded = {row["pid"]: row for row in rows}
    assert busy.pid in recorded and recorded[busy.pid]["cpu_pct"] > 0
    assert quiet.pid not in recorded


_OWN_METRICS = """\
# TYPE app_queue_depth gauge
app_queue_depth 7
# TYPE app_requests counter
app_requests_total{status="ok"} %(ok)s
app_requests_total{status="error"} 1
# TYPE app_batch_size histogram
app_batch_size_bucket{le="+Inf"} %(batches)s
app_batch_size_sum %(batched)s
app_batch_size_count %(batches)s
# TYPE app_latency_seconds histogram
app_latency_seconds_sum %(latency)s
app_latency_seconds_count %(ok)s
"""


def test_a_services_own_metrics_are_recorded_by_type_through_metrics_map():
    from diagnose.engines.metrics import custom_map, engine_row, parse_samples

    mapping = custom_map(
        {
            "app_queue_depth": "queue_depth",
            "app_requests": "throughput_rps",
            "app_batch_size": "batch_size",
            "app_latency_seconds": "e2e_ms",
        }
    )
    before = parse_samples(_OWN_METRICS % {"ok": 100, "batches": 10, "batched": 40, "latency": 5.0})
    after = parse_samples(_OWN_METRICS % {"ok": 120, "batches": 14, "batched": 72, "latency": 6.0})
    row = engine_row(mapping, 2.0, after, before, elapsed=2.0)
    assert row["queue_depth"] == 7
    assert row["throughput_rps"] == pytest.approx(10.0)  # 20 more answered in 2 s
    assert row["batch_size"] == pytest.approx(8.0)  # 32 requests in 4 batches
    assert row["e2e_ms"] == pytest.approx(50.0)  # 1 s over 20 requests


def test_a_metrics_map_column_that_is_not_a_server_column_is_a_user_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "record", "-o", str(tmp_path / "d"), "--metrics-map", "x=latency"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "'latency' is not a server column" in result.stderr and "queue_depth" in result.stderr
    assert not (tmp_path / "d").exists()


def test_stage_kinds_given_to_the_recorder_reach_the_manifest(tmp_path):
    import yaml

    result = _record(
        "-o", str(tmp_path / "d"), "--duration", "1s", "--no-gpu", "--stages", "detok=cpu,rpc=wait"
    )
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    assert manifest["stages"] == {"detok": "cpu", "rpc": "wait"}
    bad = _record("-o", str(tmp_path / "e"), "--duration", "1s", "--no-gpu", "--stages", "detok=fast")
    assert bad.returncode == 2 and "NAME=KIND" in bad.stderr and not (tmp_path / "e").exists()


def test_a_recorded_thread_never_reads_above_its_process():
    from diagnose.collectors.host import HostCollector

    stop = threading.Event()
    busy = threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)], daemon=True)
    busy.start()
    try:
        host = HostCollector(watch_pids=(os.getpid(),), top=0, thread_top=0)
        rows = []
        for _ in range(4):
            time.sleep(0.2)
            rows += host.sample(time.time(), time.monotonic()).processes
    finally:
        stop.set()
        busy.join()
    readings = [(r["cpu_pct"], r["max_thread_cpu_pct"]) for r in rows if r["max_thread_cpu_pct"] is not None]
    assert readings and all(thread <= process for process, thread in readings)


def test_an_endpoint_that_answers_with_no_engines_metrics_is_said_once_and_not_called_down(tmp_path):
    """A /metrics page of no engine diagnose knows: it answers, nothing from it is kept, and the recorder
    says so once with how to map it, instead of 'never reached' and 'still down' every minute."""
    import http.server

    import yaml

    page = b"# TYPE app_things gauge\napp_things 3\nprocess_cpu_seconds_total 1.5\n"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        result = _record("-o", str(tmp_path / "d"), "--duration", "3s", "--no-gpu", "--metrics-url", url)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("answers, but nothing from it is kept") == 1
    assert "--metrics-map" in result.stderr and "never reached" not in result.stderr
    assert "still down" not in result.stderr
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    entry = manifest["sources"]["metrics"]
    assert entry["status"] == "answers, nothing kept" and "--metrics-map" in entry["reason"]


def test_a_recording_reports_its_progress_after_every_sample(tmp_path):
    """What the status line of `diagnose record` on a terminal is drawn from."""
    import threading

    from diagnose.collectors.recorder import RecordOptions, record

    seen = []
    options = RecordOptions(output=tmp_path / "dump", interval_s=0.2, gpu=False, top=3, duration_s=1.0)
    summary = record(options, threading.Event(), say=lambda line: None, progress=seen.append)
    assert len(seen) == summary.samples >= 3
    assert [p.samples for p in seen] == list(range(1, len(seen) + 1))
    assert all(p.rows["system"] == p.samples for p in seen)
    assert seen[-1].bytes_written > seen[0].bytes_written > 0
    assert seen[-1].elapsed_s >= seen[0].elapsed_s


def test_a_recording_off_a_terminal_draws_no_status_line(tmp_path):
    result = _record("-o", str(tmp_path / "d"), "--duration", "2s", "--no-gpu", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "recording 0:0" not in result.stderr
