"""When the flight recorder saves its ring: conditions over the live signals, and events.

A trigger is written as the rules' conditions are, in the same expression
language (parsed and type-checked by :mod:`diagnose.expressions.expr`, no second
evaluator), over a small set of live signals computed every tick::

    p99_ms > 500 for 10s          the last 10 s of requests, true on every tick for 10 s
    gpu_mem_used_pct > 95         true on one tick is enough
    queue_depth > 50 and rps < 5  any condition of the language
    event oom                     an event of that kind was recorded (oom, xid, restart, ...)

Request figures are over the requests logged in the trailing window
(``--trigger-window``, 10 s by default); GPU figures are the fullest or
busiest GPU's latest sample; server figures the latest scrape. A signal with
no data is unknown, and an unknown condition never fires.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from diagnose.dump.schema import SUCCESS_CODE, SUCCESS_WORDS
from diagnose.errors import InputError
from diagnose.expressions.expr import ExpressionError, Node, evaluate, names, parse
from diagnose.expressions.types import TRUTH, check
from diagnose.units import parse_duration

# The signals a trigger may read, with what each means (``diagnose record --help`` lists them).
SIGNALS = {
    "p50_ms": "median latency of the requests logged in the trigger window",
    "p90_ms": "P90 latency, same window",
    "p99_ms": "P99 latency, same window",
    "max_ms": "the slowest request, same window",
    "rps": "requests logged per second, same window",
    "error_pct": "share of requests whose status is not ok, same window (0-100)",
    "requests": "requests logged in the window",
    "queue_depth": "the server's waiting requests (latest scrape)",
    "running": "the server's running requests (latest scrape)",
    "kv_cache_usage_pct": "the server's KV-cache use (latest scrape)",
    "gpu_util_pct": "the busiest GPU's utilisation (latest sample)",
    "gpu_mem_used_pct": "the fullest GPU's memory use, 0-100 (latest sample)",
    "gpu_temp_c": "the hottest GPU's temperature (latest sample)",
    "cpu_pct": "the host's CPU use, all cores, 0-100 (latest sample)",
    "mem_used_pct": "the host's memory use, 0-100 (latest sample)",
    "swap_in_per_s": "bytes swapped in per second (latest sample)",
}
_EVENT = re.compile(r"^\s*event\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")
_FOR = re.compile(r"^(?P<expr>.*?)\s+for\s+(?P<duration>\S+)\s*$")
_SUCCESS_CODE = re.compile(SUCCESS_CODE)


@dataclass(frozen=True)
class Trigger:
    text: str
    condition: Node | None = None  # None: an event trigger
    event_kind: str | None = None
    hold_s: float = 0.0  # how long the condition must hold before it fires


@dataclass(frozen=True)
class Firing:
    trigger: str  # the trigger's text, or "SIGUSR1" / "--dump-now"
    at: float  # epoch seconds
    values: dict[str, float]  # the signals the condition read, at the moment it fired


def parse_trigger(text: str) -> Trigger:
    """``"p99_ms > 500 for 10s"`` or ``"event oom"``; an InputError says what is wrong and where."""
    event = _EVENT.match(text)
    if event:
        return Trigger(text=text.strip(), event_kind=event.group(1).lower())
    expression, hold_s = text, 0.0
    held = _FOR.match(text)
    if held:
        expression = held.group("expr")
        try:
            hold_s = parse_duration(held.group("duration"))
        except InputError as error:
            raise InputError(f"--trigger {text!r}: after 'for', {error}") from None
    try:
        node = parse(expression)
        unknown = sorted(names(node) - SIGNALS.keys())
        if unknown:
            raise ExpressionError(
                f"no signal named {', '.join(unknown)}; triggers can read: {', '.join(SIGNALS)}"
            )
        check(node, dict.fromkeys(SIGNALS, "number"), TRUTH, expression.strip())
    except ExpressionError as error:
        raise InputError(f"--trigger {text!r}: {error}") from None
    return Trigger(text=text.strip(), condition=node, hold_s=hold_s)


class LiveSignals:
    """The trigger signals, kept up to date from the rows the recorder writes, at little cost a tick."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._requests: deque[tuple[float, float | None, bool]] = deque()  # (logged at, latency, ok)
        self._latest: dict[str, float] = {}
        self._gpu: dict[str, float] = {}
        self.events: list[dict] = []  # this tick's

    def add(self, table: str, rows: list[dict], now: float) -> None:
        if table == "requests":
            self._requests.extend((now, _latency(row), _ok(row)) for row in rows)
        elif table == "events":
            self.events.extend(rows)
        elif table == "system":
            for row in rows:
                self._set("cpu_pct", row.get("cpu_pct"))
                self._set("swap_in_per_s", row.get("swap_in_per_s"))
                used, total = _number(row.get("mem_used_bytes")), _number(row.get("mem_total_bytes"))
                if used is not None and total:
                    self._latest["mem_used_pct"] = 100.0 * used / total
        elif table == "server":
            for row in rows:
                for name in ("queue_depth", "running", "kv_cache_usage_pct"):
                    self._set(name, row.get(name))
        elif table == "gpu":
            self._add_gpus(rows)

    def values(self, now: float) -> dict[str, float]:
        """Every signal with data, as of ``now``; the tick's events are then forgotten by ``next_tick``."""
        while self._requests and self._requests[0][0] <= now - self.window_s:
            self._requests.popleft()
        values = dict(self._latest)
        values.update(self._gpu)
        if self._requests:
            latencies = sorted(latency for _, latency, _ in self._requests if latency is not None)
            values["requests"] = float(len(self._requests))
            values["rps"] = len(self._requests) / self.window_s
            values["error_pct"] = 100.0 * sum(not ok for *_, ok in self._requests) / len(self._requests)
            if latencies:
                for name, q in (("p50_ms", 0.50), ("p90_ms", 0.90), ("p99_ms", 0.99)):
                    values[name] = _quantile(latencies, q)
                values["max_ms"] = latencies[-1]
        else:
            values["requests"] = values["rps"] = 0.0
        return values

    def next_tick(self) -> None:
        self.events = []
        self._gpu = {}

    def _add_gpus(self, rows: list[dict]) -> None:
        for row in rows:
            used, total = _number(row.get("mem_used_bytes")), _number(row.get("mem_total_bytes"))
            if used is not None and total:
                self._gpu["gpu_mem_used_pct"] = max(
                    self._gpu.get("gpu_mem_used_pct", 0.0), 100 * used / total
                )
            for column, name in (("util_pct", "gpu_util_pct"), ("temp_c", "gpu_temp_c")):
                value = _number(row.get(column))
                if value is not None:
                    self._gpu[name] = max(self._gpu.get(name, value), value)
        if self._gpu:
            self._latest.update(self._gpu)

    def _set(self, name: str, value: object) -> None:
        number = _number(value)
        if number is not None:
            self._latest[name] = number


class TriggerWatch:
    """Which triggers fire on this tick: a condition once it has held for its span, an event when seen.

    A condition fires once per episode, as an alert does: having fired, it is
    re-armed only by a tick on which it is no longer true.
    """

    def __init__(self, triggers: Iterable[Trigger]) -> None:
        self.triggers = list(triggers)
        self._since: dict[str, float] = {}  # a held condition: true since
        self._fired: set[str] = set()  # conditions still true since they fired

    def check(self, signals: LiveSignals, now: float) -> list[Firing]:
        fired = []
        values = signals.values(now)
        for trigger in self.triggers:
            if trigger.condition is None:  # an event trigger
                seen = [e for e in signals.events if str(e.get("kind", "")).lower() == trigger.event_kind]
                if seen:
                    fired.append(Firing(trigger.text, now, {"events": float(len(seen))}))
                continue
            if evaluate(trigger.condition, values) is not True:
                self._since.pop(trigger.text, None)
                self._fired.discard(trigger.text)
                continue
            since = self._since.setdefault(trigger.text, now)
            if now - since >= trigger.hold_s and trigger.text not in self._fired:
                read = {
                    name: round(values[name], 3)
                    for name in sorted(names(trigger.condition))
                    if name in values
                }
                fired.append(Firing(trigger.text, now, read))
                self._fired.add(trigger.text)
        signals.next_tick()
        return fired


def _latency(row: dict) -> float | None:
    latency = _number(row.get("latency_ms"))
    if latency is not None:
        return latency
    stages = [_number(v) for k, v in row.items() if k.startswith("stage_") and k.endswith("_ms")]
    known = [v for v in stages if v is not None]
    return sum(known) if known else None


def _ok(row: dict) -> bool:
    """As the analysis reads a status (diagnose.dump.schema); a request that logs none succeeded."""
    word = str(row.get("status", "") or "").strip().lower()
    return not word or word in SUCCESS_WORDS or bool(_SUCCESS_CODE.fullmatch(word))


def _number(value: Any) -> float | None:  # a field of a JSON or CSV row: anything
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between order statistics, as numpy's default: no numpy on the sampling path."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
