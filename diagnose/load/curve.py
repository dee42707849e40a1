"""Each stage measured from its requests, and the knee found on the curve of latency against load.

A stage's figures are the requests it sent: P50/P99 latency with block-bootstrap intervals (the same
bootstrap ``compare`` uses), TTFT and TPOT where the answers streamed, throughput (answers completed
within the stage, with a Poisson counting interval), and the mean number in flight (Little's law).

A stage *keeps up* when the service answers what it is offered: fewer than ``MAX_FAILED_SHARE`` of
the requests fail, throughput follows the offered rate, and no backlog builds. Past a service's
capacity an open-loop load piles up a queue, so each request waits a little longer than the one
before: a latency that grows with the time into the stage (Theil-Sen slope, its interval above
``BACKLOG_SLOPE``) says so even where the stage is too short for throughput to fall visibly behind.
The knee is bracketed by the highest rate kept up with and the lowest not.

A step's verdict is itself uncertain near capacity: a queue at exactly its capacity wanders like a
random walk whose variance grows by lambda x (c_a^2 + c_s^2) a second (Poisson arrivals, c_a^2 = 1;
c_s^2 the service time's squared coefficient of variation, from the baseline's requests one at a
time), so over a step of T seconds it drifts z x sqrt(lambda x (1 + c_s^2) x T) requests either way,
and a rate within z x sqrt((1 + c_s^2) / (lambda x T)) of capacity may keep up or fall behind by
chance. The knee's 95 % interval is the bracket widened by that much at each end
(:func:`step_resolution`): about +-10 % for 20-second steps at 20 req/s, narrower for longer steps or
faster services. The same variance widens the capacity measured past the knee (:func:`_saturated`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from diagnose.bootstrap import Resampled, interval, replicate_weights, time_blocks
from diagnose.load.plan import Stage, StageKind
from diagnose.quantiles import quantiles

MAX_FAILED_SHARE = 0.01
# A 4xx answer refuses the request itself (too long for the context, a wrong model, a bad body), whatever
# the load; these two are a server saying it is too busy, as a 5xx, a timeout or a reset does.
_BUSY_4XX = (408, 429)
FOLLOWS = 0.95  # throughput's upper bound under this share of the offered rate: it no longer follows
# A queue that grows by 2 % of the service's rate adds 0.02 s of wait per second of load (the slope of
# latency against send time is offered / capacity - 1): past that, the stage did not keep up.
BACKLOG_SLOPE = 0.02
LATENCY_DEPARTS = 2.0  # P50 at twice its value alone: where latency has left its low-load level
Z95 = 1.96  # a normal 95 % interval's half-width in standard deviations
_SETTLED = 0.9  # the share of a step over which its throughput is counted


@dataclass(frozen=True)
class Figure:
    """A measured figure with its 95 % interval (nan where it has none)."""

    value: float
    low: float = math.nan
    high: float = math.nan


@dataclass(frozen=True)
class StageResult:
    stage: Stage
    sent: int
    ok: int
    failed: int
    offered_rps: float
    throughput_rps: Figure
    latency_p50_ms: Figure
    latency_p99_ms: Figure
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    in_flight: float  # mean requests in flight: throughput times mean latency
    backlog_slope: Figure  # seconds of latency gained per second into the stage
    send_lag_p99_ms: float  # how late the load engine sent, against the arrivals drawn
    first_error: str
    latency_cv2: float = math.nan  # the answered requests' latency: variance over mean squared
    refused: int = 0  # answered with a 4xx that refuses the request itself (_BUSY_4XX aside)
    first_refusal: str = ""

    @property
    def failed_share(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    def falls_behind(self) -> str:
        """Why this stage did not keep up ("" where it did)."""
        if self.sent and self.failed_share > MAX_FAILED_SHARE:
            return f"{self.failed_share:.1%} of requests failed ({self.first_error})"
        if self.stage.kind is StageKind.BASELINE:
            return ""
        if self.throughput_rps.high < FOLLOWS * self.offered_rps:
            return (
                f"throughput {self.throughput_rps.value:.3g} req/s (at most {self.throughput_rps.high:.3g}) "
                f"of {self.offered_rps:.3g} offered"
            )
        if self.backlog_slope.low > BACKLOG_SLOPE:
            return (
                f"a backlog built: latency grew {self.backlog_slope.value * 1000:.0f} ms a second "
                f"(at least {self.backlog_slope.low * 1000:.0f})"
            )
        return ""


def measure_stage(stage: Stage, rows: pd.DataFrame, started: float, salt: int = 0) -> StageResult:
    """The stage's figures from its requests (``rows``: the engine's columns) sent from ``started``
    (epoch seconds) for ``stage.duration_s``."""
    sent = len(rows)
    good = rows[rows["status"] == "ok"]
    latency = good["latency_ms"].to_numpy(dtype="float64")
    done_at = good["ts"].to_numpy(dtype="float64") + latency / 1000
    ended = started + stage.duration_s
    if stage.kind is StageKind.BASELINE:
        completed = len(good)
        window = stage.duration_s
    else:  # after the first tenth: answers to the requests of the first moments, before any queue
        settle = started + (1 - _SETTLED) * stage.duration_s
        completed = int(((done_at >= settle) & (done_at <= ended)).sum())
        window = ended - settle
    errors = rows.loc[rows["status"] != "ok", "error"]
    refusals = rows.loc[rows["code"].between(400, 499) & ~rows["code"].isin(_BUSY_4XX), "error"]
    return StageResult(
        stage=stage,
        sent=sent,
        ok=len(good),
        failed=sent - len(good),
        offered_rps=sent / stage.duration_s,
        throughput_rps=_rate(completed, window),
        latency_p50_ms=_quantile(good, "latency_ms", 0.50, salt),
        latency_p99_ms=_quantile(good, "latency_ms", 0.99, salt),
        ttft_p50_ms=_plain(good, "ttft_ms", 0.50),
        ttft_p99_ms=_plain(good, "ttft_ms", 0.99),
        tpot_p50_ms=_plain(good, "tpot_ms", 0.50),
        in_flight=float(latency.sum() / 1000 / stage.duration_s) if latency.size else 0.0,
        backlog_slope=backlog_slope(good, started),
        send_lag_p99_ms=_plain(rows, "lag_ms", 0.99),
        first_error=str(errors.iloc[0]) if len(errors) else "",
        latency_cv2=_cv2(latency),
        refused=len(refusals),
        first_refusal=str(refusals.iloc[0]) if len(refusals) else "",
    )


def _cv2(values: np.ndarray) -> float:
    """Variance over mean squared, of the finite values (nan for fewer than three)."""
    values = values[np.isfinite(values)]
    if values.size < 3 or values.mean() <= 0:
        return math.nan
    return float(values.var(ddof=1) / values.mean() ** 2)


def step_resolution(step: StageResult, service_cv2: float) -> float:
    """The share of its rate within which a step cannot tell a service at capacity from one above or
    below it (see the module's note): z x sqrt((1 + c_s^2) / (lambda x T)). ``service_cv2``: the
    service time's squared coefficient of variation (nan: unknown, taken as 1, an exponential's)."""
    rate, seconds = step.offered_rps, step.stage.duration_s
    if rate <= 0 or seconds <= 0:
        return math.nan
    cv2 = service_cv2 if math.isfinite(service_cv2) else 1.0
    return Z95 * math.sqrt((1 + cv2) / (rate * seconds))


def _rate(count: int, seconds: float) -> Figure:
    """A count's rate with the normal approximation to its Poisson interval (Garwood's for few)."""
    if seconds <= 0:
        return Figure(math.nan)
    low = stats.chi2.ppf(0.025, 2 * count) / 2 if count else 0.0
    high = stats.chi2.ppf(0.975, 2 * count + 2) / 2
    return Figure(count / seconds, low / seconds, high / seconds)


def _saturated(throughput: Figure, service_cv2: float) -> Figure:
    """A saturated server's throughput with the interval its own variance gives.

    A server that is never idle completes a renewal stream whose count varies by the service time's
    squared coefficient of variation (c_s^2) where a Poisson count varies by one: llama.cpp's server
    on the built-in mix (answers of 32 to 256 tokens, long prompts a dozen short ones' cost), saturated,
    read 7.6 to 13.4 req/s over 30-second windows where a Poisson count of ~300 gives +-11 %. So the
    interval is widened by sqrt(c_s^2) where that is above one, never narrowed."""
    spread = math.sqrt(max(1.0, service_cv2)) if math.isfinite(service_cv2) else 1.0
    value = throughput.value
    return Figure(
        value, value - (value - throughput.low) * spread, value + (throughput.high - value) * spread
    )


def _quantile(rows: pd.DataFrame, column: str, q: float, salt: int) -> Figure:
    values = rows[column].to_numpy(dtype="float64")
    ts = rows["ts"].to_numpy(dtype="float64")
    keep = np.isfinite(values)
    values, ts = values[keep], ts[keep]
    if values.size == 0:
        return Figure(math.nan)
    order = np.argsort(ts, kind="stable")
    values, ts = values[order], ts[order]
    value = float(quantiles(values, [q])[0])
    if values.size < 20:  # too few for blocks: the value alone
        return Figure(value)
    blocks = time_blocks(ts, values)
    resampled = Resampled(values, blocks, replicate_weights(blocks, salt))
    low, high = interval(resampled.replicate_quantiles([q])[0])
    return Figure(value, low, high)


def _plain(rows: pd.DataFrame, column: str, q: float) -> float:
    if column not in rows:
        return math.nan
    values = rows[column].to_numpy(dtype="float64")
    values = values[np.isfinite(values)]
    return float(quantiles(values, [q])[0]) if values.size else math.nan


def backlog_slope(rows: pd.DataFrame, started: float) -> Figure:
    """Theil-Sen slope of latency (s) against send time (s into the stage), with its 95 % interval."""
    if len(rows) < 10:
        return Figure(math.nan)
    return theil_sen(
        rows["ts"].to_numpy(dtype="float64") - started, rows["latency_ms"].to_numpy(dtype="float64") / 1000
    )


def theil_sen(x: np.ndarray, y: np.ndarray) -> Figure:
    """The median of pairwise slopes of y against x, with its 95 % interval: robust to the slow tail."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0:
        return Figure(math.nan)
    if len(x) > 2000:  # Theil-Sen is quadratic: thinned evenly in x, the slope stays, its interval widens
        pick = np.argsort(x, kind="stable")[np.linspace(0, len(x) - 1, 2000).astype(int)]
        x, y = x[pick], y[pick]
    slope, _, low, high = stats.theilslopes(y, x, alpha=0.95)
    return Figure(float(slope), float(low), float(high))


@dataclass(frozen=True)
class Degraded:
    """A step past the knee that answered less than a lower rate did: ``than`` is that step."""

    offered_rps: float
    throughput_rps: Figure
    than_offered_rps: float
    than_throughput_rps: Figure


@dataclass(frozen=True)
class Knee:
    """Where the service stops keeping up: between ``kept_up_rps`` (the highest rate it answered) and
    ``fell_behind_rps`` (the lowest it did not); ``capacity_rps``: throughput measured where it fell
    behind, with its interval (a service past its capacity answers at its capacity), over the steps that
    failed few requests. Where every step past the knee failed many, the service did not hold its
    capacity under overload: ``collapsed_rps`` is what it still answered, and no capacity is claimed.
    A step past the knee that answered fewer, without failing, than a step at a lower rate did (their
    intervals apart) measures a service doing less work as its queue deepens, not its capacity: it is
    in ``degraded`` and left out of the capacity."""

    kept_up_rps: float
    fell_behind_rps: float  # nan: never reached within the run's steps
    # The same bracket at the rates the steps asked for: two runs of one plan ask for the same rates,
    # so the weekly gate compares these (the draws of one step differ between two runs by chance)
    kept_up_planned_rps: float
    fell_behind_planned_rps: float
    capacity_rps: Figure
    collapsed_rps: float  # nan unless every step past the knee failed more than MAX_FAILED_SHARE
    latency_rises_rps: float  # the lowest rate whose P50 left its low-load level (nan: none did)
    why: str  # what the first stage past the knee showed
    # The bracket's ends widened by what their steps can tell (step_resolution, a share of the rate):
    # the knee's 95 % interval, low_rps to high_rps
    kept_up_resolution: float = math.nan
    fell_behind_resolution: float = math.nan
    degraded: tuple[Degraded, ...] = ()

    @property
    def low_rps(self) -> float:
        """The knee's interval, low end: the highest rate kept up with, less its step's resolution."""
        return self._interval()[0]

    @property
    def high_rps(self) -> float:
        """The knee's interval, high end: the lowest rate fallen behind at, plus its step's resolution."""
        return self._interval()[1]

    @property
    def found(self) -> bool:
        return math.isfinite(self.fell_behind_rps)

    def _interval(self) -> tuple[float, float]:
        return widened(
            self.kept_up_rps, self.fell_behind_rps, self.kept_up_resolution, self.fell_behind_resolution
        )


def widened(kept_up: float, fell_behind: float, kept_by: float, behind_by: float) -> tuple[float, float]:
    """A bracket's ends widened by their steps' resolutions (shares of their rates; a resolution not
    known, nan, widens nothing): the knee's 95 % interval, as the report and the weekly gate read it."""
    kept_by = kept_by if math.isfinite(kept_by) else 0.0
    behind_by = behind_by if math.isfinite(behind_by) else 0.0
    return kept_up * max(0.0, 1 - kept_by), fell_behind * (1 + behind_by)


def find_knee(baseline: StageResult, steps: list[StageResult]) -> Knee:
    """The bracket around the knee from every step run (in any order), at the rates offered."""
    kept_up, behind = _bracket(steps)
    kept_up_planned, behind_planned = _bracket(steps, _planned)
    degraded = _degraded(behind, steps, baseline.latency_cv2)
    slowed = [step for step, _ in degraded]
    kept_step = next((s for s in steps if not s.falls_behind() and s.offered_rps == kept_up), None)
    alone = alone_p50_ms(baseline)
    rises = [s.offered_rps for s in steps if s.latency_p50_ms.low > LATENCY_DEPARTS * alone] + [
        s.offered_rps for s in behind
    ]
    return Knee(
        kept_up_rps=kept_up,
        fell_behind_rps=behind[0].offered_rps if behind else math.nan,
        kept_up_planned_rps=kept_up_planned,
        fell_behind_planned_rps=_planned(behind_planned[0]) if behind_planned else math.nan,
        capacity_rps=_saturated(
            _pooled_throughput([s for s in behind if s not in slowed]), baseline.latency_cv2
        ),
        collapsed_rps=_collapsed(behind),
        latency_rises_rps=min(rises) if rises else math.nan,
        why=behind[0].falls_behind() if behind else "",
        kept_up_resolution=step_resolution(kept_step, baseline.latency_cv2) if kept_step else math.nan,
        fell_behind_resolution=step_resolution(behind[0], baseline.latency_cv2) if behind else math.nan,
        degraded=tuple(found for _, found in degraded),
    )


def alone_p50_ms(baseline: StageResult) -> float:
    """One request alone, P50: its interval's high end (its value where it has none), the level latency
    is judged to have left."""
    alone = baseline.latency_p50_ms.high
    return alone if math.isfinite(alone) else baseline.latency_p50_ms.value


def next_rate(steps: list[StageResult], growth: float, resolution: float) -> float | None:
    """The next step's rate: ``growth`` times the last until one falls behind, then the geometric middle
    of the bracket until it is narrower than ``resolution``; None once the knee is bracketed that finely.
    Planned from the rates asked for, not the draws: a short step's draw can fall far under its rate (3 s
    at 2.4 req/s sends 3 or fewer one time in 14), and growth from a low draw goes down instead of up."""
    kept_up, behind = _bracket(steps, _planned)
    if not behind:
        return max(_planned(s) for s in steps) * growth
    if kept_up <= 0:  # behind at the lowest rate tried: go down
        return min(_planned(s) for s in steps) / growth
    fell_behind = _planned(behind[0])
    if (fell_behind - kept_up) / kept_up <= resolution:
        return None
    return math.sqrt(kept_up * fell_behind)


def _offered(step: StageResult) -> float:
    return step.offered_rps


def _planned(step: StageResult) -> float:
    return step.stage.rate_rps if step.stage.rate_rps is not None else step.offered_rps


def _bracket(
    steps: list[StageResult], rate: Callable[[StageResult], float] = _offered
) -> tuple[float, list[StageResult]]:
    """The highest rate kept up with below every rate that fell behind (0 if none), and the steps that
    fell behind, lowest first. The knee is told at the rates offered: a step's Poisson draw (10 s at
    20 req/s sends 200 ± 28). A step kept up with above one that was not is a lucky draw, not a bracket."""
    behind = sorted((s for s in steps if s.falls_behind()), key=rate)
    ceiling = rate(behind[0]) if behind else math.inf
    kept = [rate(s) for s in steps if not s.falls_behind() and rate(s) < ceiling]
    return (max(kept) if kept else 0.0), behind


def _collapsed(behind: list[StageResult]) -> float:
    """The most any step past the knee answered, where every one of them failed many requests."""
    if not behind or any(s.failed_share <= MAX_FAILED_SHARE for s in behind):
        return math.nan
    return max(s.throughput_rps.value for s in behind)


def _degraded(
    behind: list[StageResult], steps: list[StageResult], service_cv2: float
) -> list[tuple[StageResult, Degraded]]:
    """The steps past the knee, failing few, whose throughput's interval lies wholly below that of the
    best-answered step at a lower rate, kept up with or not: more load, less work done (a server spending
    itself on its queue), which a pooled capacity would hide. Each interval is widened by the service
    time's variance (:func:`_saturated`): a heavy-tailed mix draws cheap and dear stretches by chance."""
    answered = [s for s in steps if s.failed_share <= MAX_FAILED_SHARE]
    found = []
    for step in (s for s in behind if s.failed_share <= MAX_FAILED_SHARE):
        lower = [s for s in answered if _offered(s) < _offered(step)]
        if not lower:
            continue
        best = max(lower, key=lambda s: s.throughput_rps.value)
        here, there = (
            _saturated(step.throughput_rps, service_cv2),
            _saturated(best.throughput_rps, service_cv2),
        )
        if here.high < there.low:
            found.append((step, Degraded(step.offered_rps, here, best.offered_rps, there)))
    return found


def _pooled_throughput(behind: list[StageResult]) -> Figure:
    """Throughput over the stages past the knee that failed few requests (a stage that failed many
    answered less than the service can: it measures a collapse, not a capacity)."""
    answered = [s for s in behind if s.failed_share <= MAX_FAILED_SHARE]
    if not answered:
        return Figure(math.nan)
    seconds = sum(_SETTLED * s.stage.duration_s for s in answered)
    count = sum(s.throughput_rps.value * _SETTLED * s.stage.duration_s for s in answered)
    return _rate(round(count), seconds)
