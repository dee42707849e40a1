"""One verdict for a comparison, and the regression gate a CI step sets.

The verdict reads the figures a release is judged by: P50 and P99 latency,
throughput, error rate and the GPU memory peak. When the length mix differed
the re-weighted latency figures are read instead, since the naive ones also
measure the change in traffic; throughput is left out when the request rate
itself differed (it then measures the load, not the service).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from diagnose.compare.measure import LATENCY_QUANTILES
from diagnose.compare.model import (
    BETTER,
    IMPROVED,
    NO_CHANGE,
    NOT_COMPARABLE,
    REGRESSED,
    WORSE,
    Difference,
    FigureChange,
    GateTrip,
    Traffic,
)
from diagnose.errors import InputError

_LATENCY = ("p50", "p99")
_OTHERS = ("throughput", "error_rate", "gpu_mem_peak", "step_time")  # step_time: a profiler trace's
GATE_FIGURES = (
    "p50",
    "p95",
    "p99",
    "p999",
    "mean",
    "throughput",
    "error_rate",
    "gpu_mem_peak",
    "gpu_mem_steady",
    "host_mem_peak",
    "host_mem_steady",
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "step_time",
)  # and stage_<name>_p50 / stage_<name>_p99


_LATENCY_NAMES = (*LATENCY_QUANTILES, "mean")


def decisive_figures(figures: list[FigureChange], traffic: Traffic) -> dict[str, FigureChange]:
    """The figures the verdict and the gate read, by the gate's names.

    Latency is the plain one when the traffic was the same; re-weighted to the
    before mix when only the mix differed; the service time (latency less
    waiting, re-weighted) when the load itself differed, since queueing moves
    with the load. Throughput is left out when the request rate differed.
    """
    chosen = {f.name: f for f in figures if f.name not in _LATENCY_NAMES}
    if traffic.rate_differs:
        chosen.pop("throughput", None)
    if traffic.load_differs:
        latency = {f.name.removeprefix("service_"): f for f in traffic.service}
    elif traffic.reweighted:
        latency = {f.name: f for f in traffic.reweighted}
    else:
        latency = {f.name: f for f in figures if f.name in _LATENCY_NAMES}
    return {**chosen, **latency}


def overall(
    figures: list[FigureChange], traffic: Traffic, differences: list[Difference], fix_delivered: bool = False
) -> tuple[str, str, list[str]]:
    """(verdict, headline, reasons). ``fix_delivered``: the change delivered the gain expected of it
    (compare --expects), where these figures need not move: no "pseudo-optimisation" then."""
    blocking = [d for d in differences if d.blocks]
    if blocking:
        reasons = [f"{d.what} differs: {d.before} before, {d.after} after" for d in blocking]
        return NOT_COMPARABLE, "not comparable: " + "; ".join(reasons), reasons
    decisive = decisive_figures(figures, traffic)
    judged = [decisive[name] for name in (*_LATENCY, *_OTHERS) if name in decisive]
    worse = [f for f in judged if f.verdict == WORSE]
    better = [f for f in judged if f.verdict == BETTER]
    caveat = _caveat(traffic)
    if worse:
        text = "regressed: " + ", ".join(_said(f) for f in worse)
        if better:
            text += "; although " + ", ".join(_said(f) for f in better)
        return REGRESSED, text + caveat, [_said(f) for f in worse]
    if better:
        return (
            IMPROVED,
            "improved: " + ", ".join(_said(f) for f in better) + caveat,
            [_said(f) for f in better],
        )
    names = ", ".join(f.label for f in judged) or "nothing could be compared"
    text = f"no significant change ({names})"
    if not fix_delivered:
        text += ": if this was an optimisation, under this load it is a pseudo-optimisation"
    return NO_CHANGE, text + caveat, []


def _caveat(traffic: Traffic) -> str:
    parts = []
    if traffic.load_differs and traffic.service:
        parts.append("latency judged on the service time, less waiting, since the load differed")
    elif traffic.reweighted:
        parts.append("latency compared at the before side's length mix")
    for figure, differs in (
        (traffic.rate_change, traffic.rate_differs),
        (traffic.work_change, traffic.work_differs),
    ):
        if differs and figure is not None and figure.change is not None:
            parts.append(f"the {figure.label.split(' (')[0]} differed by {figure.change:+.0%}")
    return f" ({'; '.join(parts)})" if parts else ""


def _said(figure: FigureChange) -> str:
    return f"{figure.label} {change_text(figure)}"


def change_text(figure: FigureChange) -> str:
    """The change with its interval, e.g. ``-20% [-24%, -16%]``."""
    if figure.change is None:
        return "-"
    if figure.scale == "relative":
        text = f"{figure.change:+.1%}"
        if figure.low is not None and figure.high is not None:
            text += f" [{figure.low:+.1%}, {figure.high:+.1%}]"
        return text
    if figure.unit == "share":
        text = f"{figure.change * 100:+.2f} points"
        if figure.low is not None and figure.high is not None:
            text += f" [{figure.low * 100:+.2f}, {figure.high * 100:+.2f}]"
        return text
    return f"{figure.change:+.3g}"


@dataclass(frozen=True)
class Tolerance:
    figure: str
    limit: float  # the relative change (or difference, for error_rate) allowed in the bad direction
    direction: int  # +1: fail when it rises beyond limit; -1: when it falls beyond it; 0: the bad way


_TOLERANCE = re.compile(r"^\s*([a-z0-9_]+)\s*:\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*%?\s*$")


def parse_gate(text: str) -> list[Tolerance]:
    """``p99:+5%,throughput:-3%,gpu_mem_peak:+10%`` -> tolerances; errors name the item and the form."""
    tolerances = []
    for item in text.split(","):
        if not item.strip():
            continue
        match = _TOLERANCE.match(item.lower())
        if not match:
            raise InputError(
                f"--fail-on-regression: expected FIGURE:[+|-]PERCENT, e.g. p99:+5%; got {item.strip()!r}"
            )
        name, sign, amount = match.groups()
        if name not in GATE_FIGURES and not re.fullmatch(r"stage_\w+_p(50|99)", name):
            raise InputError(
                f"--fail-on-regression: {name!r} is not a figure; one of {', '.join(GATE_FIGURES)} "
                "or stage_<name>_p50/_p99"
            )
        direction = {"+": 1, "-": -1, "": 0}[sign]
        tolerances.append(Tolerance(name, float(amount) / 100, direction))
    if not tolerances:
        raise InputError("--fail-on-regression: no figure given, e.g. p99:+5%,throughput:-3%")
    return tolerances


def gate(
    tolerances: list[Tolerance], figures: list[FigureChange], traffic: Traffic
) -> tuple[list[GateTrip], list[str]]:
    """The tolerances exceeded, and the figures named that could not be gated, with why.

    A figure trips when it moved the bad way by more than its tolerance and the
    move is significant: its interval excludes no change (a peak, which has no
    interval, trips on its size alone).
    """
    decisive = decisive_figures(figures, traffic)
    tripped, absent = [], []
    for tolerance in tolerances:
        figure = decisive.get(tolerance.figure)
        if figure is None or figure.change is None:
            why = "the request rate differed" if tolerance.figure == "throughput" else "not in both dumps"
            absent.append(f"{tolerance.figure} ({why})")
            continue
        bad = tolerance.direction or (1 if figure.better != "higher" else -1)
        moved = figure.change * bad
        significant = figure.low is None or figure.high is None or figure.interval_excludes_zero
        if moved > tolerance.limit and significant and math.isfinite(moved):
            limit = f"{'+' if bad > 0 else '-'}{tolerance.limit:.0%}"
            tripped.append(
                GateTrip(tolerance.figure, figure.change, tolerance.limit, f"{_said(figure)} beyond {limit}")
            )
    return tripped, absent
