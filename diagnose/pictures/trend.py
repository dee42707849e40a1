"""One figure across the archive's recordings: what each change did to it, in the order they were kept."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.archive.store import Entry


@dataclass(frozen=True)
class TrendData:
    metric: str
    unit: str
    labels: tuple[str, ...]  # "#3 v1.4-int8"
    values: tuple[float, ...]


def trend_data(entries: list[Entry], metric: str) -> TrendData | None:
    having = [e for e in entries if e.figures.get(metric) is not None]
    if not having:
        return None
    labels = tuple(f"#{e.id} {e.label}" if e.label else f"#{e.id}" for e in having)
    values = tuple(value for e in having if (value := e.figures.get(metric)) is not None)
    return TrendData(metric, having[0].units[metric], labels, values)


def draw_trend(data: TrendData):
    from diagnose.pictures import style

    scale, unit = {"bytes": (2**30, "GiB"), "share": (0.01, "%")}.get(data.unit, (1.0, data.unit))
    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.8, 3.2))
    x = np.arange(len(data.values))
    axis.plot(x, np.array(data.values) / scale, marker="o", color=style.LATENCY)
    axis.set_xticks(x, data.labels, rotation=30, ha="right")
    axis.set_ylabel(f"{data.metric} ({unit})")
    axis.set_title(f"{data.metric} across the archived recordings", loc="left")
    return figure
