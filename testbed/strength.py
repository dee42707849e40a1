"""A fault's strength, set from the service's own physics on this machine and checked after the run.

A fixed knob gives a different fault on a different machine: the pure-Python
tokenizer costs ~9 ms a prompt here and ~17 ms on a slower host, so at 10
requests a second its one worker is 10 % busy on one and 17 % on the other,
and neither is the pegged stage the scenario stands for. So the scenario names
the utilisation it wants of the stage's worker (``tokenizer_busy``); before
the load, the service times its tokenizer on the load's own prompts, and the
passes a prompt are chosen so that rate x cost reaches it. After the run, the
service's request log says how busy the worker really was: a run below the
least the scenario promises is reported as too weak a fault, not scored as
if it had one.

A cold start is the same: the testbed's tiny model is made in about a second,
where a real model's weights take seconds to minutes to load, so at the
scenario's rate a restart made a dozen slow requests on one machine and
three dozen on another, and only the second owned the tail. The scenario
names the share of its requests that should arrive while the service loads
(``cold_share``); the service's start-up is made to last that long
(``--load-s``), and after the run the request log says what share of the
requests a start really made slower than the P99 of the others.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from testbed.scenarios import Scenario

# Prompts timed to learn the tokenizer's cost: the load's lengths are heavy-tailed (the Azure trace), and
# the slow tokenizer is superlinear in length, so a few dozen would miss the long prompts that weigh most.
CALIBRATION_PROMPTS = 300
_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TokenizerSetting:
    one_pass_ms: float  # the tokenizer's mean cost a prompt, one pass, on the load's prompts
    passes: int  # passes a prompt, chosen so that rate x cost reaches the aimed utilisation
    expected_busy: float  # what that gives at the load's rate


def tokenizer_passes(one_pass_ms: float, rate_rps: float, aimed_busy: float) -> TokenizerSetting:
    """The passes a prompt that keep the tokenizer's one worker ``aimed_busy`` of the time at ``rate_rps``."""
    if one_pass_ms <= 0 or rate_rps <= 0:
        raise ValueError("the tokenizer's cost and the load's rate must be positive")
    per_second = rate_rps * one_pass_ms / 1000.0  # the worker's busy share at one pass
    passes = max(1, round(aimed_busy / per_second))
    return TokenizerSetting(one_pass_ms, passes, passes * per_second)


def set_tokenizer(url: str, prompts: list[str], rate_rps: float, aimed_busy: float) -> TokenizerSetting:
    """Time the service's tokenizer on ``prompts`` (one pass each, on its tokenizer thread), then set its
    passes a prompt so that its worker is ``aimed_busy`` of the time at ``rate_rps``."""
    timed = _post_json(f"{url}/admin/tokenize_cost", {"prompts": prompts})
    setting = tokenizer_passes(float(timed["mean_ms"]), rate_rps, aimed_busy)
    _post_json(f"{url}/admin/tokenize_passes", {"passes": setting.passes})
    return setting


def tokenizer_busy(requests_log: Path, start: float, end: float) -> float | None:
    """The tokenizer worker's busy share from ``start`` to ``end`` (Unix seconds): the service's own
    ``stage_tokenize_ms`` of the requests sent in that window, over its length. None: no such requests."""
    if end <= start:
        return None
    spent = [ms for _, ms in _logged(requests_log, "stage_tokenize_ms", start, end)]
    busy_ms = sum(spent)
    if not spent or not math.isfinite(busy_ms):
        return None
    return busy_ms / 1000.0 / (end - start)


def cold_slow_share(requests_log: Path, starts: list[float], window_s: float, end: float) -> float | None:
    """The share of the requests sent from the first start to ``end`` that were sent within ``window_s``
    of a start (Unix seconds) and took longer than the P99 of the others: the requests a cold start made
    slow enough to set the tail. None: no requests, or none outside the windows to compare with."""
    if not starts:
        return None
    cold, warm = [], []
    for ts, latency in _logged(requests_log, "latency_ms", min(starts), end):
        (cold if any(0 <= ts - s < window_s for s in starts) else warm).append(latency)
    if not warm:
        return None
    warm_p99 = sorted(warm)[min(len(warm) - 1, math.ceil(0.99 * len(warm)) - 1)]
    return sum(latency > warm_p99 for latency in cold) / (len(cold) + len(warm))


def _logged(requests_log: Path, column: str, start: float, end: float) -> Iterator[tuple[float, float]]:
    """(ts, ``column``) of each request the service logged as sent from ``start`` to ``end`` with both
    figures; nothing when there is no log."""
    if not requests_log.is_file():
        return
    with requests_log.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the service's stop
            ts, value = record.get("ts"), record.get(column)
            if isinstance(ts, int | float) and isinstance(value, int | float) and start <= ts < end:
                yield float(ts), float(value)


def run_strength(
    requests_log: Path,
    scenario: Scenario,
    tokenizer: TokenizerSetting | None,
    start: float,
    end: float,
    windows: list[tuple[float, float]],
) -> dict | None:
    """What truth.yaml says of the fault's strength: what was aimed at, what the run reached, and whether
    it held what the scenario promises. A slow tokenizer's busy share is said wherever it runs (the
    scenarios that promise none too); None for a fault whose strength is neither the tokenizer's nor a
    cold start's."""
    if scenario.cold_share is not None:
        starts = [start] + [began for began, _ in windows]  # the load's first request, and each restart
        reached = cold_slow_share(requests_log, starts, cold_window_s(end - start), end)
        least = scenario.cold_share_at_least or 0.0
        cold = {
            "aimed": scenario.cold_share,
            "at_least": least,
            "load_s": round(scenario.load_s(end - start) or 0.0, 2),
            "reached": None if reached is None else round(reached, 4),
        }
        return {"cold_slow_share": cold, "held": reached is not None and reached >= least}
    if scenario.tokenizer_busy is None and "--slow-tokenizer" not in scenario.service_args:
        return None
    reached = tokenizer_busy(requests_log, start, end)
    busy: dict[str, object] = {"reached": None if reached is None else round(reached, 3)}
    if scenario.tokenizer_busy is None:
        return {"tokenizer_busy": busy}
    least = scenario.tokenizer_busy_at_least or 0.0
    busy |= {
        "aimed": scenario.tokenizer_busy,
        "at_least": least,
        "one_pass_ms": None if tokenizer is None else round(tokenizer.one_pass_ms, 2),
        "passes": None if tokenizer is None else tokenizer.passes,
    }
    return {"tokenizer_busy": busy, "held": reached is not None and reached >= least}


def cold_window_s(duration_s: float) -> float:
    """After a start, how long requests count as cold: a minute, or a quarter of a shorter run (whose
    starts would otherwise leave no warm request to compare with)."""
    return min(60.0, duration_s / 4)


def _post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
        return json.loads(response.read())
