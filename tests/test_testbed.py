"""The testbed: its parts behave as documented, a short run records a dump that `diagnose file` reads,
and nothing it starts outlives it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
psutil = pytest.importorskip("psutil")

from testbed.load import LoadPlan, PromptMaker, measure_capacity, schedule  # noqa: E402
from testbed.model import VOCAB, Model  # noqa: E402
from testbed.scenarios import SCENARIOS  # noqa: E402
from testbed.score import by_scenario, score_report, table  # noqa: E402
from testbed.strength import cold_slow_share, tokenizer_busy, tokenizer_passes  # noqa: E402
from testbed.tokenizer import TextCodec, train, words  # noqa: E402

pytestmark = pytest.mark.waits  # real servers and loads: its file is handed out first

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def codec() -> TextCodec:
    return TextCodec(train())


def test_the_slow_tokenizer_path_gives_the_fast_paths_tokens(codec):
    maker = PromptMaker(words(), seed=3)
    for tokens in (8, 120, 700):
        prompt = maker.make(tokens)
        assert codec.encode(prompt, slow=True) == codec.encode(prompt)


def test_prompts_are_about_as_long_as_asked(codec):
    maker = PromptMaker(words(), seed=1)
    lengths = [len(codec.encode(maker.make(400))) for _ in range(20)]
    assert 200 < np.median(lengths) < 800


def test_the_model_answers_one_row_of_logits_per_sequence():
    model = Model()
    logits = model.forward([[5, 6, 7], [9] * 40, []])
    assert logits.shape == (3, VOCAB)
    assert np.isfinite(logits).all()


def test_the_hang_fault_holds_the_models_step_until_its_peer_times_out(tmp_path):
    """A real wait on the model's lock: the stuck thread takes it, and lets go when its peer times out."""
    from testbed.service import Service, Settings

    service = Service(Settings(log=tmp_path / "requests.jsonl"))
    service.hang(2.0)
    deadline = time.monotonic() + 30
    while not service._step_lock.locked() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service._step_lock.locked(), "the stuck thread never took the model's lock"
    assert service._step_lock.acquire(timeout=30), "the lock was never released"
    service._step_lock.release()


def test_the_load_keeps_the_planned_rate_and_its_story(tmp_path):
    steady = schedule(LoadPlan(600, 10))
    assert 0.85 * 6000 < len(steady) < 1.15 * 6000
    times = np.array([r.at_s for r in steady])
    assert np.all(np.diff(times) >= 0) and times[-1] < 600

    ramp = np.array([r.at_s for r in schedule(LoadPlan(600, 4, ramp_to_rps=40))])
    assert (ramp >= 300).sum() > 2 * (ramp < 300).sum()

    shifted = schedule(LoadPlan(600, 10, shift_at_s=300, length_factor=2.5))
    before = np.median([r.prompt_tokens for r in shifted if r.at_s < 300])
    after = np.median([r.prompt_tokens for r in shifted if r.at_s >= 300])
    assert after > 2 * before

    without_trace = schedule(LoadPlan(300, 10), trace_dir=tmp_path)  # the 70/20/10 mix
    assert 0.8 * 3000 < len(without_trace) < 1.2 * 3000


def test_a_scenario_without_its_fault_is_the_same_service_and_load_with_nothing_injected():
    cold = SCENARIOS["cold-start-contamination"].without_fault()
    assert cold.cause is None and cold.restart_at is None and cold.rate_rps == 8
    job = SCENARIOS["co-located-contention"].without_fault()
    assert job.job_period_s is None and job.min_duration_s == 600
    window = SCENARIOS["batch-window-too-long"].without_fault()
    assert window.service_args == ("--max-batch", "8", "--batch-window-ms", "5")
    assert window.name == "batch-window-too-long-fixed"
    tokenizer = SCENARIOS["cpu-bound-stage"].without_fault()  # the fast tokenizer, never made slow by passes
    assert tokenizer.service_args == () and tokenizer.tokenizer_busy is None


def test_the_capacity_is_what_a_service_that_is_never_idle_completes():
    """A one-worker service that takes at least 10 ms a request can complete no more than 100 a second;
    a queue of 16 keeps it busy, so the measure is that bound or, on a loaded machine, below it."""
    import httpx

    lock = asyncio.Lock()

    async def app(scope, receive, send):
        while (await receive())["type"] != "http.request":
            pass
        async with lock:
            await asyncio.sleep(0.010)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    mix = schedule(LoadPlan(30.0, 4.0, seed=1))
    capacity = asyncio.run(
        measure_capacity("http://svc", mix, PromptMaker(words()), 1.2, transport=httpx.ASGITransport(app))
    )
    assert 0 < capacity <= 100 * 1.05


@pytest.mark.parametrize("seed", range(20))
def test_the_co_located_job_recurs_on_a_period_often_enough_to_be_told_from_chance(seed):
    scenario = SCENARIOS["co-located-contention"]
    duration = scenario.min_duration_s
    starts = []
    for start in scenario.job_starts(np.random.default_rng(seed), duration):
        if start > duration - scenario.job_seconds[1]:
            break
        starts.append(start)
    gaps = np.diff(starts)
    low, high = scenario.job_period_s
    assert len(starts) >= 3  # a few occurrences before alignment is more than chance
    assert gaps.min() >= 0.9 * low and gaps.max() <= 1.1 * high
    assert gaps.max() / gaps.min() <= 1.1 / 0.9  # one period, jittered: a crontab line, not random times


def test_the_injector_starts_the_co_located_job_at_every_tick(tmp_path):
    from types import SimpleNamespace

    from testbed.runner import _Injector

    class Children:  # records what would be started; each "job" is over at once
        def __init__(self) -> None:
            self.started: list[list[str]] = []

        def start(self, args, log):
            self.started.append(args)
            return SimpleNamespace(wait=lambda: None)

    children = Children()
    # A 6 s run scales the period by 6/600: ticks about a second apart.
    injector = _Injector(
        children, SCENARIOS["co-located-contention"], 6.0, 0, SimpleNamespace(root=tmp_path), 0
    )

    async def three_ticks() -> None:
        task = asyncio.create_task(injector.run())
        while len(children.started) < 3 and not task.done():
            await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(asyncio.wait_for(three_ticks(), timeout=60))
    assert len(children.started) == 3 and len(injector.fault_windows) == 3
    assert all("testbed.job" in args for args in children.started)


def test_a_run_shows_the_loads_progress_and_whether_a_fault_is_on():
    import time
    from types import SimpleNamespace

    from testbed.load import LoadResult
    from testbed.runner import LoadProgress

    shown: list[str] = []
    now = time.time()
    injector = SimpleNamespace(fault_windows=[(now - 30, now - 20), (now - 1, now + 60)])
    result = LoadResult(sent=1234, ok=1200, failed=3)

    async def one_line() -> None:
        task = asyncio.create_task(
            LoadProgress("co-located-contention", shown.append).run(600, result, injector)
        )
        while not shown:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(one_line(), timeout=30))
    assert shown[0] == (
        "testbed: co-located-contention: load 0 of 600 s · sent 1,234, ok 1,200, failed 3 · fault on (2 injected)"
    )


def test_a_run_is_scored_by_the_rank_and_score_of_its_cause():
    def report(*hypotheses):
        return {"hypotheses": [{"id": i, "score": s} for i, s in hypotheses]}

    first = score_report("r", {"scenario": "x", "cause": "cpu-bound-stage"}, report(("cpu-bound-stage", 0.8)))
    assert first.first and first.top3 and not first.false_alarms
    weak = score_report("r", {"cause": "cpu-bound-stage"}, report(("cpu-bound-stage", 0.3)))
    assert not weak.first and weak.top3
    second = score_report(
        "r", {"cause": "queue-saturation"}, report(("cpu-bound-stage", 0.7), ("queue-saturation", 0.6))
    )
    assert second.rank == 2 and not second.first and second.false_alarms == ("cpu-bound-stage",)
    missed = score_report("r", {"cause": "queue-saturation"}, report())
    assert missed.rank is None and not missed.top3
    healthy = score_report("r", {"cause": None}, report(("input-length-shift", 0.4)))
    assert healthy.first and not healthy.false_alarms
    alarmed = score_report("r", {"cause": None}, report(("input-length-shift", 0.55)))
    assert not alarmed.first and alarmed.false_alarms == ("input-length-shift",)


def test_a_runs_score_says_what_kinds_of_evidence_its_cause_cited():
    stall = {
        "id": "engine-stall",
        "score": 1.0,
        "evidence": [
            {"sources": ["requests.jsonl: requests in flight, none receiving a token"]},
            {"sources": ["server.csv: running", "events.jsonl: engine_stall", "requests.jsonl: ttft_ms"]},
        ],
    }
    other = {"id": "over-parallelism", "score": 0.2, "evidence": [{"sources": ["processes.csv: cpu_pct"]}]}
    scored = score_report("r", {"cause": "engine-stall"}, {"hypotheses": [other, stall]})
    assert scored.cited == ("request log", "engine metrics", "log events")
    missed = score_report("r", {"cause": "queue-saturation"}, {"hypotheses": [other]})
    assert missed.cited == ("processes",)  # what came first instead cited


def test_the_tokenizers_passes_are_chosen_from_its_cost_and_the_rate():
    """9 ms a prompt at 10 a second is 9 % busy: seven passes make 63 %, the nearest to two thirds."""
    setting = tokenizer_passes(9.0, 10.0, 0.65)
    assert setting.passes == 7 and setting.expected_busy == pytest.approx(0.63)
    assert tokenizer_passes(80.0, 10.0, 0.65).passes == 1  # already busier than aimed: one pass, never none
    with pytest.raises(ValueError):
        tokenizer_passes(0.0, 10.0, 0.65)


def test_the_tokenizers_busy_share_is_read_from_the_services_own_log(tmp_path):
    log = tmp_path / "requests.jsonl"
    lines = [json.dumps({"ts": 100.0 + k / 10, "stage_tokenize_ms": 60.0}) for k in range(100)]  # 10 s, 10/s
    log.write_text("\n".join([*lines, '{"ts": 200.0, "stage_tok']) + "\n")  # the last line cut by a stop
    assert tokenizer_busy(log, 100.0, 110.0) == pytest.approx(0.6)
    assert tokenizer_busy(log, 100.0, 105.0) == pytest.approx(0.6)  # half the requests in half the time
    assert tokenizer_busy(log, 300.0, 310.0) is None
    assert tokenizer_busy(tmp_path / "none.jsonl", 100.0, 110.0) is None


def test_a_cold_starts_share_of_slow_requests_is_read_from_the_services_own_log(tmp_path):
    """200 s at 10/s, starts at 0 and 100 s: 30 of each start's first 60 s are slow, the rest about alike."""
    log = tmp_path / "requests.jsonl"
    rows = []
    for k in range(2000):
        ts = 1000.0 + k / 10
        slow = (ts - 1000.0) % 100 < 3  # the first 3 s after each start: 30 requests each
        rows.append(json.dumps({"ts": ts, "latency_ms": 5000.0 if slow else 100.0 + k % 7}))
    log.write_text("\n".join([*rows, '{"ts": 1200.0, "lat']) + "\n")  # the last line cut by a stop
    assert cold_slow_share(log, [1000.0, 1100.0], 60.0, 1200.0) == pytest.approx(60 / 2000)
    # A slow spell outside the windows raises the P99 they are compared with: fewer count.
    assert cold_slow_share(log, [1000.0], 2.0, 1200.0) == pytest.approx(0.0)
    assert cold_slow_share(log, [1000.0], 1000.0, 1200.0) is None  # nothing warm to compare with
    assert cold_slow_share(tmp_path / "none.jsonl", [1000.0], 60.0, 1200.0) is None


def test_the_cold_start_scenario_loads_for_its_share_of_the_run_and_its_twin_does_not():
    scenario = SCENARIOS["cold-start-contamination"]
    # 3 % of a 4-minute run at 8/s is 57.6 requests, over two starts: 3.6 s each.
    assert scenario.load_s(240.0) == pytest.approx(3.6)
    assert scenario.without_fault().load_s(240.0) is None


def test_the_services_start_up_lasts_its_load_time_once(tmp_path, monkeypatch):
    """The first caller makes the tokenizer, then waits out the rest of the weights' load; later callers
    find it made."""
    import threading

    from testbed.service import Service, Settings

    service = Service(Settings(log=tmp_path / "requests.jsonl", step_ms=1.0, load_s=30.0))
    slept: list[float] = []
    sleep, caller = time.sleep, threading.current_thread()
    # Only this thread's sleeps are the start-up's: the service's own threads go on sleeping for real.
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(s) if threading.current_thread() is caller else sleep(s))
    first, again = service.ready(), service.ready()
    assert first is again and len(slept) == 1 and 0 < slept[0] <= 30.0


def test_a_run_whose_fault_fell_short_is_shown_and_not_counted():
    report = {"hypotheses": [{"id": "cpu-bound-stage", "score": 0.2}]}
    weak = score_report("weak", {"cause": "cpu-bound-stage", "strength": {"held": False}}, report)
    strong = score_report("strong", {"cause": "cpu-bound-stage", "strength": {"held": True}}, report)
    shown = table([weak, strong])
    assert "weak (weak fault)" in shown and "not counted" in shown and "AC@1 0/1" in shown


def test_the_seeds_of_a_scenario_are_summed_up_with_what_came_first_instead():
    def report(*hypotheses):
        return {"hypotheses": [{"id": i, "score": s} for i, s in hypotheses]}

    scores = [
        score_report("a-s1", {"scenario": "a", "cause": "x"}, report(("x", 0.9))),
        score_report("a-s2", {"scenario": "a", "cause": "x"}, report(("y", 0.6), ("x", 0.3))),
        score_report("a-s3", {"scenario": "a", "cause": "x", "strength": {"held": False}}, report()),
        score_report("h-s1", {"scenario": "h", "cause": None}, report(("y", 0.2))),
    ]
    rows = by_scenario(scores).splitlines()[2:]
    assert rows == ["| a | 2 | 1 | 0.30-0.90 | y 0.60 |", "| h | 1 | 1 | - | - |"]  # the weak run left out


def _testbed(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "testbed", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def test_a_short_run_records_a_dump_that_diagnose_reads_and_scores(tmp_path):
    """The cold-start scenario exercises the most parts: the restart, the injector, the recorder's stamp."""
    run = _testbed("run", "cold-start-contamination", "--duration", "30s", "--out", str(tmp_path / "run"))
    output, _ = run.communicate(timeout=300)
    assert run.returncode == 0, output
    dump = tmp_path / "run" / "dump"
    truth = yaml.safe_load((tmp_path / "run" / "truth.yaml").read_text())
    assert truth["scenario"] == "cold-start-contamination" and truth["cause"] == "cold-start-contamination"
    lines = (dump / "requests.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert len(lines) >= 0.8 * truth["load"]["ok"]
    assert {"ts", "latency_ms", "stage_tokenize_ms", "stage_forward_ms", "input_len"} <= row.keys()
    events = [json.loads(line) for line in (dump / "events.jsonl").read_text().splitlines()]
    (restart,) = [e for e in events if e["kind"] == "restart"]
    (began, _), *_ = truth["fault_windows"]
    assert began - 1 <= restart["ts"] <= began + 5, "stamped at the new process's birth"
    # Requests sent while it restarts fail, as many as a busy machine makes the restart long: what must
    # hold is that the new process answers (the run's later seconds are all its own)
    answered_after = [line for line in lines if json.loads(line)["ts"] > restart["ts"] + 5]
    assert len(answered_after) >= 10, "the restarted service must answer"
    score = _testbed("score", str(tmp_path))
    table, _ = score.communicate(timeout=300)
    assert score.returncode == 0, table
    # 3 % of a 30 s run's requests arrive while it loads: 0.45 s a start. Whether that held is the run's.
    assert truth["strength"]["cold_slow_share"]["load_s"] == pytest.approx(0.45)
    assert isinstance(truth["strength"]["held"], bool)
    assert "| cold-start-contamination |" in table and "AC@1" in table


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_nothing_the_testbed_starts_outlives_it(tmp_path, how):
    run = _testbed("run", "healthy-low", "--duration", "120s", "--out", str(tmp_path / "run"))
    deadline = time.monotonic() + 120
    children: list[psutil.Process] = []
    while time.monotonic() < deadline:  # until the service and the recorder are both up
        children = _descendants(run.pid)
        if (tmp_path / "run" / "recorder.log").exists() and len(children) >= 2:
            break
        time.sleep(0.5)
    assert len(children) >= 2, "the runner never started its service and recorder"
    os.kill(run.pid, how)
    run.communicate(timeout=60)
    gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, f"left running: {[p.cmdline() for p in alive]}"


def test_the_event_loop_fault_tokenizes_in_the_handler_and_logs_no_stage_it_cannot_see(tmp_path):
    """The async-server mistake: the tokenizer runs on the event loop, and the service, which cannot see
    the wait for the loop, logs neither a network stage nor a wait for a tokenizer thread."""
    import json

    from starlette.testclient import TestClient

    from testbed.service import Service, Settings, make_app

    log = tmp_path / "requests.jsonl"
    service = Service(Settings(log=log, slow_tokenizer=True, tokenize_on_loop=True))
    with TestClient(make_app(service)) as client:
        answer = client.post("/generate", json={"prompt": "the quick brown fox", "max_tokens": 4})
    assert answer.status_code == 200
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["stage_tokenize_ms"] >= 0 and record["status"] == "ok"
    assert "stage_network_ms" not in record and "stage_tokenize_queue_ms" not in record
