"""The flight recorder: triggers in the rules' language, a bounded ring on disk, one dump per incident."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import yaml

from diagnose.collectors.flight import FlightOptions, FlightRecorder, ask_running_recorder
from diagnose.collectors.ring import Ring
from diagnose.collectors.triggers import LiveSignals, TriggerWatch, parse_trigger
from diagnose.dump import load_dump
from diagnose.errors import InputError
from tests.helpers.service import wait_for

pytestmark = pytest.mark.waits  # real servers and loads: its file is handed out first

T0 = 1_796_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _requests(n: int, latency_ms: float, status: str = "ok") -> list[dict]:
    return [{"ts": T0, "latency_ms": latency_ms, "status": status} for _ in range(n)]


# -- the trigger language --------------------------------------------------------------------------


def test_triggers_parse_conditions_with_a_hold_span_and_events():
    held = parse_trigger("p99_ms > 500 for 10s")
    assert held.hold_s == 10 and held.condition is not None and held.event_kind is None
    assert parse_trigger("queue_depth > 50 and rps < 5").hold_s == 0
    assert parse_trigger("event OOM").event_kind == "oom"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("p99 > 500", "no signal named p99; triggers can read: p50_ms"),
        ("p99_ms > 'slow'", "only numbers can be compared"),
        ("p99_ms", "must be true or false"),
        ("p99_ms > 500 for ten", "after 'for', expected a duration"),
        ("p99_ms >", "p99_ms >"),
    ],
)
def test_a_wrong_trigger_is_refused_with_what_is_wrong(text, said):
    with pytest.raises(InputError) as error:
        parse_trigger(text)
    assert said in str(error.value) and text in str(error.value)


def test_a_condition_fires_once_it_has_held_then_once_per_episode():
    watch, signals = TriggerWatch([parse_trigger("p99_ms > 500 for 3s")]), LiveSignals(window_s=2)
    fired_at = []
    for second in range(20):
        now = T0 + second
        slow = 5 <= second < 12 or second >= 16
        signals.add("requests", _requests(20, 900 if slow else 5), now)
        fired_at += [f.at - T0 for f in watch.check(signals, now)]
    # slow from 5 s: held 3 s at 8 s; fast again by 13 s (the 2 s window), re-armed; slow from 16: fires at 19
    assert fired_at == [8, 19]


def test_an_unknown_signal_never_fires_and_an_event_trigger_reads_only_its_kind():
    watch = TriggerWatch([parse_trigger("gpu_mem_used_pct > 90"), parse_trigger("event xid")])
    signals = LiveSignals(window_s=10)
    signals.add("events", [{"ts": T0, "kind": "oom"}], T0)
    assert watch.check(signals, T0) == []  # no GPU rows: unknown; an oom is not an xid
    signals.add("events", [{"ts": T0 + 1, "kind": "xid", "message": "Xid 79"}], T0 + 1)
    signals.add("gpu", [{"gpu": 0, "mem_used_bytes": 95, "mem_total_bytes": 100}], T0 + 1)
    assert sorted(f.trigger for f in watch.check(signals, T0 + 1)) == ["event xid", "gpu_mem_used_pct > 90"]
    assert watch.check(signals, T0 + 2) == []  # the event was that tick's; the GPU row too


def test_live_signals_sum_stages_count_errors_and_forget_old_requests():
    signals = LiveSignals(window_s=10)
    signals.add("requests", [{"ts": T0, "stage_queue_ms": "200", "stage_forward_ms": 100}], T0)
    signals.add("requests", _requests(3, 10, status="error"), T0 + 5)
    values = signals.values(T0 + 5)
    assert values["max_ms"] == 300 and values["requests"] == 4 and values["error_pct"] == 75
    later = signals.values(T0 + 12)  # the first request left the window
    assert later["requests"] == 3 and later["max_ms"] == 10


# -- the ring --------------------------------------------------------------------------------------


def _tick(ring, clock: Clock, rows_per_tick: int = 5) -> None:
    ring.append("system", [{"ts": clock.now, "cpu_pct": 10.0}])
    ring.append("requests", [{"ts": clock.now, "latency_ms": 5.0, "status": "x" * 200}] * rows_per_tick)
    ring.flush()
    clock.now += 1


def _ring_bytes(folder) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def test_the_ring_keeps_its_span_and_its_byte_budget(tmp_path):
    clock = Clock()
    ring = Ring(tmp_path / "ring", 1.0, keep_s=60, max_bytes=10**7, clock=clock)
    for _ in range(300):
        _tick(ring, clock)
    kept = clock.now - ring.segments()[0].start
    assert 60 <= kept <= 60 + 2 * ring.segment_s  # the whole span, and at most two segments more
    small = Ring(tmp_path / "small", 1.0, keep_s=3600, max_bytes=200_000, clock=clock)
    one_tick = 5 * 260
    for _ in range(500):
        _tick(small, clock)
        assert _ring_bytes(small.folder) <= 200_000 + one_tick
    assert small.dropped_early > 0


def test_a_cut_holds_the_rows_of_its_span_once_with_a_merged_manifest(tmp_path):
    clock = Clock()
    ring = Ring(tmp_path / "ring", 1.0, keep_s=600, max_bytes=10**8, clock=clock)
    ring.set_manifest(host="gpu-7", process_start=["2026-12-02T00:00:00Z"])
    for _ in range(45):  # five segments of 10 s
        _tick(ring, clock, rows_per_tick=1)
    dump = ring.cut(T0 + 12, T0 + 31, tmp_path / "incident", {"trigger": {"condition": "x"}})
    system = (dump / "system.csv").read_text().splitlines()
    assert system[0].startswith("ts,") and sum(line.startswith("ts,") for line in system) == 1
    assert [float(line.split(",")[0]) - T0 for line in system[1:]] == list(range(12, 32))
    manifest = yaml.safe_load((dump / "manifest.yaml").read_text())
    assert manifest["host"] == "gpu-7" and manifest["trigger"] == {"condition": "x"}
    assert manifest["rows"] == {"requests": 20, "system": 20} and manifest["complete"] is True
    assert not list(tmp_path.glob(".*partial"))
    assert len(load_dump(dump).table("system")) == 20


def test_a_torn_last_line_from_a_crash_is_left_out_of_a_cut(tmp_path):
    clock = Clock()
    ring = Ring(tmp_path / "ring", 1.0, keep_s=600, max_bytes=10**8, clock=clock)
    for _ in range(3):
        _tick(ring, clock, rows_per_tick=1)
    segment = ring.segments()[-1].path
    with open(segment / "requests.jsonl", "a") as log:
        log.write('{"ts": 1796000003, "latency_')  # what kill -9 mid-write leaves
    dump = ring.cut(T0, T0 + 10, tmp_path / "incident", {})
    lines = (dump / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["latency_ms"] == 5.0 for line in lines)


def test_one_dump_per_trigger_with_the_minutes_before_and_the_span_after(tmp_path):
    clock, said = Clock(), []
    options = FlightOptions(
        tmp_path / "incidents",
        keep_s=60,
        max_bytes=10**8,
        triggers=(parse_trigger("p99_ms > 500 for 2s"),),
        after_s=5,
        cooldown_s=60,
        window_s=1,
    )
    flight = FlightRecorder(options, 1.0, say=said.append, clock=clock)
    for second in range(200):
        slow = 100 <= second < 110 or 130 <= second < 135  # the second burst is within the cooldown
        flight.append("system", [{"ts": clock.now, "cpu_pct": 1.0}])
        flight.append("requests", [{"ts": clock.now, "latency_ms": 900.0 if slow else 5.0}])
        flight.flush()
        clock.now += 1
    flight.close(samples=200)
    assert len(flight.written) == 1
    dump = load_dump(flight.written[0])
    ts = dump.table("system")["ts"] - T0
    assert (ts.min(), ts.max()) == (102 - 60, 102 + 5)  # fired at 102 s: the ring's 60 s before, 5 s after
    kinds = dump.table("events")["kind"].tolist()
    assert kinds.count("trigger") == 1
    assert any("within --cooldown" in line for line in said)
    assert dump.manifest.extra["trigger"]["values"] == {"p99_ms": 900.0}


def test_a_signal_dumps_even_within_the_cooldown_and_a_stop_cuts_the_pending_dump_short(tmp_path):
    clock = Clock()
    options = FlightOptions(tmp_path / "incidents", keep_s=60, max_bytes=10**8, after_s=30, cooldown_s=600)
    flight = FlightRecorder(options, 1.0, say=lambda _: None, clock=clock)
    for second in range(10):
        flight.append("system", [{"ts": clock.now, "cpu_pct": 1.0}])
        if second == 5:
            flight.request_dump("SIGUSR1")
        flight.flush()
        clock.now += 1
    flight.close()
    (path,) = flight.written
    manifest = yaml.safe_load((path / "manifest.yaml").read_text())
    assert manifest["trigger"]["condition"] == "SIGUSR1" and "cut_short" in manifest["ring"]


def test_one_recorder_per_ring(tmp_path):
    options = FlightOptions(tmp_path / "incidents", keep_s=60, max_bytes=10**8)
    first = FlightRecorder(options, 1.0, say=lambda _: None)
    first.announce()
    with pytest.raises(InputError, match=f"another flight recorder \\(pid {os.getpid()}\\)"):
        FlightRecorder(options, 1.0, say=lambda _: None)
    first.close()
    FlightRecorder(options, 1.0, say=lambda _: None).close()  # the lock goes with the recorder


def test_dump_now_is_refused_until_the_recorder_has_its_handler(tmp_path):
    """SIGUSR1 ends a process that has no handler for it: --dump-now must not find a recorder's pid before
    the recorder can take the signal."""
    options = FlightOptions(tmp_path / "incidents", keep_s=60, max_bytes=10**8)
    flight = FlightRecorder(options, 1.0, say=lambda _: None)
    asked: list[int] = []
    before = signal.signal(signal.SIGUSR1, lambda signum, _: asked.append(signum))
    try:
        with pytest.raises(InputError, match="still starting; ask again in a second"):
            ask_running_recorder(options.folder)
        flight.announce()
        assert ask_running_recorder(options.folder) == os.getpid()
        wait_for(lambda: asked == [signal.SIGUSR1], timeout=5)
    finally:
        signal.signal(signal.SIGUSR1, before)
        flight.close()


# -- for real: a service, a burst, SIGUSR1 and kill -9 ---------------------------------------------


def _diagnose(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args], capture_output=True, text=True, timeout=timeout
    )


def _start_ring(folder, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "diagnose", "record", "-o", str(folder), "--no-gpu", "--interval", "0.5"]
    return subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _load(url: str, stop: threading.Event) -> None:
    deadline = time.monotonic() + 40
    while not stop.is_set() and time.monotonic() < deadline:
        urllib.request.urlopen(f"{url}/infer", timeout=5).read()
        time.sleep(0.02)


def _ring_span_s(folder) -> float:
    """Seconds of requests the ring holds so far: the recorder's own view, not the clock's (a loaded
    machine starts the recorder late)."""
    stamps = [
        json.loads(line)["ts"]
        for path in (folder / ".ring").glob("segment-*/requests.jsonl")
        for line in path.read_text().splitlines()
        if line.strip().endswith("}")
    ]
    return max(stamps) - min(stamps) if stamps else 0.0


def _incidents(folder) -> list:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


@pytest.mark.parametrize("burst", [True, False], ids=["burst", "quiet"])
def test_a_latency_burst_in_a_real_service_gives_exactly_one_dump_and_quiet_gives_none(
    tmp_path, service, burst
):
    url, log = service
    stop = threading.Event()
    threading.Thread(target=_load, args=(url, stop), daemon=True).start()
    incidents = tmp_path / "incidents"
    recorder = _start_ring(
        incidents, "--ring", "2m", "--trigger", "p99_ms > 300 for 1s", "--trigger-window", "5s",
        "--after", "2s", "--requests-log", str(log),
    )  # fmt: skip
    try:
        wait_for(lambda: (incidents / ".ring").is_dir() and _ring_span_s(incidents) >= 4, timeout=60)
        burst_at = time.time()
        if burst:
            urllib.request.urlopen(f"{url}/burst?ms=800&seconds=4", timeout=5).read()
            wait_for(lambda: _incidents(incidents), timeout=30)
        time.sleep(5 if burst else 8)  # a burst still in the window must not dump twice
    finally:
        stop.set()
        recorder.send_signal(signal.SIGINT)
        _, stderr = recorder.communicate(timeout=30)
    assert recorder.returncode == 0, stderr
    dumps = _incidents(incidents)
    assert len(dumps) == (1 if burst else 0), stderr
    if burst:
        requests = load_dump(dumps[0]).table("requests")
        arrivals = requests["ts"]
        assert arrivals.min() < burst_at - 3  # the minutes before (here: the seconds before)
        assert (requests["latency_ms"] > 700).sum() >= 3  # the burst itself
        analysed = _diagnose("file", str(dumps[0]), "--format", "json")
        assert analysed.returncode == 0, analysed.stderr
        assert json.loads(analysed.stdout)["summary"]["requests"] == len(requests)


def test_dump_now_asks_the_running_recorder_and_kill_9_leaves_the_ring_readable(tmp_path):
    incidents = tmp_path / "incidents"
    missing = _diagnose("record", "-o", str(incidents), "--dump-now")
    assert missing.returncode == 2 and "no flight recorder keeps a ring here" in missing.stderr
    recorder = _start_ring(incidents, "--ring", "1m", "--after", "1s")
    try:
        wait_for(lambda: len(list((incidents / ".ring").glob("segment-*/system.csv"))) > 0)
        time.sleep(2)
        asked = _diagnose("record", "-o", str(incidents), "--dump-now")
        assert asked.returncode == 0, asked.stderr
        wait_for(lambda: _incidents(incidents), timeout=20)
        time.sleep(1)
        recorder.send_signal(signal.SIGKILL)
        recorder.wait(timeout=10)
    finally:
        recorder.kill()
        recorder.communicate()
    (dump,) = _incidents(incidents)
    assert yaml.safe_load((dump / "manifest.yaml").read_text())["trigger"]["condition"] == "SIGUSR1"
    segments = sorted((incidents / ".ring").glob("segment-*"))
    assert segments
    for segment in segments:  # each is a dump at every moment, killed or not
        assert len(load_dump(segment).table("system")) > 0
    # a recorder started again on the same folder keeps the killed one's minutes and can dump them
    again = _start_ring(incidents, "--ring", "1m", "--after", "1s", "--duration", "4s")
    wait_for(lambda: (incidents / ".ring" / "recorder.pid").read_text().strip() == str(again.pid))
    time.sleep(1.5)
    again.send_signal(signal.SIGUSR1)
    _, stderr = again.communicate(timeout=30)
    assert again.returncode == 0 and "of an earlier run" in stderr, stderr
    newest = _incidents(incidents)[-1]
    starts = load_dump(newest).table("system")["ts"]
    killed_at = max(
        float(line.split(",")[0]) for line in (segments[-1] / "system.csv").read_text().splitlines()[1:]
    )
    assert starts.min() < killed_at


def test_flight_options_without_ring_are_refused(run_cli, tmp_path):
    code, _, err = run_cli("record", "-o", tmp_path / "d", "--trigger", "p99_ms > 1", "--after", "5s")
    assert code == 2 and "--trigger, --after need --ring SPAN" in err
    code, _, err = run_cli("record", "-o", tmp_path / "d", "--ring", "1m", "--trigger", "p99 > 1")
    assert code == 2 and "no signal named p99" in err and not (tmp_path / "d").exists()
