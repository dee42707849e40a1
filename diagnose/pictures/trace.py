"""The picture of a profiler trace's evidence: the GPU's time, busy or idle and why, and the top kernels.

Above: the span cut into equal slices; each slice's bar is the share of it a
kernel ran (dark) and, stacked on it, the share the GPU idled with the host
in each state (diagnose.facts.gpu_timeline.IDLE_STATES), read at evenly spaced
instants. Below: the kernels with the most time, by name. The facts give the
exact shares; the picture shows where in the span they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from diagnose.dump.model import Dump
from diagnose.facts.gpu_timeline import IDLE_STATES, GpuTimeline, gpu_timeline
from diagnose.facts.gpu_trace import short_kernel_name

SLICES = 120
_READINGS_PER_SLICE = 200
_READINGS_PER_STEP = 2000
_TOP_KERNELS = 8
_COLOURS = {
    "busy": "#1f4e9c",
    "queued": "#17becf",
    "turnaround": "#aec7e8",
    "sync": "#d62728",
    "launch": "#e08a1e",
    "runtime": "#f2c14e",
    "operator": "#9467bd",
    "cpu": "#8c564b",
    "untraced": "#c7c7c7",
}
_LABELS = {
    "busy": "a kernel running",
    "queued": "idle, next kernel already queued",
    "turnaround": "idle, turning to the next queued kernel",
    "sync": "idle, host blocked in a sync",
    "launch": "idle, host launching",
    "runtime": "idle, host in other runtime calls",
    "operator": "idle, host in operators",
    "cpu": "idle, host computing on the CPU",
    "untraced": "idle, host in nothing traced",
}


@dataclass(frozen=True)
class TraceStrip:
    gpu: str
    span_ms: float
    edges_ms: np.ndarray  # SLICES + 1 slice edges, from the first kernel's start
    shares: dict[str, np.ndarray]  # "busy" and each idle state: its share of each slice
    top_kernels: tuple[tuple[str, float], ...]  # (name, share of kernel time), most first
    step_starts_ms: tuple[float, ...] = ()  # where each profiled step's first kernel ran
    step_shares: dict[str, np.ndarray] = field(default_factory=dict)  # as shares, a whole step each


def trace_strip(dump: Dump) -> TraceStrip | None:
    timeline = gpu_timeline(dump)
    if timeline is None or timeline.end <= timeline.begin:
        return None
    span = timeline.end - timeline.begin
    readings = SLICES * _READINGS_PER_SLICE
    at = timeline.begin + (np.arange(readings) + 0.5) * span / readings
    states = IDLE_STATES if timeline.layers else IDLE_STATES[-1:]  # without host calls: all untraced
    shares = _shares(timeline, at.reshape(SLICES, _READINGS_PER_SLICE), states)
    kernels = timeline.kernels
    time = kernels.groupby("name", observed=True)["dur_us"].sum().sort_values(ascending=False)
    total = float(time.sum())
    top = tuple(
        (short_kernel_name(str(name)), float(t / total)) for name, t in time.head(_TOP_KERNELS).items()
    )
    gpu = "the GPU" if timeline.gpu is None else f"GPU {timeline.gpu:.0f}"
    firsts = timeline.step_starts()
    steps = tuple(float(t - timeline.begin) / 1000 for t in firsts)
    edges = np.linspace(0, span / 1000, SLICES + 1)
    return TraceStrip(gpu, span / 1000, edges, shares, top, steps, _step_shares(timeline, firsts, states))


def _step_shares(timeline: GpuTimeline, firsts: np.ndarray, states: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Each whole step (its first kernel to the next step's, as trace.step_busy_share measures it):
    the share a kernel ran, and the share of each idle state. Two whole steps at least, or none."""
    if firsts.size < 3:
        return {}
    low, high = firsts[:-1], firsts[1:]
    at = low[:, None] + (np.arange(_READINGS_PER_STEP) + 0.5) / _READINGS_PER_STEP * (high - low)[:, None]
    return _shares(timeline, at, states)


def _shares(timeline: GpuTimeline, at: np.ndarray, states: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per row of instants (a slice, a step): the share a kernel ran, and the share of each idle state."""
    state = timeline.state_at(at.ravel()).reshape(at.shape)
    return {"busy": (state == -1).mean(axis=1)} | {
        name: (state == IDLE_STATES.index(name)).mean(axis=1) for name in states
    }


def draw_trace(data: TraceStrip):
    from diagnose.pictures import style

    with_steps = bool(data.step_shares)
    ratios = [1.3, *([1.0] if with_steps else []), max(1.0, 0.22 * len(data.top_kernels))]
    figure, axes = style.plt.subplots(
        len(ratios),
        1,
        figsize=(style.WIDTH_IN, style.ROW_IN * (len(ratios) - 1) * 1.6 + 0.2 * len(data.top_kernels)),
        gridspec_kw={"height_ratios": ratios},
    )
    strip, kernels = axes[0], axes[-1]
    if with_steps:
        _draw_steps(axes[1], data.step_shares)
    left, width = data.edges_ms[:-1], np.diff(data.edges_ms)
    bottom = np.zeros(left.size)
    for name, share in data.shares.items():
        label = _LABELS[name] if share.any() else "_nolegend_"  # a state the trace never shows: no key
        strip.bar(left, share, width=width, bottom=bottom, align="edge", color=_COLOURS[name], label=label)
        bottom += share
    for start in data.step_starts_ms[1:]:  # where each step begins: the first needs no line
        strip.axvline(start, color="black", linewidth=0.8, alpha=0.6)
    strip.set_xlim(0, data.span_ms)
    strip.set_ylim(0, 1)
    strip.set_ylabel("share of the slice")
    steps = f"; lines: the {len(data.step_starts_ms)} steps' first kernels" if data.step_starts_ms else ""
    strip.set_xlabel(f"ms from the first kernel{steps}")
    strip.grid(False, axis="x")
    strip.legend(loc="upper left", bbox_to_anchor=(0, -0.28), ncol=3, fontsize=8)
    busy = float(np.mean(data.shares["busy"]))
    strip.set_title(
        f"{data.gpu}: busy {busy:.0%} of {data.span_ms:,.1f} ms, and what the host did while it idled",
        loc="left",
    )
    names = [name for name, _ in data.top_kernels]
    kernels.barh(range(len(names)), [share for _, share in data.top_kernels], color=_COLOURS["busy"])
    kernels.set_yticks(range(len(names)), names, fontsize=8)
    kernels.invert_yaxis()
    kernels.set_xlabel("share of kernel time")
    kernels.xaxis.set_major_formatter(style.plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    kernels.set_title("The kernels with the most time", loc="left")
    figure.tight_layout()
    return figure


def _draw_steps(axis, shares: dict[str, np.ndarray]) -> None:
    """One bar a whole step: a slow step (a sync, a data wait) stands apart from the rest."""
    from diagnose.pictures import style

    count = len(shares["busy"])
    position = np.arange(1, count + 1)
    bottom = np.zeros(count)
    for name, share in shares.items():
        axis.bar(position, share, width=0.8, bottom=bottom, color=_COLOURS[name])
        bottom += share
    axis.set_xlim(0.4, count + 0.6)
    axis.xaxis.set_major_locator(style.plt.MaxNLocator(integer=True))
    axis.set_ylim(0, 1)
    axis.set_ylabel("share of the step")
    axis.set_xlabel("step, in the order they ran (first kernel to the next step's)")
    axis.grid(False, axis="x")
    busy = shares["busy"]
    axis.set_title(
        f"Each whole step: GPU busy {busy.min():.0%} to {busy.max():.0%} (median {np.median(busy):.0%})",
        loc="left",
    )
