"""What each panel of the live view shows, as plain data: no Textual here.

Kept apart from the widgets so the choices (which signals to plot, which
episodes to mark, which processes are "top") are testable without a screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from diagnose.detect.signals import Signal
from diagnose.dump.model import Dump
from diagnose.report.evidence_lines import dead_source_lines, no_latency_line, source_lines
from diagnose.report.model import Report
from diagnose.units import human_bytes, human_ms, percent

if TYPE_CHECKING:
    from diagnose.detect.analysis import SpikeAnalysis
    from diagnose.live.feed import FeedState

_STANDARD = (
    ("requests.latency_ms.p99", "latency P99"),
    ("requests.latency_ms.p50", "latency P50"),
    ("requests.throughput_rps", "throughput"),
)
_PER_GPU = (("gpu.util_pct", "GPU util"), ("gpu.mem_used_bytes", "GPU memory"))
_HOST = (("system.cpu_pct", "host CPU"),)
_GPU_KEY = re.compile(r"\[gpu=(\d+)\]$")


@dataclass(frozen=True)
class Chart:
    key: str  # the signal's name, as in the report's signals section
    title: str
    signal: Signal | None  # None: nothing in the window for it


@dataclass(frozen=True)
class EpisodeMark:
    start: float  # epoch seconds
    end: float
    routine: bool  # like the signal's other episodes: drawn dimmer than one that stands out


def standard_charts(signals: dict[str, Signal]) -> list[Chart]:
    """Latency, throughput, each GPU's utilisation and memory, host CPU: what every incident needs."""
    charts = [Chart(key, title, signals.get(key)) for key, title in _STANDARD]
    for prefix, title in _PER_GPU:
        for name in sorted(n for n in signals if n.startswith(prefix + "[")):
            match = _GPU_KEY.search(name)
            charts.append(Chart(name, f"{title} {match.group(1) if match else ''}".strip(), signals[name]))
    charts += [Chart(key, title, signals.get(key)) for key, title in _HOST]
    return charts


def episodes(spikes: SpikeAnalysis | None, key: str) -> list[EpisodeMark]:
    """A signal's episodes as the analysis found them, each marked routine or not (detect/routine.py)."""
    found = spikes.findings.get(key) if spikes is not None else None
    if found is None:
        return []
    flags = zip(found.episodes, found.routine or [], strict=True)
    return [EpisodeMark(episode.start, episode.end, usual) for episode, usual in flags]


def latest(values: np.ndarray) -> float | None:
    known = values[np.isfinite(values)]
    return float(known[-1]) if known.size else None


def format_for(key: str, value: float | None) -> str:
    if value is None:
        return "-"
    if "latency" in key or key.endswith("_ms.mean"):
        return human_ms(value)
    if "bytes" in key:
        return human_bytes(value)
    if key.endswith("_rps"):
        return f"{value:,.1f}/s"
    if "pct" in key:
        return f"{value:.0f}%"
    return f"{value:.3g}"


def stage_rows(report: Report | None) -> list[tuple[str, str, str, str, str, str]]:
    """Per stage: kind, share of the mean, P50, P99, share of the P99 excess."""
    stages = report.summary.stages if report is not None else {}
    rows = sorted(stages.items(), key=lambda item: -item[1].share)
    return [
        (
            name,
            row.kind,
            percent(row.share),
            human_ms(row.p50_ms),
            human_ms(row.p99_ms),
            percent(row.excess_share),
        )
        for name, row in rows
    ]


def top_processes(window: Dump, count: int = 5) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """At the last sample in the window: the busiest processes by CPU, and by GPU memory."""
    by_cpu: list[tuple[str, ...]] = []
    processes = window.table("processes")
    if processes is not None and len(processes) and "cpu_pct" in processes.columns:
        last = processes[processes["ts"] == processes["ts"].iloc[-1]].nlargest(count, "cpu_pct")
        for row in last.itertuples(index=False):
            thread = getattr(row, "max_thread_cpu_pct", float("nan"))
            by_cpu.append(
                (
                    _pid(row),
                    str(getattr(row, "name", "") or ""),
                    f"{row.cpu_pct:.0f}%",
                    "-" if thread != thread else f"{thread:.0f}%",
                )
            )
    by_gpu: list[tuple[str, ...]] = []
    gpu_processes = window.table("gpu_processes")
    if gpu_processes is not None and len(gpu_processes) and "mem_used_bytes" in gpu_processes.columns:
        frame = gpu_processes[gpu_processes["ts"] == gpu_processes["ts"].iloc[-1]]
        for row in frame.nlargest(count, "mem_used_bytes").itertuples(index=False):
            gpu = getattr(row, "gpu", float("nan"))
            by_gpu.append(
                (
                    _pid(row),
                    str(getattr(row, "name", "") or ""),
                    "-" if gpu != gpu else f"{gpu:.0f}",
                    human_bytes(row.mem_used_bytes),
                )
            )
    return by_cpu, by_gpu


def _pid(row: object) -> str:
    pid = getattr(row, "pid", float("nan"))
    return "-" if pid != pid else f"{pid:.0f}"


def missing_evidence_lines(report: Report) -> list[str]:
    """Why no finding can come from evidence the view should have: no latencies (and why, where the
    recording says), a source that never delivered or was lost."""
    if report.summary.latency_ms:
        return dead_source_lines(report.evidence)
    told = no_latency_line(report.evidence)  # names the request log's failure itself
    others = tuple(s for s in report.evidence.dead_sources if s.source != "requests_log")
    return [told, *source_lines(others)]


def window_label(seconds: float | None) -> str:
    """The top bar's window: "10 min", "1 h", "everything"."""
    if seconds is None:
        return "everything"
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"


def clock_label(epoch: float | None) -> str:
    """A moment on the top bar, UTC to the second."""
    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


def position_label(state: FeedState, paused: bool) -> str:
    """Where the view is: live, a file's span, or a replay's clock and speed."""
    if state.mode == "live":
        return "paused" if paused else "live"
    if state.mode == "file":
        return f"file, {clock_label(state.start)}-{clock_label(state.end)} UTC"
    played = (state.position or 0) - (state.start or 0)
    total = (state.end or 0) - (state.start or 0)
    status = "paused" if paused else ("ended" if state.finished else f"x{state.speed:g}")
    return f"replay {_duration(played)} / {_duration(total)} ({status}) at {clock_label(state.position)} UTC"


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
