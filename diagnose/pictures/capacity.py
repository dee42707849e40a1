"""A load run's pictures: the latency-throughput curve with its knee, and the soak's timeline.

Drawn from capacity.json's content alone (``diagnose-capacity/1``), as the
text and Markdown reports are, so that an archived run draws the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.pictures import Picture


@dataclass(frozen=True)
class CurvePoint:
    offered_rps: float
    throughput_rps: float | None
    p50: tuple[float, float, float] | None  # value, low, high (ms)
    p99: tuple[float, float, float] | None
    kept_up: bool


@dataclass(frozen=True)
class CurveData:
    points: tuple[CurvePoint, ...]  # by offered rate
    alone_p50_ms: float | None  # one request at a time (the baseline)
    kept_up_rps: float | None
    fell_behind_rps: float | None
    recommended_rps: float | None


@dataclass(frozen=True)
class SoakData:
    rate_rps: float
    start_s: tuple[float, ...]  # each window's start, seconds into the soak
    p50_ms: tuple[float, ...]
    p99_ms: tuple[float, ...]
    stalls: tuple[tuple[float, float], ...]  # (start, end), seconds into the soak
    stable: bool


def curve_data(result: dict[str, Any]) -> CurveData | None:
    steps = [s for s in result.get("steps", []) if s.get("offered_rps")]
    if len(steps) < 2:
        return None
    points = tuple(
        CurvePoint(
            s["offered_rps"],
            (s.get("throughput_rps") or {}).get("value"),
            _interval(s.get("latency_p50_ms")),
            _interval(s.get("latency_p99_ms")),
            not s.get("fell_behind"),
        )
        for s in sorted(steps, key=lambda s: s["offered_rps"])
    )
    knee = result.get("knee") or {}
    found = bool(knee.get("found"))
    return CurveData(
        points,
        (result.get("baseline", {}).get("latency_p50_ms") or {}).get("value"),
        knee.get("kept_up_rps") if found else None,
        knee.get("fell_behind_rps") if found else None,
        (result.get("recommended") or {}).get("rate_rps"),
    )


def soak_data(result: dict[str, Any]) -> SoakData | None:
    soak = result.get("soak")
    windows = [w for w in (soak or {}).get("windows", []) if w.get("p99_ms") is not None]
    if soak is None or len(windows) < 2:
        return None
    began = soak.get("started")
    stalls = tuple(
        (stall["start"] - began, stall["end"] - began)
        for stall in soak.get("stalls", [])
        if began is not None and isinstance(stall.get("start"), int | float)
    )
    return SoakData(
        soak["stage"]["rate_rps"],
        tuple(w["start_s"] for w in windows),
        tuple(w["p50_ms"] for w in windows),
        tuple(w["p99_ms"] for w in windows),
        stalls,
        bool(soak.get("stable")),
    )


def draw_curve(data: CurveData):
    from diagnose.pictures import style

    figure, (latency, served) = style.plt.subplots(1, 2, figsize=(style.WIDTH_IN, 3.4))
    rates = [p.offered_rps for p in data.points]
    for name, colour, pick in (("P99", style.LATENCY, "p99"), ("P50", style.LATENCY_LIGHT, "p50")):
        shown = [(p.offered_rps, getattr(p, pick)) for p in data.points if getattr(p, pick) is not None]
        if not shown:
            continue
        x = [rate for rate, _ in shown]
        value = [figure_[0] for _, figure_ in shown]
        low = [figure_[0] - figure_[1] for _, figure_ in shown]
        high = [figure_[2] - figure_[0] for _, figure_ in shown]
        latency.errorbar(x, value, yerr=[low, high], marker="o", ms=4, capsize=2, color=colour, label=name)
    if data.alone_p50_ms is not None:
        latency.axhline(data.alone_p50_ms, color=style.OTHER, lw=0.8, ls=":", label="P50 alone")
    served.plot(rates, rates, color=style.OTHER, lw=0.8, ls=":", label="offered")
    answered = [(p.offered_rps, p.throughput_rps) for p in data.points if p.throughput_rps is not None]
    served.plot(*zip(*answered, strict=True), marker="o", ms=4, color=style.LATENCY, label="throughput")
    for axis in (latency, served):
        if data.kept_up_rps is not None and data.fell_behind_rps is not None:
            axis.axvspan(data.kept_up_rps, data.fell_behind_rps, color=style.WORSE, alpha=0.2, label="knee")
        if data.recommended_rps is not None:
            axis.axvline(data.recommended_rps, color=style.OTHER, lw=1.0, ls="--", label="70 % setting")
        axis.set_xlabel("offered load (req/s)")
        axis.legend(fontsize=8)
    latency.set_yscale("log")
    latency.set_ylabel("latency (ms)")
    served.set_ylabel("answered (req/s)")
    latency.set_title("Latency against offered load", loc="left")
    served.set_title("Throughput against offered load", loc="left")
    figure.tight_layout()
    return figure


def draw_soak(data: SoakData):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN, 2.8))
    axis.plot(data.start_s, data.p99_ms, color=style.LATENCY, label="P99")
    axis.plot(data.start_s, data.p50_ms, color=style.LATENCY_LIGHT, label="P50")
    for index, (start, end) in enumerate(data.stalls):
        axis.axvspan(start, end, color=style.EPISODE, alpha=0.25, label="stall" if index == 0 else None)
    axis.set_xlabel("seconds into the soak")
    axis.set_ylabel("latency (ms)")
    verdict = "stable" if data.stable else "unstable"
    axis.set_title(f"The soak at {data.rate_rps:.3g} req/s: {verdict}", loc="left")
    axis.legend(fontsize=8)
    return figure


def render_capacity_pictures(result: dict[str, Any], folder: Path) -> list[Picture]:
    """The pictures a run has data for, drawn into ``folder``."""
    from diagnose.pictures import style

    folder.mkdir(parents=True, exist_ok=True)
    pictures = []
    curve = curve_data(result)
    if curve is not None:
        path = folder / "curve.png"
        style.save(draw_curve(curve), path)
        pictures.append(
            Picture(
                "The latency-throughput curve",
                path,
                "P50 and P99 latency with their intervals, and the throughput, against the offered load of "
                "each step, the knee's bracket shaded and the 70 % setting marked",
                curve,
            )
        )
    soak = soak_data(result)
    if soak is not None:
        path = folder / "soak.png"
        style.save(draw_soak(soak), path)
        pictures.append(
            Picture("The soak", path, "P50 and P99 of each window of the soak, its stalls shaded", soak)
        )
    return pictures


def _interval(figure: dict | None) -> tuple[float, float, float] | None:
    if not figure or figure.get("value") is None:
        return None
    value = float(figure["value"])
    low, high = figure.get("low"), figure.get("high")
    return value, value if low is None else float(low), value if high is None else float(high)
