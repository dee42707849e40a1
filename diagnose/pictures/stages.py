"""The stage breakdown: each stage's share of the mean latency and of the P99 requests, side by side.

The stage that dominates the mean is not always the one that makes the tail;
two bars per stage show both at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.report.model import Report


@dataclass(frozen=True)
class StageData:
    stages: tuple[str, ...]  # largest share of the P99 requests first
    share_mean: tuple[float, ...]
    share_p99: tuple[float, ...]
    unaccounted: float | None  # latency in no logged stage, as a share of the mean


def stage_data(report: Report) -> StageData | None:
    rows = [(name, row.share, row.tail_share) for name, row in report.summary.stages.items()]
    if not rows:
        return None
    rows.sort(key=lambda r: -r[2])
    names, means, tails = zip(*rows, strict=True)
    return StageData(names, means, tails, report.summary.unaccounted_share)


def draw_stages(data: StageData):
    import numpy as np

    from diagnose.pictures import style

    height = 0.38
    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.7, 0.5 * len(data.stages) + 1.2))
    y = np.arange(len(data.stages))
    axis.barh(
        y - height / 2,
        np.array(data.share_mean) * 100,
        height,
        color=style.LATENCY_LIGHT,
        label="share of mean latency",
    )
    axis.barh(
        y + height / 2,
        np.array(data.share_p99) * 100,
        height,
        color=style.LATENCY,
        label="share within the P99 requests",
    )
    axis.set_yticks(y, data.stages)
    axis.invert_yaxis()
    axis.set_xlabel("share of latency (%)")
    title = "Where the time goes: on average and in the tail"
    if data.unaccounted:
        title += f" ({data.unaccounted:.0%} of the mean in no logged stage)"
    axis.set_title(title)
    axis.legend(loc="lower right")
    return figure
