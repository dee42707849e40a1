"""The picture behind a finding: the curve an engineer would otherwise draw in a notebook.

One picture per kind of evidence, drawn when its hypothesis fired:

- memory (memory-fragmentation): the GPU's used memory, the allocator's
  reserved and allocated bytes and its largest free block, OOMs marked; the
  gap between reserved and allocated is the memory that fragmentation strands;
- cold against warm (cold-start-contamination): each request's latency against
  the time since its server (re)started, the cold ones in colour;
- the batch curve (batch-window-too-long, oversized-batch): throughput against
  batch size, from the requests' own batch sizes and forward times, the knee
  marked;
- latency against input length (input-length-shift): each request's served
  time (latency less waiting) against its input length before and after the
  shift, and the line the facts fitted before it, which predicts the after;
- clocks against forward time (gpu-throttling): the SM clock as a share of its
  maximum and the temperature while the GPU worked, throttled seconds shaded,
  and the requests' forward time on the same time axis;
- the engine's memory (kv-cache-pressure): KV cache usage, preemptions, and
  requests running and waiting, over time;
- swapping (memory-swapping): swap used and paging rates over time;
- the queueing curve (queue-saturation): each window's mean queue wait against
  its utilisation, with the least-squares ρ/(1−ρ) curve through them, and
  against the arrival rate with the knee and the 70 % operating point;
- generation against long prefills (prefill-decode-interference): in the
  minute with the most interfered requests, each generating request as a bar
  from its first to its last token at the height of its time per output
  token, the long prompts' prefills as lines across them; beside it, the
  distribution of TPOT relative to its minute's median, during a long prefill
  and clear of one, as the facts compared them;
- the sampling grid (coarse-sampling): each time series' sample instants over
  a stretch of the dump, with a 15 s spike drawn to scale: what falls between
  samples is not in the evidence.

Over 500 lines, on purpose: each picture is a small frozen dataclass, the
function that computes it from the dump and the report, and the one that draws
it (about 60 lines a finding), all in the same style and helpers; read one
picture's three parts together, found by the finding's name above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.batching import throughput_curve
from diagnose.facts.coldstart import cold_requests
from diagnose.facts.length_shift import LengthModel, length_model
from diagnose.facts.llm import LOCAL_WINDOW_S, interference_split
from diagnose.facts.parallelism import server_rows
from diagnose.facts.queueing import QueueWindows, queue_windows
from diagnose.facts.restarts import restart_times
from diagnose.facts.sampling import series_intervals
from diagnose.facts.throttle import BUSY_PCT, throttled_rows
from diagnose.report.model import Report

GIB = 2**30


@dataclass(frozen=True)
class MemoryData:
    times: np.ndarray
    lines: tuple[tuple[str, np.ndarray], ...]  # (label, GiB per time)
    ooms: tuple[float, ...]


@dataclass(frozen=True)
class ColdData:
    since_start_s: np.ndarray
    latency_ms: np.ndarray
    cold: np.ndarray  # bool


@dataclass(frozen=True)
class BatchCurve:
    size: np.ndarray
    items_per_s: np.ndarray
    forward_ms: np.ndarray
    knee: float | None


@dataclass(frozen=True)
class QueueCurve:
    windows: QueueWindows
    fit_scale_ms: float | None  # a in wait = a * rho / (1 - rho), least squares; None without rho
    knee_rps: float | None
    recommended_rps: float | None


def queue_curve(dump: Dump, report: Report) -> QueueCurve | None:
    capacity = report.number("batch.capacity_items_per_s")
    found = queue_windows(dump, capacity)
    if found is None or isinstance(found, str):
        return None
    scale = None
    if found.rho is not None:
        known = np.isfinite(found.rho)
        shape = found.rho[known] / (1 - found.rho[known])
        if np.dot(shape, shape) > 0:
            scale = float(np.dot(shape, found.wait_ms[known]) / np.dot(shape, shape))
    return QueueCurve(found, scale, report.number("queue.knee_rps"), report.number("queue.recommended_rps"))


@dataclass(frozen=True)
class ClockData:
    times: np.ndarray  # epoch s, one per GPU sample second
    clock_share: np.ndarray  # SM clock / its maximum, mean over the GPUs at work
    temp_c: np.ndarray | None  # the hottest GPU
    throttled: np.ndarray  # bool: a slowing reason on any GPU at work
    forward_times: np.ndarray | None  # window starts
    forward_ms: np.ndarray | None  # median forward time per window


def clock_data(dump: Dump, gpu_name: str | None = None) -> ClockData | None:
    """The GPU the facts name (``gpu.throttle_gpu``, "GPU 5"), or all of them averaged."""
    gpu = dump.table("gpu")
    if gpu is None or not {"sm_clock_mhz", "max_sm_clock_mhz"} <= set(gpu.columns):
        return None
    index = gpu_name.removeprefix("GPU ") if gpu_name else None
    if index is not None and "gpu" in gpu.columns and index.isdigit():
        gpu = gpu[pd.to_numeric(gpu["gpu"], errors="coerce") == int(index)]
    frame = gpu.assign(
        share=pd.to_numeric(gpu["sm_clock_mhz"], errors="coerce")
        / pd.to_numeric(gpu["max_sm_clock_mhz"], errors="coerce").where(lambda v: v > 0)
    )
    if "util_pct" in frame.columns:
        frame = frame[pd.to_numeric(frame["util_pct"], errors="coerce") >= BUSY_PCT]  # the facts' "at work"
    if frame.empty:
        return None
    throttled = throttled_rows(frame)
    frame = frame.assign(throttled=False if throttled is None else throttled)
    per = frame.groupby("ts").agg(share=("share", "mean"), throttled=("throttled", "any"))
    temp = frame.groupby("ts")["temp_c"].max().reindex(per.index).to_numpy() if "temp_c" in frame else None
    forward_times = forward = None
    requests = dump.table("requests")
    if requests is not None and "stage_forward_ms" in requests.columns:
        window = 10.0
        slot = (requests["ts"] // window) * window
        medians = pd.to_numeric(requests["stage_forward_ms"], errors="coerce").groupby(slot).median()
        forward_times, forward = medians.index.to_numpy(dtype="float64"), medians.to_numpy(dtype="float64")
    return ClockData(
        per.index.to_numpy(dtype="float64"),
        per["share"].to_numpy(dtype="float64"),
        temp,
        per["throttled"].to_numpy(dtype=bool),
        forward_times,
        forward,
    )


@dataclass(frozen=True)
class SeriesPanel:
    """Rows of server or host series on one time axis: [(title, [(label, times, values)])]."""

    title: str
    rows: tuple[tuple[str, tuple[tuple[str, np.ndarray, np.ndarray], ...]], ...]


def engine_panel(dump: Dump) -> SeriesPanel | None:
    return _panel(
        dump,
        "server",
        "The engine: KV cache, preemptions, requests running and waiting",
        (
            ("KV cache used (%)", (("kv_cache_usage_pct", "KV cache", 1.0),)),
            ("preemptions / s", (("preemptions_per_s", "preemptions", 1.0),)),
            ("requests", (("running", "running", 1.0), ("queue_depth", "waiting", 1.0))),
        ),
    )


def swap_panel(dump: Dump) -> SeriesPanel | None:
    return _panel(
        dump,
        "system",
        "The host's memory: swap used and paging",
        (
            ("swap used (GiB)", (("swap_used_bytes", "swap used", GIB),)),
            ("swapped (MiB/s)", (("swap_in_per_s", "in", 2**20), ("swap_out_per_s", "out", 2**20))),
        ),
    )


def cpu_panel(dump: Dump) -> SeriesPanel | None:
    """Who wants a core: the run queue against the cores, the server's switches, its threads waiting."""
    rows = []
    system = dump.table("system")
    if system is not None and {"procs_running", "cpu_count"} <= set(system.columns):
        times = system["ts"].to_numpy(dtype="float64")
        lines = tuple(
            (label, times, pd.to_numeric(system[column], errors="coerce").to_numpy(dtype="float64"))
            for column, label in (("procs_running", "running or runnable"), ("cpu_count", "cores"))
        )
        rows.append(("the host's run queue (threads)", lines))
    server = server_rows(dump)
    if server is not None:
        times = server["ts"].to_numpy(dtype="float64")
        switches = tuple(
            (label, times, server[column].to_numpy(dtype="float64"))
            for column, label in (
                ("ctx_switches_involuntary_per_s", "preempted"),
                ("ctx_switches_voluntary_per_s", "blocked of its own accord"),
            )
            if column in server.columns and server[column].notna().any()
        )
        if switches:
            rows.append(("the server's context switches a second", switches))
        if "run_queue_wait_pct" in server.columns and server["run_queue_wait_pct"].notna().any():
            waiting = server["run_queue_wait_pct"].to_numpy(dtype="float64") / 100
            rows.append(("the server's threads waiting for a core", (("threads", times, waiting),)))
    return SeriesPanel("The CPU: threads wanting a core, and what they did", tuple(rows)) if rows else None


def cleanup_panel(dump: Dump) -> SeriesPanel | None:
    """Memory taken afresh: the allocator's device allocations and the requests each second, the server's
    page faults and its resident memory."""
    rows = []
    allocator = dump.table("allocator")
    if allocator is not None and "num_device_alloc" in allocator.columns:
        counts = pd.to_numeric(allocator["num_device_alloc"], errors="coerce").groupby(allocator["ts"]).sum()
        times = counts.index.to_numpy(dtype="float64")
        rates = np.diff(counts.to_numpy(dtype="float64")).clip(0) / np.diff(times)
        lines = [("cudaMalloc calls", times[1:], rates)]
        requests = dump.table("requests")
        if requests is not None and times.size > 1:
            arrivals = np.sort(requests["ts"].to_numpy(dtype="float64"))
            served = np.diff(np.searchsorted(arrivals, times, side="right")) / np.diff(times)
            lines.append(("requests", times[1:], served))
        rows.append(("a second", tuple(lines)))
    server = server_rows(dump)
    if server is not None and "minor_faults_per_s" in server.columns:
        times = server["ts"].to_numpy(dtype="float64")
        rows.append(
            (
                "the server's page faults a second",
                (("minor faults", times, server["minor_faults_per_s"].to_numpy()),),
            )
        )
        if "rss_bytes" in server.columns:
            rows.append(
                ("its resident memory (MiB)", (("RSS", times, server["rss_bytes"].to_numpy() / 2**20),))
            )
    return SeriesPanel("Memory taken afresh for each request", tuple(rows)) if rows else None


def _panel(dump: Dump, table: str, title: str, rows) -> SeriesPanel | None:
    drawn = []
    for row_title, lines in rows:
        found = []
        for column, label, scale in lines:
            series = dump.per_sample(table, column, "max")
            if series is not None and len(series):
                found.append((label, series.index.to_numpy(dtype="float64"), series.to_numpy() / scale))
        if found:
            drawn.append((row_title, tuple(found)))
    return SeriesPanel(title, tuple(drawn)) if drawn else None


def shift_model(dump: Dump, report: Report) -> LengthModel | None:
    """The line fitted before the shift; the P95's shift where the tail rose more than the median."""
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns:
        return None
    median = report.number("latency.rise_ratio")
    tail = report.number("latency.tail_rise_ratio")
    return length_model(requests, tail=tail is not None and (median is None or tail > median))


def memory_data(dump: Dump) -> MemoryData | None:
    found = {
        "GPU used (fullest GPU)": dump.per_sample("gpu", "mem_used_bytes", "max"),
        "reserved (allocator)": dump.per_sample("allocator", "reserved_bytes", "sum"),
        "allocated (allocator)": dump.per_sample("allocator", "allocated_bytes", "sum"),
        "largest free block": dump.per_sample("allocator", "largest_free_block_bytes", "sum"),
    }
    if found["reserved (allocator)"] is None:
        return None
    series = {label: values for label, values in found.items() if values is not None}
    times = np.unique(np.concatenate([s.index.to_numpy(dtype="float64") for s in series.values()]))
    lines = tuple((label, s.reindex(times).to_numpy(dtype="float64") / GIB) for label, s in series.items())
    return MemoryData(times, lines, _ooms(dump))


def coldstart_data(dump: Dump) -> ColdData | None:
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns:
        return None
    stamps, _ = restart_times(dump)
    found = cold_requests(dump, requests, stamps)
    if found is None:
        return None
    ts = requests["ts"].to_numpy(dtype="float64")
    starts = np.array(stamps)
    latest = np.searchsorted(starts, ts, side="right") - 1
    since = np.where(latest >= 0, ts - starts[np.maximum(latest, 0)], np.nan)
    return ColdData(since, requests["latency_ms"].to_numpy(dtype="float64"), found[0])


def batch_curve(dump: Dump, report: Report) -> BatchCurve | None:
    requests = dump.table("requests")
    if requests is None or not {"batch_size", "stage_forward_ms"} <= set(requests.columns):
        return None
    size = pd.to_numeric(requests["batch_size"], errors="coerce").to_numpy(dtype="float64")
    forward = pd.to_numeric(requests["stage_forward_ms"], errors="coerce").to_numpy(dtype="float64")
    known = np.isfinite(size) & (size >= 1) & np.isfinite(forward) & (forward > 0)
    curve = throughput_curve(size[known], forward[known])
    if len(curve) < 3:
        return None
    knee = report.number("batch.knee_size")
    return BatchCurve(
        curve["size"].to_numpy(), curve["items_per_s"].to_numpy(), curve["forward_ms"].to_numpy(), knee
    )


def draw_memory(data: MemoryData):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN, 3.4))
    colours = (style.OTHER, style.LATENCY, style.LATENCY_LIGHT, style.WORSE)
    for (label, values), colour in zip(data.lines, colours, strict=False):
        axis.plot(style.dates(data.times), values, color=colour, linewidth=1.2, label=label)
    for ts in data.ooms:
        axis.axvline(style.dates(np.array([ts]))[0], color=style.EVENT, linewidth=1.2)
    if data.ooms:
        axis.plot([], [], color=style.EVENT, label=f"OOM ({len(data.ooms)})")
    axis.set_ylabel("memory (GiB)")
    axis.set_ylim(bottom=0)
    style.time_axis(axis)
    axis.set_title("GPU memory: what the card holds, what the allocator reserved and allocated", loc="left")
    axis.legend(loc="upper left", ncols=2)
    return figure


def draw_coldstart(data: ColdData):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN, 3.4))
    warm = ~data.cold & np.isfinite(data.since_start_s)
    axis.scatter(
        data.since_start_s[warm], data.latency_ms[warm], s=3, color=style.LATENCY_LIGHT, label="warm"
    )
    axis.scatter(
        data.since_start_s[data.cold],
        data.latency_ms[data.cold],
        s=8,
        color=style.WORSE,
        label=f"cold ({int(data.cold.sum())})",
    )
    if np.nanmin(data.latency_ms) > 0:
        axis.set_yscale("log")
    axis.set_xlabel("time since the server (re)started (s)")
    axis.set_ylabel("latency (ms)")
    axis.set_title("Latency after each start: the cold requests", loc="left")
    axis.legend(loc="upper right")
    return figure


def draw_batch_curve(data: BatchCurve):
    from matplotlib.ticker import ScalarFormatter

    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.8, 3.4))
    axis.plot(data.size, data.items_per_s, marker="o", color=style.LATENCY, label="throughput (items/s)")
    axis.set_xscale("log", base=2)
    axis.xaxis.set_major_formatter(ScalarFormatter())
    axis.set_xlabel("batch size")
    axis.set_ylabel("throughput (items/s)")
    axis.set_ylim(bottom=0)
    forward = axis.twinx()
    forward.plot(
        data.size, data.forward_ms, marker=".", linestyle="--", color=style.OTHER, label="forward time (ms)"
    )
    forward.set_ylabel("forward time of the batch (ms)")
    forward.set_ylim(bottom=0)
    forward.grid(False)
    if data.knee is not None:
        axis.axvline(data.knee, color=style.WORSE, linewidth=1.0)
        axis.annotate(
            f"knee: {data.knee:g}",
            (data.knee, 0.05),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            color=style.WORSE,
            fontsize=8,
        )
    lines = axis.get_lines()[:1] + forward.get_lines()[:1]
    axis.legend(lines, [str(line.get_label()) for line in lines], loc="lower right")
    axis.set_title("Throughput against batch size, from the requests' own batches", loc="left")
    return figure


def draw_queue_curve(data: QueueCurve):
    from diagnose.pictures import style

    windows = data.windows
    panels = 2 if windows.rho is not None else 1
    figure, axes = style.plt.subplots(1, panels, figsize=(style.WIDTH_IN, 3.4), squeeze=False)
    by_rate = axes[0, 0]
    by_rate.scatter(windows.rate_rps, windows.wait_ms, color=style.LATENCY, s=18)
    for rate, label, height in (
        (data.knee_rps, "knee", 0.92),
        (data.recommended_rps, "70 % of the knee", 0.80),
    ):
        if rate is not None:
            by_rate.axvline(rate, color=style.WORSE, linewidth=1.0, linestyle="-" if label == "knee" else ":")
            by_rate.annotate(
                f"{label}: {rate:,.1f}/s",
                (rate, height),
                xycoords=("data", "axes fraction"),
                xytext=(4, 0),
                textcoords="offset points",
                color=style.WORSE,
                fontsize=8,
            )
    by_rate.set_xlabel("arrival rate per window (requests/s)")
    by_rate.set_ylabel("mean queue wait (ms)")
    by_rate.set_title("Queue wait against load", loc="left")
    if windows.rho is not None:
        by_rho = axes[0, 1]
        known = np.isfinite(windows.rho)
        by_rho.scatter(windows.rho[known], windows.wait_ms[known], color=style.LATENCY, s=18, label="windows")
        if data.fit_scale_ms is not None:
            grid = np.linspace(0, min(0.99, max(0.5, float(np.max(windows.rho[known])) + 0.05)), 200)
            by_rho.plot(
                grid,
                data.fit_scale_ms * grid / (1 - grid),
                color=style.OTHER,
                linestyle="--",
                label=f"{data.fit_scale_ms:,.1f} ms x rho / (1 - rho)",
            )
        by_rho.set_ylim(0, 1.2 * float(np.nanmax(windows.wait_ms[known])))
        by_rho.set_xlabel(f"utilisation rho ({windows.rho_how})"[:70])
        by_rho.set_ylabel("mean queue wait (ms)")
        by_rho.set_title("Queue wait against utilisation", loc="left")
        by_rho.legend(loc="upper left")
    return figure


def draw_shift(data: LengthModel):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN * 0.8, 3.6))
    for mask, colour, label in (
        (data.before, style.OTHER, "before the shift"),
        (data.after, style.LATENCY, "after"),
    ):
        rows = np.flatnonzero(mask)
        rows = rows[:: max(1, rows.size // 3000)]  # a scatter needs no more points than it can show
        axis.scatter(data.input_len[rows], data.served_ms[rows], s=4, color=colour, alpha=0.5, label=label)
    lengths = data.input_len[data.before | data.after]
    grid = np.linspace(np.nanmin(lengths), np.nanmax(lengths), 50)
    axis.plot(
        grid,
        data.intercept + data.slope * grid,
        color=style.WORSE,
        linewidth=1.4,
        label=f"fitted before: {data.intercept:,.1f} ms + {data.slope:.3g} ms/token",
    )
    axis.set_xlabel("input length (tokens)")
    axis.set_ylabel("served time: latency less waiting (ms)")
    which = "the P95's shift" if data.tail else "the shift"
    axis.set_title(f"Latency against input length, before and after {which}", loc="left")
    axis.legend(loc="upper left", markerscale=3)
    return figure


def draw_clocks(data: ClockData):
    from diagnose.pictures import style

    rows = 2 if data.forward_ms is not None else 1
    figure, axes = style.plt.subplots(
        rows, 1, sharex=True, figsize=(style.WIDTH_IN, 2.4 * rows + 0.6), squeeze=False
    )
    clock = axes[0, 0]
    clock.plot(
        style.dates(data.times),
        data.clock_share * 100,
        color=style.OTHER,
        linewidth=1.0,
        label="SM clock (% of its maximum)",
    )
    clock.set_ylabel("SM clock (% of max)")
    if data.temp_c is not None:
        temp = clock.twinx()
        temp.plot(style.dates(data.times), data.temp_c, color=style.WORSE, linewidth=0.8, alpha=0.7)
        temp.set_ylabel("hottest GPU (°C)")
        temp.grid(False)
    throttled = data.throttled.astype(float)
    for axis in axes[:, 0]:
        axis.fill_between(
            style.dates(data.times),
            0,
            1,
            where=throttled > 0,
            transform=axis.get_xaxis_transform(),
            color=style.WORSE,
            alpha=0.12,
            linewidth=0,
        )
    clock.set_title("Clocks while the GPU worked; throttled seconds shaded", loc="left")
    if data.forward_ms is not None:
        forward = axes[1, 0]
        forward.plot(style.dates(data.forward_times), data.forward_ms, color=style.LATENCY, linewidth=1.2)
        forward.set_ylabel("forward, median per 10 s (ms)")
    style.time_axis(axes[-1, 0])
    return figure


def draw_panel(data: SeriesPanel):
    from diagnose.pictures import style

    rows = len(data.rows)
    figure, axes = style.plt.subplots(
        rows, 1, sharex=True, figsize=(style.WIDTH_IN, 1.9 * rows + 0.6), squeeze=False
    )
    colours = (style.LATENCY, style.OTHER, style.WORSE)
    for axis, (title, lines) in zip(axes[:, 0], data.rows, strict=True):
        for (label, times, values), colour in zip(lines, colours, strict=False):
            axis.plot(style.dates(times), values, color=colour, linewidth=1.1, label=label)
        axis.set_title(title, loc="left", fontsize=9)
        if len(lines) > 1:
            axis.legend(loc="upper left", ncols=len(lines))
    figure.suptitle(data.title, x=0.01, ha="left", fontsize=10)
    style.time_axis(axes[-1, 0])
    return figure


@dataclass(frozen=True)
class InterferenceData:
    window: tuple[float, float]  # the minute drawn on the left, epoch s
    first: np.ndarray  # the generating requests in it: first and last token (epoch s), TPOT (ms)
    last: np.ndarray
    tpot_ms: np.ndarray
    overlapped: np.ndarray  # bool: a long prompt was prefilled while it generated
    long_prefills: np.ndarray  # epoch s, within the window
    during_relative: np.ndarray  # TPOT / its minute's median, over the whole dump
    clear_relative: np.ndarray
    threshold_tokens: float

    @property
    def ratio(self) -> float:
        return float(np.median(self.during_relative) / np.median(self.clear_relative))


_MAX_BARS = 400  # a busy minute holds thousands of requests; every k-th is drawn


def interference_data(dump: Dump) -> InterferenceData | None:
    """The split the facts compared (diagnose.facts.llm.interference_split), and its busiest minute."""
    requests = dump.table("requests")
    if requests is None or "latency_ms" not in requests.columns:
        return None
    split = interference_split(requests)
    if split is None or isinstance(split, str):
        return None
    minute = np.floor(split.first / LOCAL_WINDOW_S)
    minutes, counts = np.unique(minute[split.during], return_counts=True)
    start = float(minutes[np.argmax(counts)]) * LOCAL_WINDOW_S  # the earliest of the busiest
    window = (start, start + LOCAL_WINDOW_S)
    inside = np.flatnonzero(split.usable & (split.first >= window[0]) & (split.first < window[1]))
    inside = inside[:: max(1, -(-inside.size // _MAX_BARS))]
    prefills = split.long_prefills
    return InterferenceData(
        window,
        split.first[inside],
        split.last[inside],
        split.tpot[inside],
        split.overlapped[inside],
        prefills[(prefills >= window[0]) & (prefills <= max(window[1], float(split.last[inside].max())))],
        split.relative[split.during],
        split.relative[split.clear],
        split.threshold,
    )


def draw_interference(data: InterferenceData):
    from diagnose.pictures import style

    figure, (bars, spread) = style.plt.subplots(
        1, 2, figsize=(style.WIDTH_IN, 3.8), gridspec_kw={"width_ratios": [1.7, 1]}, layout="constrained"
    )
    for overlapped, colour, label in ((False, style.LATENCY_LIGHT, "clear"), (True, style.WORSE, "during")):
        chosen = data.overlapped == overlapped
        bars.hlines(
            data.tpot_ms[chosen],
            style.dates(data.first[chosen]),
            style.dates(data.last[chosen]),
            color=colour,
            linewidth=1.4,
            label=f"generating {label} a long prefill",
        )
    for ts in data.long_prefills:
        bars.axvline(style.dates(np.array([ts]))[0], color=style.OTHER, linewidth=0.8, linestyle="--")
    bars.plot([], [], color=style.OTHER, linewidth=0.8, linestyle="--", label="a long prompt's first token")
    bars.set_xlim(style.dates(np.array(data.window)))
    bars.set_ylim(bottom=0)
    bars.set_ylabel("time per output token (ms)")
    style.time_axis(bars)
    figure.suptitle(
        f"Generation while long prompts (>= {data.threshold_tokens:,.0f} tokens) were prefilled",
        x=0.01,
        ha="left",
        fontsize=10,
    )
    bars.set_title(
        "The busiest minute: each request from its first to its last token", loc="left", fontsize=9
    )
    bars.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize=8)
    both = np.concatenate([data.during_relative, data.clear_relative])
    edges = np.linspace(0, float(np.nanpercentile(both, 99)) * 1.05, 41)
    for values, colour, label in (
        (data.clear_relative, style.LATENCY_LIGHT, "clear"),
        (data.during_relative, style.WORSE, "during a long prefill"),
    ):
        spread.hist(values, bins=edges, density=True, histtype="step", color=colour, linewidth=1.4)
        spread.axvline(np.median(values), color=colour, linewidth=1.0)
        spread.plot([], [], color=colour, label=f"{label} ({values.size:,}), median {np.median(values):.2f}")
    spread.set_xlabel("TPOT / median TPOT of its minute")
    spread.set_yticks([])
    spread.set_title(f"The whole dump: {data.ratio:.2f}x during a long prefill", loc="left", fontsize=9)
    spread.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=8)
    return figure


@dataclass(frozen=True)
class SamplingData:
    window: tuple[float, float]  # the stretch drawn, epoch s
    rows: tuple[tuple[str, float, np.ndarray], ...]  # (table, median interval s, sample times in the window)
    spike: tuple[float, float]  # a SPIKE_S spike drawn to scale, starting just after a sample
    has_requests: bool


SPIKE_S = 15.0  # the rule's own yardstick: a spike of seconds, as users feel it


def sampling_data(dump: Dump) -> SamplingData | None:
    """Where each time series has samples, over ten of the coarsest interval (at least 5 minutes)."""
    intervals = series_intervals(dump)
    if not intervals:
        return None
    times = {name: np.unique(dump.tables[name]["ts"].to_numpy(dtype="float64")) for name in intervals}
    start = min(float(t[0]) for t in times.values())
    end = max(float(t[-1]) for t in times.values())
    window = (start, min(end, start + max(300.0, 10 * max(intervals.values()))))
    rows = tuple(
        (name, intervals[name], t[(t >= window[0]) & (t <= window[1])])
        for name, t in sorted(times.items(), key=lambda item: intervals[item[0]])
    )
    finest = rows[0][2]
    # The spike begins just after one of the finest series' samples, midway through the stretch.
    after = finest[np.searchsorted(finest, (window[0] + window[1]) / 2) - 1] if finest.size else window[0]
    spike_start = float(after) + 0.5
    requests = dump.table("requests")
    has_requests = requests is not None and len(requests) > 0
    return SamplingData(window, rows, (spike_start, spike_start + SPIKE_S), has_requests)


def draw_sampling(data: SamplingData):
    from diagnose.pictures import style

    figure, axis = style.plt.subplots(figsize=(style.WIDTH_IN, 0.55 * len(data.rows) + 1.6))
    axis.axvspan(*style.dates(np.array(data.spike)), color=style.EPISODE, alpha=0.18, linewidth=0)
    labels = []
    for row, (name, interval, times) in enumerate(data.rows):
        axis.vlines(style.dates(times), row - 0.35, row + 0.35, color=style.LATENCY, linewidth=1.0)
        seen = int(((times >= data.spike[0]) & (times <= data.spike[1])).sum())
        labels.append(f"{name}: every {interval:g} s ({seen} in the spike)")
    axis.set_yticks(range(len(data.rows)), labels)
    axis.set_ylim(-0.7, len(data.rows) - 0.3)
    axis.invert_yaxis()
    axis.grid(False, axis="y")
    pad = 0.02 * (data.window[1] - data.window[0])  # samples on the stretch's ends stay off the spine
    axis.set_xlim(style.dates(np.array([data.window[0] - pad, data.window[1] + pad])))
    style.time_axis(axis)
    requests = "per-request latencies logged" if data.has_requests else "no per-request latencies"
    axis.set_title(
        f"Sample instants of each time series; shaded: a {SPIKE_S:g} s spike to scale ({requests})",
        loc="left",
    )
    return figure


def _ooms(dump: Dump) -> tuple[float, ...]:
    events = dump.table("events")
    if events is None or "kind" not in events.columns:
        return ()
    kinds = events["kind"].astype("string").str.lower()
    return tuple(float(t) for t in events.loc[kinds == "oom", "ts"])
