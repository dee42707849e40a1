"""The timeline: latency P50/P99 with its spikes, and below it, on the same time axis, what moved with them.

The rows under the latency are the signals the findings' evidence cites (the
job that the co-located rule found, the server thread a CPU-bound stage pins)
first, then the signals whose episodes align with the latency spikes, best
p-value first. Every row shades the latency's
episodes, so a glance down a column shows what rose at the same moment;
change points are dashed, restarts and OOMs marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from diagnose.detect import SpikeAnalysis
from diagnose.detect.signals import process_commands, signal_words
from diagnose.dump.model import Dump
from diagnose.report.cited import cited_signals
from diagnose.report.model import Report

MAX_RELATED = 3
_EVENT_KINDS = ("restart", "deploy", "oom", "xid", "profiler_start", "engine_dead")


@dataclass(frozen=True)
class Track:
    name: str  # the signal's name, as in the report's spikes table
    words: str  # the signal as a reader says it (a process's by its command)
    label: str  # the axis label, with its unit
    times: np.ndarray  # epoch seconds
    values: np.ndarray  # in the label's unit
    episodes: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class TimelineData:
    latency: tuple[Track, ...]  # P50, P99
    episodes: tuple[tuple[float, float], ...]  # the latency's spikes, shaded on every row
    change_points: tuple[float, ...]
    related: tuple[Track, ...]
    events: tuple[tuple[float, str], ...]


def timeline_data(report: Report, spikes: SpikeAnalysis, dump: Dump) -> TimelineData | None:
    """What the timeline shows, from the analysis itself; None where no latency was recorded."""
    commands = process_commands(dump.tables)
    latency = tuple(
        _track(spikes, name, commands)
        for name in ("requests.latency_ms.p50", "requests.latency_ms.p99")
        if name in spikes.findings
    )
    if not latency:
        return None
    reference = spikes.findings.get(spikes.reference or "requests.latency_ms.p99")
    episodes = tuple((e.start, e.end) for e in reference.episodes if e.direction > 0) if reference else ()
    change_points = tuple(reference.change_points) if reference else ()
    related = _related(report, spikes, commands)
    return TimelineData(latency, episodes, change_points, related, _events(dump))


def _related(report: Report, spikes: SpikeAnalysis, commands: dict[int, str]) -> tuple[Track, ...]:
    """The signals each finding's evidence cites, strongest finding first (as the live view charts them),
    then those whose episodes align with the latency's."""
    cited = [name for h in report.hypotheses for name in cited_signals(h, report, spikes.findings)]
    cited += [
        fact.value
        for fact in report.facts.values()
        if isinstance(fact.value, str) and fact.value in spikes.findings
    ]
    aligned = [a.b for a in report.alignments if a.p_value is not None and a.p_value < 0.05]
    names = [n for n in dict.fromkeys([*cited, *aligned]) if not n.startswith("requests.latency_ms")]
    return tuple(_track(spikes, name, commands) for name in names[:MAX_RELATED])


def _track(spikes: SpikeAnalysis, name: str, commands: dict[int, str]) -> Track:
    found = spikes.findings[name]
    signal = found.signal
    scale, unit = _unit(name)
    episodes = tuple((e.start, e.end) for e in found.episodes)
    words = signal_words(name, commands)
    return Track(name, words, f"{words} ({unit})", signal.times(), signal.values / scale, episodes)


def _span(data: TimelineData) -> tuple[float, float]:
    """The evidence's own time span: the axis is bounded to it, whatever events came before."""
    times = np.concatenate([track.times for track in (*data.latency, *data.related)])
    return float(times.min()), float(times.max())


def _unit(name: str) -> tuple[float, str]:
    base = name.split("[")[0]
    if base.endswith("_bytes"):
        return 2**30, "GiB"
    if base.endswith("_pct"):
        return 1.0, "%"
    if base.endswith("_mhz"):
        return 1.0, "MHz"
    if base.endswith("_c"):
        return 1.0, "°C"
    if base.endswith("_w"):
        return 1.0, "W"
    if "throughput" in base or base.endswith("_per_s") or base.endswith("_rps"):
        return 1.0, "/s"
    if base.endswith("_ms") or "_ms." in base:  # server.ttft_ms, requests.stage_forward_ms.mean
        return 1.0, "ms"
    return 1.0, "count"  # queue depth, requests running or waiting, batch size: no unit of time


def _events(dump: Dump) -> tuple[tuple[float, str], ...]:
    events = dump.table("events")
    marks = [(float(t), "start") for t in dump.manifest.process_starts]
    if events is not None and "kind" in events.columns:
        kinds = events["kind"].astype("string").str.lower()
        keep = kinds.isin(_EVENT_KINDS)
        marks += [(float(t), str(k)) for t, k in zip(events["ts"][keep], kinds[keep], strict=True)]
    return tuple(sorted(set(marks)))


def draw_timeline(data: TimelineData):
    from diagnose.pictures import style

    rows = 1 + len(data.related)
    figure, axes = style.plt.subplots(
        rows, 1, sharex=True, figsize=(style.WIDTH_IN, style.ROW_IN * (rows + 0.6)), squeeze=False
    )
    axes = axes[:, 0]
    for track, colour, width in zip(
        data.latency, (style.LATENCY_LIGHT, style.LATENCY), (1.0, 1.4), strict=False
    ):
        axes[0].plot(
            style.dates(track.times),
            track.values,
            color=colour,
            linewidth=width,
            label=track.words,
        )
    axes[0].set_ylabel("latency (ms)")
    axes[0].legend(loc="lower left", ncols=2, bbox_to_anchor=(0.0, 1.08), frameon=False)  # above the plot
    axes[0].set_title("Latency, its spikes (red) and what moved with them", loc="left")
    for axis, track in zip(axes[1:], data.related, strict=True):
        times, values = envelope(track.times, track.values)
        axis.plot(style.dates(times), values, color=style.OTHER, linewidth=1.0)
        axis.set_title(track.label, loc="left", fontsize=9)
    first, last = _span(data)
    # An event before the evidence (a server started hours before the recording) is marked at the
    # axis's edge with its time, instead of stretching every panel back to it.
    events = [(max(ts, first), kind if ts >= first else f"{kind} {_clock(ts)} ←") for ts, kind in data.events]
    events = [(ts, kind) for ts, kind in events if ts <= last]
    for axis in axes:
        for start, end in data.episodes:
            axis.axvspan(*style.dates(np.array([start, end])), color=style.EPISODE, alpha=0.15, linewidth=0)
        for ts in data.change_points:
            axis.axvline(style.dates(np.array([ts]))[0], color=style.OTHER, linestyle="--", linewidth=0.8)
        for ts, _kind in events:
            axis.axvline(style.dates(np.array([ts]))[0], color=style.EVENT, linewidth=1.0)
        axis.set_xlim(*style.dates(np.array([first, last])))
    for ts, kind in events:
        axes[0].annotate(
            kind,
            (style.dates(np.array([ts]))[0], 1.0),
            xycoords=("data", "axes fraction"),
            color=style.EVENT,
            fontsize=8,
            rotation=90,
            va="top",
            ha="right",
        )
    style.time_axis(axes[-1])
    return figure


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def envelope(times: np.ndarray, values: np.ndarray, buckets: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * buckets`` points: each bucket's minimum and maximum, in time order, so no spike is lost.

    A day at 1 s is 86,400 points on a picture 1,000 pixels wide; drawing them all costs time and shows
    nothing more than the envelope.
    """
    if values.size <= 2 * buckets:
        return times, values
    edges = np.linspace(0, values.size, buckets + 1).astype("int64")
    keep = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        chunk = values[lo:hi]
        if not np.isfinite(chunk).any():
            keep.append(lo)  # a gap stays a gap
            continue
        low, high = lo + int(np.nanargmin(chunk)), lo + int(np.nanargmax(chunk))
        keep += sorted({low, high})
    index = np.array(keep)
    return times[index], values[index]
