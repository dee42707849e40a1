"""diagnose load's analysis on simulated services whose capacity and faults are known by construction.

A service of ``servers`` slots, each request taking ``service_ms``, first come first served, meets the
sweep's own arrivals (workload.poisson_arrivals): its capacity is servers / service time exactly.
The engine (Locust) is not involved here; tests/test_load_cli.py runs it against the testbed.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import replace
from itertools import islice
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.errors import InputError, LoadError
from diagnose.load.curve import measure_stage, step_resolution
from diagnose.load.plan import Api, Prompt, Settings, Stage, StageKind, Target, error_said
from diagnose.load.report import capacity, render_markdown, render_text
from diagnose.load.soak import judge_soak
from diagnose.load.sweep import StageRun, run_sweep
from diagnose.load.workload import (
    MIX,
    draw,
    fresh_prompts,
    poisson_arrivals,
    prompts_for,
    read_prompts,
    repeats_note,
    stage_seed,
)

START = 1_700_000_000.0


class Simulated:
    """A queue of ``servers`` slots; ``slower`` (seconds into a stage -> factor) and ``stalls``
    ((every_s, for_s): every slot frozen that long, that often) are its faults."""

    def __init__(
        self,
        servers: int,
        service_ms: float,
        seed: int = 0,
        slower=None,
        stalls=None,
        fail=None,
        answer=None,
        overloaded=None,
        heavy=None,
    ):
        self.servers, self.service_s, self.seed = servers, service_ms / 1000, seed
        self.overloaded = overloaded  # stage -> how many times slower each request is served there
        self.heavy = heavy  # one request in ten this many times dearer (a long prompt), else None
        self.slower, self.stalls, self.fail = slower, stalls, fail
        self.answer = answer  # (stage, request's number in it) -> (HTTP code, error) or None: answered
        self.clock = START
        self.stages: list[Stage] = []

    def __call__(self, stage: Stage) -> StageRun:
        self.stages.append(stage)
        started = self.clock
        rng = np.random.default_rng([self.seed, stage.index])
        if stage.kind is StageKind.BASELINE:
            arrivals, closed = [], True
        else:
            arrivals, closed = (
                list(poisson_arrivals(stage.rate_rps, stage.duration_s, self.seed, stage.index)),
                False,
            )
        free = [0.0] * self.servers
        rows, t = [], 0.0
        while True:
            if closed:
                if t >= stage.duration_s:
                    break
                arrival = t
            elif arrivals:
                arrival = arrivals.pop(0)
            else:
                break
            begin = max(arrival, heapq.heappop(free))
            begin = self._after_stall(begin)
            service = self.service_s * rng.uniform(0.9, 1.1) * (self.slower(begin) if self.slower else 1.0)
            service *= self.overloaded(stage) if self.overloaded else 1.0
            service *= self.heavy if self.heavy and rng.random() < 0.1 else 1.0
            end = begin + service
            heapq.heappush(free, end)
            ok = self.fail is None
            code, error = (200, "") if ok else (500, self.fail)
            answered = self.answer(stage, len(rows)) if self.answer else None
            if answered is not None:
                (code, error), ok = answered, False
            rows.append(
                {
                    "ts": started + arrival,
                    "latency_ms": (end - arrival) * 1000 if ok else math.nan,
                    "ttft_ms": math.nan,
                    "tpot_ms": math.nan,
                    "output_len": math.nan,
                    "input_words": 10,
                    "status": "ok" if ok else "error",
                    "code": code,
                    "error": error,
                    "lag_ms": 0.0,
                }
            )
            t = end
        self.clock = started + stage.duration_s + 60
        return StageRun(pd.DataFrame(rows), started)

    def _after_stall(self, begin: float) -> float:
        if self.stalls is None:
            return begin
        every, length = self.stalls
        into = begin % every
        return begin - into + length if into < length else begin


QUICK = Settings(baseline_s=10, step_s=30, soak_s=0, max_steps=12)


@pytest.mark.parametrize(
    ("servers", "service_ms", "seed"),
    [(1, 50, 0), (1, 50, 1), (4, 100, 2), (4, 100, 3), (16, 400, 4), (2, 20, 5)],
)
def test_the_knee_brackets_a_known_capacity(servers, service_ms, seed):
    known = servers * 1000 / service_ms
    sweep = run_sweep(Simulated(servers, service_ms, seed), QUICK)
    knee = sweep.knee
    assert knee.found
    assert knee.kept_up_rps <= known * 1.02 and knee.fell_behind_rps >= known * 0.98, (knee, known)
    assert knee.capacity_rps.low <= known <= knee.capacity_rps.high * 1.05
    assert (knee.fell_behind_rps - knee.kept_up_rps) / knee.kept_up_rps <= QUICK.resolution * 1.5
    assert sweep.recommended_rps == pytest.approx(0.7 * knee.kept_up_rps)


def test_the_knees_interval_holds_a_known_capacity_where_a_steps_verdict_is_chance():
    """Near capacity a 20-second step keeps up or falls behind partly by chance (a queue at its capacity
    wanders like a random walk): the bare bracket misses the capacity on some seeds, the bracket widened
    by each end's resolution (the knee's 95 % interval) holds it on each, and stays narrow enough to use."""
    settings = Settings(baseline_s=10, step_s=20, soak_s=0, max_steps=14, resolution=0.1)
    known, misses = 20.0, 0
    for seed in range(100, 108):
        knee = run_sweep(Simulated(1, 50, seed), settings).knee
        misses += not knee.kept_up_rps <= known <= knee.fell_behind_rps
        assert knee.low_rps <= known <= knee.high_rps, (seed, knee)
        assert (knee.high_rps - knee.low_rps) / known < 0.45, knee
    assert misses >= 1, "no step's verdict was chance: the test no longer tells the interval from the bracket"


def test_a_steps_resolution_is_the_critical_queues_wander_over_its_length():
    """1.96 x sqrt((1 + c_s^2) / (rate x seconds)): 20 req/s for 20 s is within 9.8 % of capacity with a
    fixed service time, 13.9 % with an exponential one (and where the service's variation is unknown)."""
    step = measure_stage(Stage(1, StageKind.STEP, 20.0, 20.0), _rows(400), START)
    assert step_resolution(step, 0.0) == pytest.approx(0.098, abs=1e-3)
    assert step_resolution(step, 1.0) == step_resolution(step, math.nan) == pytest.approx(0.1386, abs=1e-3)
    assert step_resolution(step, 0.0) > step_resolution(
        measure_stage(Stage(1, StageKind.STEP, 80.0, 20.0), _rows(1600, 80.0), START), 0.0
    ), "a longer step tells a rate from capacity more finely"


def _rows(count: int, seconds: float = 20.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": START + np.linspace(0, seconds, count, endpoint=False),
            "latency_ms": 50.0,
            "status": "ok",
            "code": 200,
            "error": "",
        }
    )


def test_steps_grow_until_one_falls_behind_then_narrow_the_bracket():
    service = Simulated(1, 50)
    run_sweep(service, QUICK)
    rates = [s.rate_rps for s in service.stages if s.kind is StageKind.STEP]
    assert rates[1] > 1.8 * rates[0]
    assert any(later < earlier for earlier, later in zip(rates, rates[1:], strict=False)), "bisects back down"


@pytest.mark.parametrize("seed", range(8))
def test_short_steps_grow_from_the_rate_asked_for_not_the_draw(seed):
    """3 s steps at a few requests a second send few, and a low draw must not turn growth into a fall."""
    service = Simulated(1, 200, seed)
    steps = run_sweep(service, Settings(baseline_s=6, step_s=3, soak_s=0, max_steps=4, resolution=0.99)).steps
    rates = [step.stage.rate_rps for step in steps]
    kept_up = [step for step in steps if not step.falls_behind()]
    assert kept_up, "a service at 5 req/s keeps up with 2.5"
    for index in range(len(steps) - 1):
        if not any(step.falls_behind() for step in steps[: index + 1]):
            assert rates[index + 1] == pytest.approx(2 * rates[index]), rates


def test_a_service_that_fails_alone_stops_the_run_with_what_it_said():
    with pytest.raises(LoadError, match="HTTP 500: model not loaded"):
        run_sweep(Simulated(1, 50, fail="HTTP 500: model not loaded"), QUICK)


def test_a_request_the_service_refuses_at_any_load_stops_the_run_where_it_is_met():
    """A server whose context is too short for the mix's long prompts answers them 400 whatever the load:
    one in ten requests of the steps here, none of the baseline's. Counted as failures, the first step
    would read as falling behind; a knee on what it accepts would not be the mix's. The run stops and
    says what the service said, and how to send requests it serves."""
    too_long = "HTTP 400: request (2949 tokens) exceeds the available context size (2048 tokens)"

    def answer(stage, number):
        return (400, too_long) if stage.kind is StageKind.STEP and number % 10 == 9 else None

    service = Simulated(4, 100, answer=answer)
    with pytest.raises(
        LoadError, match=r"refused \d+ of the \d+ requests of the step 1 .*2048 tokens.*--prompts"
    ):
        run_sweep(service, QUICK)
    assert [stage.kind for stage in service.stages] == [StageKind.BASELINE, StageKind.STEP]


@pytest.mark.parametrize("code", [408, 429, 500, 503])
def test_a_server_too_busy_to_answer_falls_behind_rather_than_refusing(code):
    """408, 429 and 5xx are a server saying it cannot take the request now: load, not the request."""

    def answer(stage, number):
        busy = stage.kind is StageKind.STEP and stage.rate_rps > 30 and number % 4 == 0
        return (code, f"HTTP {code}: busy") if busy else None

    sweep = run_sweep(Simulated(4, 100, answer=answer), QUICK)
    assert sweep.knee.found
    assert any("requests failed (HTTP" in step.falls_behind() for step in sweep.steps)


def test_a_server_that_does_less_as_its_queue_deepens_is_said_to_and_not_pooled_into_its_capacity():
    """llama.cpp's server, offered 2.5 times its knee, answered 3.9 req/s where it had answered 8.2 at
    1.2 times it, with no request failing. Pooled, such a step drags the capacity down; the knee says
    which step did less, against which, and the capacity comes from the others."""
    known = 40.0

    def overloaded(stage):
        return 3.0 if stage.rate_rps and stage.rate_rps > 70 else 1.0  # served 3x slower past 70 req/s

    settings = replace(QUICK, start_rps=25.0, growth=3.0)  # 25, then 75: far past the knee at once
    sweep = run_sweep(Simulated(4, 100, seed=3, overloaded=overloaded), settings)
    knee = sweep.knee
    assert knee.degraded, "a step at 80 req/s answered about 13 where one at 50-60 answered 40"
    assert all(d.offered_rps > 70 and d.than_offered_rps < d.offered_rps for d in knee.degraded)
    assert knee.capacity_rps.low <= known <= knee.capacity_rps.high * 1.05
    text = render_text(capacity(sweep, Target("http://127.0.0.1:1/generate", Api.HTTP)), Path("run"))
    assert "the deeper its queue, the less work it did" in text

    steady = run_sweep(Simulated(4, 100, seed=3), settings).knee
    assert not steady.degraded


def test_a_heavy_tailed_mix_is_not_read_as_doing_less_and_its_capacity_allows_for_its_draw():
    """One request in ten costs twelve (a long prompt): c_s^2 about 2.5. A saturated server's completions
    then vary more than a Poisson count, so 20-second steps past the knee answer more or less by chance.
    None may be called a server doing less, and the capacity's interval, widened by the service time's
    variance, holds the known capacity on most seeds: 10 of 12 here, 6 of 12 with Poisson intervals."""
    settings = Settings(baseline_s=10, step_s=20, soak_s=0, max_steps=14, resolution=0.1)
    known = 2 * 1000 / (50 * (0.9 + 0.1 * 12))
    misses = 0
    for seed in range(12):
        knee = run_sweep(Simulated(2, 50, seed=seed, heavy=12), settings).knee
        assert not knee.degraded, (seed, knee.degraded)
        misses += not knee.capacity_rps.low <= known <= knee.capacity_rps.high
    assert misses <= 3, misses


def test_no_knee_within_the_steps_is_said_and_no_soak_runs():
    sweep = run_sweep(Simulated(64, 10), Settings(baseline_s=10, step_s=20, max_steps=3, soak_s=60))
    assert not sweep.knee.found and sweep.soak is None
    assert any("no knee within 3 steps" in note for note in sweep.notes)


def test_a_healthy_soak_is_stable():
    sweep = run_sweep(Simulated(4, 100, seed=7), Settings(baseline_s=10, step_s=30, soak_s=600))
    assert sweep.soak is not None and sweep.soak.stable, sweep.soak.reasons
    assert sweep.soak.result.stage.rate_rps == pytest.approx(0.7 * sweep.knee.kept_up_rps)


def test_a_soak_with_a_periodic_stall_is_unstable_and_says_its_period():
    soak = _soak(Simulated(4, 100, seed=8, stalls=(45.0, 3.0)))
    assert not soak.stable
    assert soak.period is not None and soak.period.periodic
    assert abs(soak.period.period_s - 45) < 3
    assert any("stalls" in reason and "every 45 s" in reason for reason in soak.reasons)


def test_a_soak_that_slows_down_is_unstable():
    soak = _soak(Simulated(4, 100, seed=9, slower=lambda t: 1 + 0.8 * t / 600))
    assert not soak.stable
    assert any("did not keep up" in r or "drifted" in r for r in soak.reasons), soak.reasons


def test_server_memory_growing_through_the_soak_is_a_reason():
    service = Simulated(4, 100, seed=10)
    stage = Stage(0, StageKind.SOAK, 600, 20.0)
    ran = service(stage)
    ts = ran.started + np.arange(0, 600, 2.0)
    memory = pd.DataFrame({"ts": ts, "rss_bytes": 4e9 + 2e5 * (ts - ts[0]), "source": "http://x/metrics"})
    soak = judge_soak(measure_stage(stage, ran.rows, ran.started), ran.rows, ran.started, memory)
    assert any("memory grew" in reason for reason in soak.reasons)
    flat = memory.assign(rss_bytes=4e9)
    assert judge_soak(measure_stage(stage, ran.rows, ran.started), ran.rows, ran.started, flat).stable


def _soak(service: Simulated):
    stage = Stage(0, StageKind.SOAK, 600, 0.7 * service.servers / service.service_s)
    ran = service(stage)
    return judge_soak(measure_stage(stage, ran.rows, ran.started), ran.rows, ran.started)


def test_arrivals_are_poisson_at_the_rate():
    times = poisson_arrivals(50.0, 200.0, seed=3)
    assert len(times) == pytest.approx(10_000, rel=0.05)
    gaps = np.diff(times)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)  # exponential: CV 1
    split = np.sort(np.concatenate([poisson_arrivals(25.0, 200.0, 3, stream) for stream in (0, 1)]))
    assert len(split) == pytest.approx(10_000, rel=0.05)


def test_the_built_in_prompts_are_the_70_20_10_mix_and_never_the_same_twice():
    prompts = list(islice(fresh_prompts(seed=1), 2_000))
    shares = pd.Series([p.size for p in prompts]).value_counts(normalize=True)
    for size, share in MIX.items():
        assert shares[size] == pytest.approx(share, abs=0.03)
    assert len({p.text for p in prompts}) == len(prompts)
    assert min(p.words for p in prompts if p.size == "long") > max(
        p.words for p in prompts if p.size == "medium"
    )
    assert min(p.words for p in prompts if p.size == "medium") > max(
        p.words for p in prompts if p.size == "short"
    )


def test_each_stage_and_process_sends_built_in_prompts_no_other_sent():
    """An engine's prompt cache answers a repeat faster than new traffic: no built-in prompt goes twice."""
    first = [p.text for p in prompts_for([], 500, seed=stage_seed(1, 1, 0))]
    later = [p.text for p in prompts_for([], 500, seed=stage_seed(1, 2, 0))]
    other_process = [p.text for p in prompts_for([], 500, seed=stage_seed(1, 2, 1))]
    assert len(first) == len(later) == 500
    assert len(set(first) | set(later) | set(other_process)) == 1_500
    yours = [Prompt("a", 8), Prompt("b", 8)]
    assert {p.text for p in prompts_for(yours, 50, seed=3)} == {"a", "b"}  # the user's, again and again
    note = repeats_note(yours, Path("prompts.txt"))
    assert note.startswith("2 distinct prompts from prompts.txt") and "optimistic" in note


def test_classed_prompts_are_drawn_70_20_10_and_unclassed_keep_the_file_mix(tmp_path):
    classed = [Prompt("a", 8, "short"), Prompt("b " * 50, 64, "medium"), Prompt("c " * 400, 128, "long")]
    drawn = pd.Series([p.size for p in draw(classed, 5_000, seed=2)]).value_counts(normalize=True)
    assert drawn["short"] == pytest.approx(0.7, abs=0.03) and drawn["long"] == pytest.approx(0.1, abs=0.02)
    plain = [Prompt("a", 8), Prompt("b", 8), Prompt("c", 8), Prompt("d", 8)]
    counts = pd.Series([p.text for p in draw(plain, 4_000, seed=2)]).value_counts(normalize=True)
    assert counts.min() > 0.2


def test_a_prompt_file_error_names_its_line_and_column(tmp_path):
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "hello there", "max_tokens": 16, "size": "short"}\nplain text prompt\n\n')
    assert [(p.text, p.max_tokens, p.size) for p in read_prompts(good)] == [
        ("hello there", 16, "short"),
        ("plain text prompt", 128, ""),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "x", "max_tokens": }\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2, column \d+: not JSON"):
        read_prompts(bad)
    (tmp_path / "size.jsonl").write_text('{"prompt": "x", "size": "huge"}\n')
    with pytest.raises(InputError, match=r"size.jsonl:1: size 'huge'"):
        read_prompts(tmp_path / "size.jsonl")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(InputError, match="no prompts"):
        read_prompts(tmp_path / "empty.txt")


def test_the_report_is_rendered_from_the_json_alone(tmp_path):
    sweep = run_sweep(Simulated(4, 100, seed=11), Settings(baseline_s=10, step_s=30, soak_s=300))
    result = capacity(sweep, Target("http://127.0.0.1:9/generate", Api.HTTP))
    again = json.loads(json.dumps(result, allow_nan=False))  # no NaN reaches the file
    text = render_text(again, tmp_path)
    knee = result["knee"]
    assert (
        f"Knee: between {knee['kept_up_rps']:.3g} req/s (kept up) and {knee['fell_behind_rps']:.3g}" in text
    )
    assert "Soak: 300 s at" in text and "stable" in text
    assert f"{result['recommended']['rate_rps']:.3g} req/s" in text
    markdown = render_markdown(again, tmp_path)
    assert markdown.startswith("# Capacity of http://127.0.0.1:9/generate")
    assert sum(line.startswith("|") for line in markdown.splitlines()) == 2 + len(result["steps"])


def test_the_curve_and_the_soak_are_drawn_from_the_json_with_the_knee_and_the_stalls_where_they_were(
    tmp_path,
):
    from diagnose.pictures.capacity import render_capacity_pictures

    sweep = run_sweep(
        Simulated(4, 100, seed=12, stalls=(45.0, 3.0)), Settings(baseline_s=10, step_s=30, soak_s=300)
    )
    result = json.loads(json.dumps(capacity(sweep, Target("http://127.0.0.1:9/generate", Api.HTTP))))
    curve, soak = render_capacity_pictures(result, tmp_path / "assets")
    assert curve.path.stat().st_size > 0 and soak.path.stat().st_size > 0
    drawn = curve.data
    assert (drawn.kept_up_rps, drawn.fell_behind_rps) == (sweep.knee.kept_up_rps, sweep.knee.fell_behind_rps)
    assert [p.offered_rps for p in drawn.points] == sorted(s.offered_rps for s in sweep.steps)
    assert [p.kept_up for p in drawn.points][-1] is False  # the fastest step is one that fell behind
    assert soak.data.stalls and all(0 <= start < end <= 300 + 10 for start, end in soak.data.stalls)
    starts = [start for start, _ in soak.data.stalls]
    assert min(np.diff(starts)) > 30  # one every 45 s, where they were in the soak
    markdown = render_markdown(result, tmp_path, [(curve.title, "assets/curve.png", curve.alt)])
    assert "![P50 and P99 latency" in markdown and "(assets/curve.png)" in markdown


def test_a_replay_keeps_the_logs_burstiness_and_lengths_at_any_rate(tmp_path):
    from diagnose.load.workload import TOKENS_PER_WORD, read_replay, replay_arrivals, replay_prompts

    rng = np.random.default_rng(5)
    # bursts: ten requests 20 ms apart, then a pause of about 4 s; 2.5 requests a second on the whole
    gaps = np.where(np.arange(2000) % 10 == 0, rng.exponential(4.0, 2000), 0.02)
    ts = 1_764_460_800 + np.cumsum(gaps)
    inputs = rng.integers(20, 2000, size=2000)
    frame = pd.DataFrame({"ts": ts, "latency_ms": 100.0, "input_len": inputs, "output_len": inputs // 4 + 1})
    frame.to_csv(tmp_path / "requests.csv", index=False)
    replay = read_replay(tmp_path / "requests.csv")
    recorded_cv = float(np.std(gaps[1:]) / np.mean(gaps[1:]))
    assert replay.burstiness == pytest.approx(recorded_cv, rel=0.05) and replay.burstiness > 2
    assert replay.recorded_rps == pytest.approx(1 / np.mean(gaps[1:]), rel=0.01)
    times, which = replay_arrivals(replay, 40.0, 600.0, seed=1)
    assert len(times) / 600 == pytest.approx(40, rel=0.1)  # scaled to the stage's rate
    sent = np.diff(times)
    assert float(np.std(sent) / np.mean(sent)) == pytest.approx(recorded_cv, rel=0.15)  # bursts kept
    # Three processes together send that one sequence: each every third request of it, none twice
    shares = [replay_arrivals(replay, 40.0, 600.0, seed=1, stream=k, streams=3) for k in range(3)]
    union = np.concatenate([share[0] for share in shares])
    order = np.argsort(union, kind="stable")
    assert np.array_equal(union[order], times)
    assert np.array_equal(np.concatenate([share[1] for share in shares])[order], which)
    prompts = replay_prompts(replay, which[:50], seed=1)
    for prompt, index in zip(prompts, which[:50], strict=True):
        assert prompt.words - 1 == round(inputs[index] / TOKENS_PER_WORD)  # "Summarise:" and its words
        assert prompt.max_tokens == inputs[index] // 4 + 1
    few = tmp_path / "few"
    few.mkdir()
    frame.head(5).to_csv(few / "requests.csv", index=False)
    with pytest.raises(InputError, match="needs a request log with the requests' times"):
        read_replay(few)
    (tmp_path / "untimed").mkdir()
    (tmp_path / "untimed" / "requests.csv").write_text("latency_ms,input_len\n5,3\n")
    with pytest.raises(InputError, match="requests.csv: no 'ts' column"):
        read_replay(tmp_path / "untimed")


def test_settings_out_of_range_are_named():
    for bad, option in [
        (Settings(growth=1.0), "--growth"),
        (Settings(resolution=0), "--resolution"),
        (Settings(soak_share=1.5), "--share"),
        (Settings(max_steps=1), "--max-steps"),
    ]:
        with pytest.raises(InputError, match=option):
            bad.check()


def _result(kept: float, fell: float | None, capacity=(20.0, 19.0, 21.0), alone=(50.0, 49.0, 51.0)) -> dict:
    value, low, high = capacity
    return {
        "knee": {
            "found": fell is not None,
            "kept_up_rps": kept,
            "fell_behind_rps": fell,
            "capacity_rps": {"value": value, "low": low, "high": high},
        },
        "baseline": {"latency_p50_ms": dict(zip(("value", "low", "high"), alone, strict=True))},
    }


def test_a_knee_moved_down_beyond_its_bracket_is_the_regression_and_a_slower_request_is_named(tmp_path):
    from diagnose.archive import Archive
    from diagnose.load.history import judge

    with Archive(tmp_path / "archive.sqlite") as archive:
        assert judge("std", _result(18, 21), archive.capacity_runs("std")).reference is None
        archive.add_capacity("std", "/runs/week-1", _result(18, 21), regressed=False)
        same = judge("std", _result(19, 22, capacity=(20.5, 19.5, 21.5)), archive.capacity_runs("std"))
        assert not same.regressed and {m.verdict for m in same.moves} == {"within its interval"}
        slower = judge(
            "std",
            _result(11, 13, capacity=(12.0, 11.2, 12.8), alone=(80.0, 79.0, 81.0)),
            archive.capacity_runs("std"),
        )
        assert slower.regressed and slower.reference.folder == "/runs/week-1"
        moved = {m.figure: (m.verdict, m.worse) for m in slower.moves}
        assert moved == {
            "knee": ("lower", True),
            "capacity past the knee": ("lower", True),
            "one request alone, P50": ("higher", True),
        }
        archive.add_capacity("std", "/runs/week-2", _result(11, 13), regressed=True)
        # the bad week does not become the standard: next week is judged against week 1 still
        assert judge("std", _result(18, 21), archive.capacity_runs("std")).reference.folder == "/runs/week-1"
        overlapping = judge("std", _result(16, 19), archive.capacity_runs("std"))
        assert not overlapping.regressed, "brackets that overlap: the knee has not moved beyond its interval"
        assert archive.capacity_runs("other") == []


def test_a_knee_within_what_its_steps_can_tell_has_not_moved():
    """A step near capacity that kept up one week and fell behind the next is chance: brackets that touch
    (18-21, then 15-18 at the same planned rates) are a move for the bare brackets, not for the intervals
    (each end widened by its step's resolution, 10 %); a bracket well below (11-13) is a move either way."""
    from diagnose.archive import CapacityRun
    from diagnose.load.history import judge

    def with_resolution(kept: float, fell: float, resolution: float | None) -> dict:
        result = _result(kept, fell)
        result["knee"] |= {"kept_up_planned_rps": kept, "fell_behind_planned_rps": fell}
        if resolution is not None:
            result["knee"] |= {"kept_up_resolution": resolution, "fell_behind_resolution": resolution}
        return result

    for resolution, moved in ((None, True), (0.1, False)):
        week_1 = CapacityRun(
            id=1,
            added_at="2026-11-30",
            name="std",
            folder="/runs/week-1",
            regressed=False,
            result=with_resolution(18, 21, resolution),
        )
        verdict = judge("std", with_resolution(15, 18, resolution), [week_1])
        assert verdict.regressed is moved, (resolution, verdict.moves)
        assert judge("std", with_resolution(11, 13, resolution), [week_1]).regressed


def test_the_weekly_jobs_run_a_load_this_version_accepts():
    import configparser
    import shlex

    import yaml

    from diagnose.cli import _parser

    root = Path(__file__).resolve().parents[1] / "collectors"
    unit = (root / "systemd" / "diagnose-load-weekly.service").read_text().replace("\\\n", " ")
    sections = configparser.ConfigParser(interpolation=None, strict=False)
    sections.read_string(unit)
    shell, _, script = shlex.split(sections["Service"]["ExecStart"])
    (job,) = [
        d for d in yaml.safe_load_all((root / "kubernetes" / "load-weekly-cronjob.yaml").read_text()) if d
    ]
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    for command in (script, container["args"][0]):
        program, *args = shlex.split(
            command.replace("$(date +%%Y-%%m-%%d)", "d").replace("$(date +%Y-%m-%d)", "d")
        )
        assert program in ("exec",) and args[0].endswith("diagnose")
        parsed = _parser().parse_args(args[1:])
        assert parsed.command == "load" and parsed.archive and parsed.name == "chat-standard"


def test_a_service_that_collapses_past_its_knee_is_said_to_and_no_capacity_is_claimed():
    """From 18 req/s this service times half its requests out (as llama.cpp's server did, four slots and
    a thousand connections waiting): what it answered there is a collapse, not its capacity."""
    service = Simulated(1, 50, seed=12)

    def collapsing(stage: Stage) -> StageRun:
        ran = service(stage)
        if stage.rate_rps is not None and stage.rate_rps > 18:
            rows = ran.rows.copy()
            lost = rows.index[::2]
            rows.loc[lost, "status"], rows.loc[lost, "error"] = "timeout", "no whole answer within 60 s"
            rows.loc[lost, "latency_ms"] = math.nan
            return StageRun(rows, ran.started)
        return ran

    knee = run_sweep(collapsing, QUICK).knee
    assert knee.found and "requests failed (no whole answer within 60 s)" in knee.why
    assert math.isnan(knee.capacity_rps.value) and knee.collapsed_rps > 0
    result = capacity(run_sweep(collapsing, QUICK), Target("http://127.0.0.1:9/generate", Api.HTTP))
    assert "Past the knee it did not hold its throughput" in render_text(result, Path("run"))


def test_the_gate_compares_two_runs_of_one_plan_at_the_rates_their_steps_asked_for():
    """Both runs asked for 9.47 req/s at their last step: the first kept up with it, the second fell behind.
    Their draws sent 9.2 and 9.33: told at the rates sent, the second's knee is 'within' the first's
    bracket by chance; at the rates asked for it moved down."""
    from diagnose.archive import CapacityRun
    from diagnose.load.history import judge

    def run(kept: float, fell: float | None, planned: tuple[float, float | None]) -> dict:
        result = _result(kept, fell)
        result["knee"]["kept_up_planned_rps"], result["knee"]["fell_behind_planned_rps"] = planned
        return result

    week_1 = CapacityRun(1, "2026-12-01", "std", "/runs/week-1", False, run(9.2, None, (9.47, None)))
    week_2 = run(3.67, 9.33, (4.74, 9.47))
    assert judge("std", week_2, [week_1]).regressed
    told_at_sent = {k: v for k, v in week_2["knee"].items() if "planned" not in k}
    assert not judge("std", {**week_2, "knee": told_at_sent}, [week_1]).regressed  # an archive of old runs


def test_a_step_the_engine_sent_late_is_left_out_with_its_requests():
    """Where the load machine could not send at a step's rate and the service fell behind no further than
    that lateness explains, the step may measure the machine: it is not reported, and its requests are not
    in the run's dump either (the dump holds the stages reported)."""
    sweep = run_sweep(_late_past_capacity(lag_ms=900.0), QUICK)
    dropped = 1 + max(step.stage.index for step in sweep.steps)
    assert dropped not in set(sweep.requests["stage"]) and any("sent late" in note for note in sweep.notes)
    assert len(sweep.requests) == sweep.baseline.sent + sum(step.sent for step in sweep.steps)


def test_a_late_step_the_service_kept_up_with_is_kept():
    """A busy load machine sent every step 250 ms late (P99): late sends only bunch arrivals, so the steps
    the service kept up with still show it keeping up, and the sweep goes on to the knee."""
    service = Simulated(3, 100, seed=3)  # 30 req/s

    def late_throughout(stage: Stage) -> StageRun:
        ran = service(stage)
        return StageRun(ran.rows.assign(lag_ms=250.0), ran.started) if stage.rate_rps else ran

    sweep = run_sweep(late_throughout, QUICK)
    assert sweep.knee.found and sweep.knee.kept_up_rps > 15 and sweep.knee.fell_behind_rps > 30, sweep.notes
    assert sum("kept up all the same" in note for note in sweep.notes) >= 3


def test_a_late_step_whose_latency_rose_far_beyond_the_lateness_is_kept_as_the_services():
    """The engine and a saturated service share a busy machine: past 30 req/s (the service's capacity)
    the engine sent 250 ms late (P99), and the service's P50 rose by a second or more, more than twice
    the lag can add (bunching, late reading). That step shows the service falling behind: kept, noted."""
    sweep = run_sweep(_late_past_capacity(lag_ms=250.0), QUICK)
    assert sweep.knee.found, sweep.notes
    assert any("kept as the service's" in note for note in sweep.notes)


def test_a_late_step_whose_latency_the_lateness_explains_is_left_out():
    """The same service and load, the engine 900 ms late: a P50 within twice that lag of the baseline's
    could be the load machine's own doing, and the step is left out."""
    sweep = run_sweep(_late_past_capacity(lag_ms=900.0), QUICK)
    assert all(step.offered_rps < 30 for step in sweep.steps) and not sweep.knee.found
    assert any("the load machine was the limit" in note for note in sweep.notes)


def _late_past_capacity(lag_ms: float):
    service = Simulated(3, 100, seed=3)

    def run(stage: Stage) -> StageRun:
        ran = service(stage)
        if stage.rate_rps is not None and stage.rate_rps > 30:
            return StageRun(ran.rows.assign(lag_ms=lag_ms), ran.started)
        return ran

    return run


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (  # llama.cpp's server (tools/server/utils.hpp format_error_response)
            '{"error":{"code":400,"message":"request (2949 tokens) exceeds the available context size (2048 '
            'tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2949}}',
            "request (2949 tokens) exceeds the available context size (2048 tokens), try increasing it",
        ),
        (  # vLLM's ErrorResponse before 0.10
            '{"object":"error","message":"This model\'s maximum context length is 4096 tokens.",'
            '"type":"BadRequestError","param":null,"code":400}',
            "This model's maximum context length is 4096 tokens.",
        ),
        (  # TGI's router
            '{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",'
            '"error_type":"validation"}',
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",
        ),
        ("<html>502 Bad Gateway</html>", "<html>502 Bad Gateway</html>"),
    ],
)
def test_an_error_answer_is_read_for_its_message(body, said):
    assert error_said(body) == said
