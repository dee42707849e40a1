"""The run, stage by stage, each chosen from the ones before: the method's order.

1. A baseline, one request at a time: does the service answer, and how fast alone. A baseline
   that fails stops the run with what the service said, and so does a request the service refuses
   as such at any stage (a 4xx: too long for its context, a model it does not serve): refused at any
   load, it would read as falling behind at the first step that met one, and a knee measured on the
   requests it accepts is not the knee of the load asked for.
2. Steps of open-loop load, each ``growth`` times the last (the first at half what one client alone
   achieves), until one does not keep up; then the bracket is halved (geometrically) until it is
   narrower than ``resolution``.
3. A soak at ``soak_share`` of the highest rate kept up with, judged for stability.

The production setting is the method's: ``soak_share`` (70 %) of the knee, as a rate and as a
concurrency (the requests in flight at the knee, the figure a server's slots or max-num-seqs set).
Where the load engine itself fell behind its arrivals at a step the service fell behind at too, the step
may have measured the load machine, not the service: the sweep stops and says so, unless the service's
latency rose far more than that lateness can add. A late step the service kept up with is kept: late
sends only bunch arrivals. Either way a note says how late the engine was.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from diagnose.errors import LoadError
from diagnose.load.curve import Knee, StageResult, alone_p50_ms, find_knee, measure_stage, next_rate
from diagnose.load.plan import Settings, Stage, StageKind
from diagnose.load.soak import Soak, judge_soak

ENGINE_LATE_MS = 200.0  # sends this late (P99) against their arrivals: the load machine is the limit
# Sending late bunches requests (a stall of L sends L of arrivals at once: about L more of queueing at
# capacity) and a starved engine reads its answers up to L late: at most twice the lag on a latency.
LATENESS_EXPLAINS = 2.0


@dataclass(frozen=True)
class StageRun:
    """What the engine gives back for one stage: its requests and, where read, the server's memory."""

    rows: pd.DataFrame  # engine.COLUMNS: ts, latency_ms, ttft_ms, tpot_ms, status, error, lag_ms, ...
    started: float  # epoch seconds
    memory: pd.DataFrame | None = None  # ts, rss_bytes, source


RunStage = Callable[[Stage], StageRun]


@dataclass(frozen=True)
class Sweep:
    settings: Settings
    baseline: StageResult
    steps: list[StageResult]
    knee: Knee
    soak: Soak | None
    recommended_rps: float
    recommended_concurrency: int
    requests: pd.DataFrame  # every request of the run, with its stage's index
    notes: list[str] = field(default_factory=list)


def run_sweep(run: RunStage, settings: Settings, say: Callable[[str], None] = lambda _: None) -> Sweep:
    """Baseline, steps to the knee, soak: each stage run by ``run`` and measured as it ends."""
    settings.check()
    frames: list[pd.DataFrame] = []
    notes: list[str] = []

    def stage(kind: StageKind, duration: float, rate: float | None) -> tuple[StageResult, StageRun]:
        planned = Stage(len(frames), kind, duration, rate)
        say(f"{planned.name} for {duration:.0f} s")
        ran = run(planned)
        frames.append(ran.rows.assign(stage=planned.index))
        result = measure_stage(planned, ran.rows, ran.started, salt=planned.index)
        say(_line(result))
        _check_accepted(result)
        return result, ran

    baseline, _ = stage(StageKind.BASELINE, settings.baseline_s, None)
    _check_baseline(baseline)
    rate: float | None = settings.start_rps or 0.5 * 1000 / baseline.latency_p50_ms.value
    steps: list[StageResult] = []
    while rate is not None and len(steps) < settings.max_steps:
        result, _ = stage(StageKind.STEP, settings.step_s, rate)
        steps.append(result)
        if result.send_lag_p99_ms > ENGINE_LATE_MS:
            kept, note = _late_step(baseline, result)
            notes.append(note)
            if not kept:
                steps.pop()
                frames.pop()  # its requests with it: the dump holds the stages the result reports
                break
        rate = next_rate(steps, settings.growth, settings.resolution)
    if not steps:
        raise LoadError("no step of load could be measured (see the notes above)" if notes else "no step ran")
    knee = find_knee(baseline, steps)
    if not knee.found:
        notes.append(
            f"no knee within {len(steps)} steps: the service kept up with {knee.kept_up_rps:.3g} req/s, the "
            "highest offered (raise --max-steps or --start-rate)"
        )
    soak = None
    recommended = settings.soak_share * knee.kept_up_rps
    if settings.soak_s > 0 and recommended > 0 and knee.found:
        result, ran = stage(StageKind.SOAK, settings.soak_s, recommended)
        soak = judge_soak(result, ran.rows, ran.started, ran.memory)
    return Sweep(
        settings=settings,
        baseline=baseline,
        steps=steps,
        knee=knee,
        soak=soak,
        recommended_rps=recommended,
        recommended_concurrency=_concurrency(steps, knee, settings.soak_share),
        requests=pd.concat(frames, ignore_index=True),
        notes=notes,
    )


def _check_baseline(baseline: StageResult) -> None:
    if baseline.ok == 0:
        said = baseline.first_error or "no answer"
        raise LoadError(f"the baseline's {baseline.sent} requests all failed, the first with: {said}")
    if baseline.failed_share > 0.5:
        raise LoadError(
            f"{baseline.failed} of the baseline's {baseline.sent} requests failed, one request at a time "
            f"(the first: {baseline.first_error}): fix that before loading the service"
        )


def _check_accepted(stage: StageResult) -> None:
    if stage.refused:
        raise LoadError(
            f"the service refused {stage.refused} of the {stage.sent} requests of the {stage.stage.name} as "
            f"requests, not for the load (the first: {stage.first_refusal}). Send requests it serves: "
            "--prompts with prompts that fit its context (the built-in mix's long ones are 800 words with "
            "256 answer tokens), --model, --body or --header as it expects; or give it the context "
            "(vLLM --max-model-len; llama.cpp -c, shared by its --parallel slots)"
        )


def _late_step(baseline: StageResult, step: StageResult) -> tuple[bool, str]:
    """Whether a step the engine sent late still measures the service, and the note that says why.

    Late sends bunch arrivals, which only makes keeping up harder: a step kept up with all the same is the
    service's. One that fell behind is the service's only where its P50 rose further than the lateness can
    add (LATENESS_EXPLAINS); otherwise the load machine may have been the limit there, and the sweep stops.
    """
    rate = step.stage.rate_rps or step.offered_rps
    lag = step.send_lag_p99_ms
    late = f"the load engine sent late at {rate:.3g} req/s (P99 {lag:,.0f} ms behind its arrivals)"
    if not step.falls_behind():
        return True, f"{late}; the service kept up all the same (late sends only bunch arrivals): kept"
    rise = _latency_rise_ms(baseline, step)
    if rise > LATENESS_EXPLAINS * lag:
        return True, (
            f"{late}, but the service's P50 rose {rise:,.0f} ms above its baseline, more than that lateness "
            "explains: the step is kept as the service's; give this machine less else to do or add Locust "
            "workers (docs/load.md) for a cleaner measurement"
        )
    return False, (
        f"{late}: the load machine was the limit there, not the service; add Locust workers (docs/load.md) "
        "or give this machine less else to do"
    )


def _latency_rise_ms(baseline: StageResult, step: StageResult) -> float:
    """How far the step's P50 (its interval's low end) stood above the baseline's (its high end)."""
    low = step.latency_p50_ms.low
    return low - alone_p50_ms(baseline) if math.isfinite(low) else math.nan


def _concurrency(steps: list[StageResult], knee: Knee, share: float) -> int:
    """``share`` of the requests in flight at the highest rate kept up with."""
    at_knee = [s.in_flight for s in steps if s.offered_rps == knee.kept_up_rps]
    if not at_knee or not np.isfinite(at_knee[0]):
        return 0
    return max(1, math.floor(share * at_knee[0]))


def _line(result: StageResult) -> str:
    behind = result.falls_behind()
    verdict = f"fell behind: {behind}" if behind else "kept up"
    return (
        f"  sent {result.sent}, answered {result.ok}; P50 {result.latency_p50_ms.value:,.0f} ms, "
        f"P99 {result.latency_p99_ms.value:,.0f} ms, {result.throughput_rps.value:.3g} req/s; {verdict}"
    )
