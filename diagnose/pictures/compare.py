"""A comparison's pictures: the latency distribution before and after, and where the change came from.

The ECDF on a log axis shows every percentile at once: a median bought with
the tail is two curves that cross. The stage picture shows each stage's P50
and P99 change with its interval, so the stage a change came from stands out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.compare.model import Comparison


@dataclass(frozen=True)
class EcdfData:
    before: np.ndarray  # sorted latencies, ms
    after: np.ndarray
    percentiles: tuple[tuple[str, float, float], ...]  # (name, before, after) of P50/P99 as compared


@dataclass(frozen=True)
class StageChanges:
    names: tuple[str, ...]  # e.g. "forward P99"
    change: tuple[float, ...]  # relative
    low: tuple[float, ...]
    high: tuple[float, ...]


def ecdf_data(comparison: Comparison, before: np.ndarray, after: np.ndarray) -> EcdfData:
    figures = {f.name: f for f in comparison.figures}
    marks = tuple(
        (name, f.before, f.after)
        for name in ("p50", "p99")
        if (f := figures.get(name)) is not None and f.before is not None and f.after is not None
    )
    return EcdfData(np.sort(before[np.isfinite(before)]), np.sort(after[np.isfinite(after)]), marks)


def stage_changes(comparison: Comparison) -> StageChanges | None:
    rows = [
        (
            f.name.removeprefix("stage_").replace("_p50", " P50").replace("_p99", " P99"),
            f.change,
            f.low,
            f.high,
        )
        for f in comparison.figures
        if f.name.startswith("stage_") and None not in (f.change, f.low, f.high)
    ]
    if not rows:
        return None
    names, change, low, high = zip(*rows, strict=True)
    return StageChanges(names, change, low, high)


def draw_ecdf(data: EcdfData):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.8, 3.6))
    for values, colour, label in ((data.before, style.OTHER, "before"), (data.after, style.LATENCY, "after")):
        shares = np.arange(1, values.size + 1) / values.size
        step = max(1, values.size // 4000)  # a curve needs no more points than the picture has pixels
        axis.plot(values[::step], shares[::step], color=colour, linewidth=1.4, label=label)
    for name, before, after in data.percentiles:
        axis.axhline(float(name[1:]) / 100, color=style.OTHER, linewidth=0.6, linestyle=":")
        axis.annotate(
            f"{name.upper()}: {before:,.0f} → {after:,.0f} ms",
            (after, float(name[1:]) / 100),
            xytext=(6, -12),
            textcoords="offset points",
            fontsize=8,
            color=style.LATENCY,
        )
    if data.before.size and data.before.min() > 0 and data.after.size and data.after.min() > 0:
        axis.set_xscale("log")
    axis.set_xlabel("latency (ms)")
    axis.set_ylabel("share of requests at or below")
    axis.set_title("Latency before and after (warm requests)", loc="left")
    axis.legend(loc="lower right")
    return figure


def draw_stage_changes(data: StageChanges):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.7, 0.32 * len(data.names) + 1.2))
    y = np.arange(len(data.names))
    change = np.array(data.change) * 100
    errors = np.array([change - np.array(data.low) * 100, np.array(data.high) * 100 - change])
    colours = [style.LATENCY if c < 0 else style.WORSE for c in change]
    axis.barh(y, change, color=colours, alpha=0.85)
    axis.errorbar(change, y, xerr=errors, fmt="none", ecolor=style.OTHER, elinewidth=0.8, capsize=2)
    axis.axvline(0, color=style.OTHER, linewidth=0.8)
    axis.set_yticks(y, data.names)
    axis.invert_yaxis()
    axis.set_xlabel("change after / before (%), with its 95 % interval")
    axis.set_title("Where the change came from: each stage", loc="left")
    return figure
