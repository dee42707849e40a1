"""``diagnose load`` end to end: Locust's engine against the testbed's service, alone and distributed.

The service sleeps 50 ms per model call on one worker (testbed/service.py --step-ms), so its capacity is
set by its configuration (about 20 requests a second, less its own overhead); these tests check what
the run writes and says, not timings: how close the knee falls is measured in benchmarks/bench_load.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.service import answers, free_port, wait_for

pytestmark = pytest.mark.waits  # real servers and loads: its file is handed out first

QUICK = ["--baseline", "3s", "--step", "5s", "--resolution", "0.3", "--max-steps", "6", "--timeout", "20s"]
# A test that needs a knee, not a narrow one, stops at the first doubling that falls behind: fewer steps.
COARSE = [*QUICK, "--resolution", "0.99"]


@pytest.fixture
def paced_service(tmp_path):
    with _paced(tmp_path, step_ms=50) as url:
        yield url


@contextmanager
def _paced(tmp_path: Path, step_ms: float):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed.service", "--port", str(port), "--log", str(tmp_path / f"{port}.jsonl"),
         "--step-ms", str(step_ms)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers(f"{url}/health"), timeout=60)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _load(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", "load", *args], capture_output=True, text=True, timeout=timeout
    )


def test_a_run_finds_the_knee_soaks_and_leaves_a_dump(slow_service, tmp_path):
    out = tmp_path / "run"
    secret = "Bearer s3cret-t0ken"
    done = _load(f"{slow_service}/generate", "-o", str(out), *QUICK, "--start-rate", "2", "--soak", "15s",
                 "--header", f"Authorization: {secret}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not [f for f in out.rglob("*") if f.is_file() and "s3cret" in f.read_text()], "a credential in the dump"
    result = json.loads((out / "capacity.json").read_text())
    knee = result["knee"]
    said = "\n".join([*result["notes"], done.stdout])  # a string: pytest shows it whole, a tuple cut short
    assert knee["found"] and 0 < knee["kept_up_rps"] < knee["fell_behind_rps"], said
    assert result["baseline"]["answered"] == result["baseline"]["sent"] > 0
    assert result["recommended"]["rate_rps"] == pytest.approx(0.7 * knee["kept_up_rps"])
    soak = result["soak"]
    assert soak["stage"]["rate_rps"] == pytest.approx(0.7 * knee["kept_up_rps"])
    assert soak["memory_source"].endswith("/metrics"), "the service's prometheus_client says its memory"
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    stages = [result["baseline"], *result["steps"], soak["stage"]]
    assert len(rows) == sum(stage["sent"] for stage in stages)
    assert {row["load_stage"] for row in rows} == {stage["index"] for stage in stages}
    assert f"Knee: between {knee['kept_up_rps']:.3g} req/s (kept up)" in done.stdout
    analysed = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(out), "--format", "json"], capture_output=True, text=True
    )
    assert analysed.returncode == 0, analysed.stderr
    assert json.loads(analysed.stdout)["evidence"]["tables"]["requests"]["rows"] == len(rows)


@pytest.fixture
def slow_service(tmp_path):
    """A model step of 200 ms: a knee near 5 req/s, which a load engine sharing its cores reaches. Its
    runs start at 2 req/s: a busy machine slows the baseline's lone requests, and steps grown from half
    their rate would not reach the knee within the test's few."""
    with _paced(tmp_path, step_ms=200) as url:
        yield url


def test_two_locust_workers_send_the_run_together(slow_service, tmp_path):
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(
        [sys.executable, "-m", "diagnose", "load", f"{slow_service}/generate", "-o", str(out), *COARSE,
         "--start-rate", "2", "--soak", "0", "--workers", "2", "--master-port", str(port), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    locustfile = _load("--locustfile").stdout.strip()
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "locust", "--worker", "-f", locustfile, "--master-host", "127.0.0.1",
             "--master-port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    try:
        stdout, stderr = master.communicate(timeout=300)
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=20)
    assert master.returncode == 0, stderr
    assert json.loads(stdout)["knee"]["found"], "\n".join(json.loads(stdout)["notes"])
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    steps = [row for row in rows if row["load_stage"] > 0]
    assert {row["sender"] for row in steps} == {0, 1}, "each worker sends its share of every step"


def test_recorded_on_the_servers_host_the_knee_is_diagnosed_and_its_cpu_stage_named(tmp_path):
    """The testbed's tokenizer on its pure-Python path, three passes a prompt, on the event loop's side
    thread: that stage is what saturates, so at the knee the recording names it. The steps start at 4 req/s,
    not at half what one client alone achieves: on a busy machine the lone requests wait for a core too, and
    a start drawn from them left the knee beyond six steps once (the highest, 3 req/s, kept up with)."""
    port, log = free_port(), tmp_path / "service.jsonl"
    service = subprocess.Popen(
        [sys.executable, "-m", "testbed.service", "--port", str(port), "--log", str(log), "--slow-tokenizer",
         "--tokenize-passes", "3"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    out = tmp_path / "run"
    try:
        wait_for(lambda: answers(f"{url}/health"), timeout=60)
        done = _load(f"{url}/generate", "-o", str(out), *COARSE, "--start-rate", "4", "--soak", "0", "--record",
                     "--server-log", str(log), "--server-pid", str(service.pid))  # fmt: skip
    finally:
        service.terminate()
        service.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "capacity.json").read_text())
    diagnosis = result["knee_diagnosis"]
    assert diagnosis is not None, f"no knee to diagnose: {result['notes']}"
    assert diagnosis["problem"] is None and (out / "server" / "system.csv").is_file()
    fell = [s["index"] for s in result["steps"] if s["offered_rps"] >= result["knee"]["fell_behind_rps"] - 1e-9]
    assert set(fell) <= set(diagnosis["steps"])
    assert diagnosis["hypotheses"][0]["id"] == "cpu-bound-stage", diagnosis["hypotheses"]
    assert "At the knee (steps" in done.stdout and "cpu-bound-stage" in done.stdout


def test_a_request_logs_pattern_is_replayed_with_its_lengths(paced_service, tmp_path):
    """Also the server's /metrics recorded from afar (--record-metrics): none of the load machine's tables."""
    log = Path(__file__).resolve().parents[1] / "fixtures" / "dumps" / "llm-healthy" / "requests.csv"
    out = tmp_path / "run"
    done = _load(f"{paced_service}/generate", "-o", str(out), *COARSE, "--max-steps", "2", "--soak", "0", "--replay", str(log),
                 "--record-metrics")  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = yaml.safe_load((out / "server" / "manifest.yaml").read_text())
    assert manifest["host"] == "127.0.0.1" and manifest["sources"]["metrics"]["target"].endswith("/metrics")
    assert not (out / "server" / "system.csv").exists() and not (out / "server" / "processes.csv").exists()
    assert "replaying" in done.stdout and "869 requests at their recorded gaps" in done.stdout
    logged = {round(n / 1.3) for n in pd.read_csv(log)["input_len"]}
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert rows and all(row["input_words"] - 1 in logged for row in rows)  # "Summarise:" and the log's length
    refused = _load(f"{paced_service}/generate", "--replay", str(log), "--prompts", str(log), "-o", str(tmp_path / "x"))
    assert refused.returncode == 2 and "--replay and --prompts: give one" in refused.stderr


def test_a_target_that_refuses_stops_at_the_baseline_with_its_reason(tmp_path):
    done = _load(f"http://127.0.0.1:{free_port()}/generate", "-o", str(tmp_path / "run"), *QUICK, timeout=120)
    assert done.returncode == 2
    assert "diagnose: error: the baseline's 5 requests all failed, the first with:" in done.stderr
    assert "Connection refused" in done.stderr or "connect" in done.stderr.lower()
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists(), "nothing measured, no folder"


def test_bad_options_are_named_before_any_load(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "fine"}\n{"prompt": 3}\n')
    done = _load("http://127.0.0.1:9/v1/completions", "--model", "m", "--prompts", str(prompts), "-o", str(tmp_path / "a"))
    assert done.returncode == 2 and "prompts.jsonl:2: expected" in done.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "old.txt").write_text("kept")
    done = _load("http://127.0.0.1:9/generate", "-o", str(busy))
    assert done.returncode == 2 and "not an empty folder" in done.stderr and (busy / "old.txt").read_text() == "kept"
    done = _load("ftp://example/generate", "-o", str(tmp_path / "b"))
    assert done.returncode == 2 and "expected an http:// or https:// URL" in done.stderr
    done = _load("http://127.0.0.1:9/generate", "--growth", "1", "-o", str(tmp_path / "c"))
    assert done.returncode == 2 and "--growth 1: expected a factor above 1" in done.stderr
    done = _load("http://127.0.0.1:9/generate", "--server-log", "x.jsonl", "-o", str(tmp_path / "d"))
    assert done.returncode == 2 and "--server-log is for --record" in done.stderr and not (tmp_path / "d").exists()
    assert Path(_load("--locustfile").stdout.strip()).is_file()


def test_an_archived_run_whose_knee_moved_down_exits_1_and_names_what_moved(tmp_path):
    """The weekly gate: the standard run, then the same load against a model step ten times as slow. The
    knees compare by their intervals, each bracket's ends widened by what its 5-second steps can tell (a
    quarter to a half here, more on a busy machine, whose lone requests vary more): a tenfold move stays
    beyond them wherever the load engine can reach the first service's rates."""
    archive = tmp_path / "archive.sqlite"
    gate = ["--soak", "0", "--max-steps", "6", "--baseline", "6s", "--step", "5s", "--archive", "--name", "standard",
            "--archive-file", str(archive), "--format", "json"]  # 6 s alone: 30 requests, enough for an interval
    with _paced(tmp_path, step_ms=20) as url:
        first = _load(f"{url}/generate", "-o", str(tmp_path / "week-1"), *QUICK, *gate)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["history"]["against"] is None
    with _paced(tmp_path, step_ms=200) as url:
        second = _load(f"{url}/generate", "-o", str(tmp_path / "week-2"), *QUICK, *gate)
    assert second.returncode == 1, second.stderr
    history = json.loads(second.stdout)["history"]
    assert history["regressed"] and history["against"]["folder"] == str((tmp_path / "week-1").resolve())
    moved = {m["figure"]: m["verdict"] for m in history["moves"] if m["worse"]}
    assert moved["knee"] == "lower"
    # Compared too; its verdict is left to the machine: on a busy one the first week's lone requests wait
    # for a core as well, and their P50's interval can reach the second week's
    assert "one request alone, P50" in {m["figure"] for m in history["moves"]}
    kept = json.loads((tmp_path / "week-2" / "capacity.json").read_text())
    assert kept["history"] == history, "the judgement is kept with the run"
