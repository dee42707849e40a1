"""The picture of a profiler trace's evidence: the GPU's time, busy or idle and why, and the top kernels.

Above: the span cut into equal slices; each slice's bar is the share of it a
kernel ran (dark) and, stacked on it, the share the GPU idled with the host
in each state (diagnose.facts.gpu_trace.IDLE_STATES), read at evenly spaced
instants. Below: the kernels with the most time, by name. The facts give the
exact shares; the picture shows where in the span they were.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.dump.model import Dump
from diagnose.facts.gpu_trace import IDLE_STATES, gpu_timeline, short_kernel_name

SLICES = 120
_READINGS_PER_SLICE = 200
_TOP_KERNELS = 8
_COLOURS = {
    "busy": "#1f4e9c",
    "sync": "#d62728",
    "launch": "#e08a1e",
    "runtime": "#f2c14e",
    "operator": "#9467bd",
    "untraced": "#c7c7c7",
}
_LABELS = {
    "busy": "a kernel running",
    "sync": "idle, host blocked in a sync",
    "launch": "idle, host launching",
    "runtime": "idle, host in other runtime calls",
    "operator": "idle, host in operators",
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


def trace_strip(dump: Dump) -> TraceStrip | None:
    timeline = gpu_timeline(dump)
    if timeline is None or timeline.end <= timeline.begin:
        return None
    span = timeline.end - timeline.begin
    readings = SLICES * _READINGS_PER_SLICE
    at = timeline.begin + (np.arange(readings) + 0.5) * span / readings
    state = timeline.state_at(at).reshape(SLICES, _READINGS_PER_SLICE)
    shares = {"busy": (state == -1).mean(axis=1)}
    states = IDLE_STATES if timeline.layers else IDLE_STATES[-1:]  # without host calls: all untraced
    for name in states:
        shares[name] = (state == IDLE_STATES.index(name)).mean(axis=1)
    kernels = timeline.kernels
    time = kernels.groupby("name", observed=True)["dur_us"].sum().sort_values(ascending=False)
    total = float(time.sum())
    top = tuple(
        (short_kernel_name(str(name)), float(t / total)) for name, t in time.head(_TOP_KERNELS).items()
    )
    gpu = "the GPU" if timeline.gpu is None else f"GPU {timeline.gpu:.0f}"
    steps = tuple(float(t - timeline.begin) / 1000 for t in timeline.step_starts())
    return TraceStrip(gpu, span / 1000, np.linspace(0, span / 1000, SLICES + 1), shares, top, steps)


def draw_trace(data: TraceStrip):
    from diagnose.pictures import style

    figure, (strip, kernels) = style.plt.subplots(
        2,
        1,
        figsize=(style.WIDTH_IN, style.ROW_IN * 2 + 0.4 * len(data.top_kernels) / 2),
        gridspec_kw={"height_ratios": [1.3, max(1.0, 0.22 * len(data.top_kernels))]},
    )
    left, width = data.edges_ms[:-1], np.diff(data.edges_ms)
    bottom = np.zeros(left.size)
    for name, share in data.shares.items():
        strip.bar(
            left, share, width=width, bottom=bottom, align="edge", color=_COLOURS[name], label=_LABELS[name]
        )
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
