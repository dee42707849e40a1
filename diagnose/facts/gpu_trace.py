"""What a profiler trace says of the GPU's time: how busy it was, why it idled, and its kernels.

The timeline and the idle states are diagnose.facts.gpu_timeline's; here are
the facts read from them. Many short kernels with the GPU idle while the host
launches them is the signature of operators that were not fused; idle time
right after the host synchronised is the cost of a sync in the step; idle
time with the next kernel already queued is a wait on something besides the
host; copies from pageable memory are named by the profiler ("Pageable ->
Device").
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts import intervals
from diagnose.facts.cpu_graph import CHAIN, in_runs
from diagnose.facts.gpu_timeline import TURNAROUND_US, GpuTimeline, HostCalls, gpu_timeline, matches
from diagnose.facts.model import Facts

SHORT_KERNEL_US = 10.0  # below this a kernel costs about what launching it does (a few µs)
_HOST_COPY_KINDS = ("HtoD", "DtoH")
_CLASSES = (  # kernel classes by name, first match wins: the libraries' own naming
    ("communication", re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|mha_", re.I)),
    ("convolution", re.compile(r"conv|winograd|implicit_?gemm|dgrad|wgrad", re.I)),
    (
        "gemm",
        re.compile(r"gemm|cutlass|cublas|matmul|xmma|wgmma|_mma|\bmm_|hmma|ampere_.*_tn|sm\d+_.*_nn", re.I),
    ),
    ("reduction", re.compile(r"reduce|reduction|softmax|norm|triton_red|triton_per|argmax|topk|sort", re.I)),
    (
        "elementwise",
        re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi|fill|copy_kernel", re.I),
    ),
)


def add_trace_facts(facts: Facts, dump: Dump) -> None:
    activity = dump.traces.get("gpu_activity")
    timeline = gpu_timeline(dump)
    if timeline is None:
        if activity is not None and len(activity) and "kind" in activity:
            facts.add("trace.kernels", 0, f"{dump.source('gpu_activity')}: no kernel")
        return
    gpu, kernels, busy, begin, end = (
        timeline.gpu,
        timeline.kernels,
        timeline.busy,
        timeline.begin,
        timeline.end,
    )
    where = f"{dump.source('gpu_activity')}" + ("" if gpu is None else f", GPU {gpu:.0f}")
    durations = kernels["dur_us"].to_numpy(dtype="float64")
    span = end - begin
    facts.add("trace.kernels", int(len(kernels)), f"{where}: kernels")
    facts.add("trace.span_ms", span / 1000, f"{where}: first kernel start to last kernel end")
    facts.add("trace.kernel_median_us", float(np.median(durations)), f"{where}: kernel dur_us")
    facts.add(
        "trace.short_kernel_share",
        float((durations < SHORT_KERNEL_US).mean()),
        f"{where}: kernels under {SHORT_KERNEL_US:.0f} µs",
    )
    if span > 0:
        busy_us = float((busy[1] - busy[0]).sum())
        facts.add("trace.gpu_busy_share", busy_us / span, f"{where}: union of kernel intervals over the span")
    add_kernel_classes(facts, kernels["name"], durations, where)
    if timeline.host is not None:
        _add_host_facts(facts, timeline.host, timeline, where, dump.source("host_calls"))
    _add_copies(facts, timeline.activity, (begin, end), where)


def _add_host_facts(
    facts: Facts, host: HostCalls, timeline: GpuTimeline, where: str, calls_source: str
) -> None:
    kernels, busy, begin, end = timeline.kernels, timeline.busy, timeline.begin, timeline.end
    cite = f"{where} against {calls_source}"
    facts.add("trace.operator_calls", int(host.operator.sum()), f"{calls_source}: framework operators traced")
    facts.add("trace.launches", int(host.launch.sum()), f"{calls_source}: runtime calls that launch")
    if host.launch.any():
        facts.add(
            "trace.launch_median_us",
            float(np.median(host.dur[host.launch])),
            f"{calls_source}: dur_us of the launch calls",
        )
        correlation = kernels["correlation"].to_numpy(dtype="float64") if "correlation" in kernels else None
        if correlation is not None:
            graphed = (
                np.isin(correlation, host.correlation[host.graph_launch]) if host.graph_launch.any() else 0.0
            )
            facts.add(
                "trace.graph_kernel_share",
                float(np.mean(graphed)),
                f"{cite}: kernels launched by a CUDA graph (their graph launch's correlation)",
            )
    if timeline.issued is not None and np.isfinite(timeline.issued).any():
        # How far ahead of the GPU the host runs: near zero (or below: a kernel can start before its
        # launch call returns) where the GPU waits on each launch, a step's time where it never does.
        waited = kernels["ts"].to_numpy(dtype="float64") - timeline.issued
        facts.add(
            "trace.queue_wait_median_us",
            float(np.nanmedian(waited)),
            f"{cite}: from each kernel's launch call returning to its start (median)",
        )
    # CUPTI's sync records repeat the runtime's synchronise calls: count the calls where there are any.
    syncs = host.sync_call if host.sync_call.any() else host.sync_record
    _add_idle_split(facts, timeline, cite)
    _add_steps(facts, host, timeline, syncs, cite)
    _add_sync_cost(facts, host, syncs, busy, begin, end, cite)


def _add_idle_split(facts: Facts, timeline: GpuTimeline, cite: str) -> None:
    """Each idle microsecond goes to the first of: the next kernel already issued, a thread
    launching, in another runtime call (allocation, queries), in an operator that gives the GPU work
    (less its own blocked time), in one that gives it none (CPU work), blocked in a synchronising call
    or copy, and last in nothing traced."""
    begin, end = timeline.begin, timeline.end
    gaps = intervals.gaps(timeline.busy, begin, end)
    idle = float((gaps[1] - gaps[0]).sum())
    if idle <= 0:
        return
    covered = [intervals.overlap(gaps, layer) for layer in timeline.layers]
    queued, turnaround, launching, runtime, in_ops, in_cpu_ops, blocked = (covered[0], *np.diff(covered))
    source = f"{cite}: GPU idle time by what the host's threads were doing"
    facts.add(
        "trace.idle_queued_share",
        queued / idle,
        f"{cite}: GPU idle time whose next kernel's launch had returned before the GPU went idle",
    )
    facts.add(
        "trace.idle_turnaround_share",
        turnaround / idle,
        f"{cite}: GPU idle under {TURNAROUND_US:.0f} µs between a kernel and the next, already issued",
    )
    facts.add(
        "trace.queued_idle_share",
        queued / (end - begin),
        f"{cite}: GPU idle with its next kernel already issued, over the span",
    )
    if queued > 0:  # what the GPU waited on, where the trace shows it: a copy running meanwhile
        moving = timeline.activity[timeline.activity["kind"].to_numpy() != "kernel"]
        starts = moving["ts"].to_numpy(dtype="float64")
        copying = intervals.union(starts, starts + moving["dur_us"].to_numpy(dtype="float64"))
        facts.add(
            "trace.queued_copy_share",
            intervals.overlap(timeline.layers[0], copying) / queued,
            f"{cite}: of the GPU's idle time with its next kernel queued, the time a copy or memset ran",
        )
    facts.add("trace.idle_sync_share", blocked / idle, source)
    facts.add("trace.idle_launch_share", launching / idle, source)
    facts.add("trace.idle_runtime_share", runtime / idle, source)
    facts.add("trace.idle_operator_share", in_ops / idle, source)
    facts.add("trace.idle_cpu_share", in_cpu_ops / idle, source)
    facts.add(
        "trace.cpu_work_idle_share",
        in_cpu_ops / (end - begin),
        f"{cite}: GPU idle with the host in operators that give the GPU no work (CPU tensors), over the span",
    )
    # The framework's overhead: launches, the runtime calls operators make besides (the caching
    # allocator polls events on each allocation), and the operators' own host time.
    overhead = launching + runtime + in_ops
    facts.add("trace.idle_host_overhead_share", overhead / idle, source)
    facts.add(
        "trace.launch_bound_idle_share",
        overhead / (end - begin),
        f"{cite}: GPU idle with the host in runtime calls (not syncs) or operators, over the span",
    )
    facts.add("trace.idle_untraced_share", (idle - covered[-1]) / idle, source)
    facts.add(
        "trace.blocked_idle_share",
        blocked / (end - begin),
        f"{cite}: GPU idle with the host blocked in a synchronising call or copy and issuing nothing, "
        "over the span",
    )


def _add_steps(facts: Facts, host: HostCalls, timeline: GpuTimeline, syncs: np.ndarray, cite: str) -> None:
    marks = host.step_mark & np.isfinite(host.step)
    steps = int(np.unique(host.step[marks]).size)
    if not steps:
        return
    durations = host.dur[marks]
    facts.add("trace.steps", steps, f"{cite}: ProfilerStep annotations")
    facts.add("trace.step_median_ms", float(np.median(durations)) / 1000, f"{cite}: ProfilerStep dur_us")
    if steps >= 3:
        facts.add(
            "trace.step_cv",
            float(np.std(durations) / np.mean(durations)),
            f"{cite}: ProfilerStep dur_us, standard deviation over mean",
        )
    per_step = timeline.kernel_steps().value_counts()
    if len(per_step):
        facts.add(
            "trace.kernels_per_step",
            float(per_step.median()),
            f"{cite}: kernels by their launch's ProfilerStep (median)",
        )
        # The GPU's time a step, from its first kernel to the next step's: the host's annotation
        # ends when the host has issued the step, which can be long before the GPU has run it.
        firsts = timeline.step_starts()
        if firsts.size >= 2:
            facts.add(
                "trace.gpu_step_ms",
                float(np.median(np.diff(firsts))) / 1000,
                f"{cite}: from each step's first kernel to the next step's (median)",
            )
            # Busy share step by step: one slow step (a sync, a data wait) shows apart from the rest.
            busy = np.diff(intervals.covered_before(timeline.busy, firsts)) / np.diff(firsts)
            how = f"{cite}: kernel time within each step on the GPU, {busy.size} steps whole in the trace"
            facts.add("trace.step_busy_share.p50", float(np.median(busy)), f"{how} (median)")
            facts.add("trace.step_busy_share.min", float(busy.min()), f"{how} (the least busy)")
    in_steps = int((syncs & np.isfinite(host.step)).sum())
    facts.add(
        "trace.sync_per_step",
        in_steps / steps,
        f"{cite}: synchronising calls inside ProfilerStep annotations, per step",
    )


def _add_sync_cost(
    facts: Facts,
    host: HostCalls,
    syncs: np.ndarray,
    busy: tuple[np.ndarray, np.ndarray],
    begin: float,
    end: float,
    cite: str,
) -> None:
    """The GPU's idle time right after each synchronising call returned: the host waited for the
    queue to drain, so nothing was queued behind it, and the GPU waits for the host to catch up.

    Each is counted up to the time the host waited in the call: had it not waited, it would have
    done its next work that much sooner, and no more (a data loader that keeps the GPU waiting after
    a short sync is the loader's cost, not the sync's)."""
    facts.add("trace.sync_calls", int(syncs.sum()), f"{cite}: synchronising runtime calls")
    span = end - begin
    if span <= 0:
        return
    if not syncs.any():
        facts.add("trace.sync_idle_share", 0.0, f"{cite}: no synchronising call")
        return
    waited_all = host.dur[syncs]
    returned = host.ts[syncs] + waited_all
    inside = (returned >= begin) & (returned < end)
    returned, waited = returned[inside], waited_all[inside]
    starts, ends = busy
    index = np.searchsorted(starts, returned, side="right")  # the next busy stretch starts at starts[index]
    running = (index > 0) & (returned < ends[np.clip(index - 1, 0, None)])
    idle = ~running & (index < starts.size)
    cost = np.minimum(starts[np.clip(index, None, starts.size - 1)] - returned, waited)
    # Several calls returning in one idle stretch: it is counted once, for the call that cost most.
    idle_after = pd.Series(cost[idle]).groupby(index[idle]).max().to_numpy() if idle.any() else np.zeros(0)
    facts.add(
        "trace.sync_idle_share",
        float(idle_after.sum() / span),
        f"{cite}: GPU idle from each synchronising call's return to the next kernel (up to the wait in "
        "it), over the span",
    )


def _add_copies(facts: Facts, activity: pd.DataFrame, window: tuple[float, float], where: str) -> None:
    """The copies' facts; their time is counted within the kernels' span (``window``), so that a copy
    before the first kernel or after the last (a trace cut short) is no share of it."""
    begin, end = window
    span = end - begin
    copies = activity[activity["kind"].to_numpy() == "memcpy"]
    facts.add("trace.copies", int(len(copies)), f"{where}: memcpy activity")
    if len(copies) and ("pinned" not in copies or "copy_kind" not in copies):
        return  # copies whose memory the trace does not name: nothing to say either way
    host = copies[copies["copy_kind"].isin(_HOST_COPY_KINDS)] if len(copies) else copies
    pageable = host[host["pinned"] == False] if len(host) else host  # noqa: E712 - a nullable boolean
    facts.add("trace.pageable_copies", int(len(pageable)), f"{where}: memcpy from or to pageable memory")
    if span <= 0:
        return
    if not len(pageable):
        facts.add("trace.pageable_copy_share", 0.0, f"{where}: no copy from or to pageable memory")
        return
    facts.add(
        "trace.pageable_copy_bytes", float(pageable["bytes"].sum()), f"{where}: bytes of the pageable copies"
    )
    starts = pageable["ts"].to_numpy(dtype="float64")
    inside = np.clip(starts + pageable["dur_us"].to_numpy(dtype="float64"), begin, end) - np.clip(
        starts, begin, end
    )
    facts.add(
        "trace.pageable_copy_share",
        float(inside.sum() / span),
        f"{where}: time of the pageable copies within the span, over it",
    )
    facts.add(
        "trace.pageable_host_copy_share",
        float(len(pageable) / len(host)),
        f"{where}: pageable among host-device copies",
    )


def add_kernel_classes(
    facts: Facts, names: pd.Series, durations: np.ndarray, where: str, counts: np.ndarray | None = None
) -> None:
    """Kernel classes by name, top kernels by time. ``counts``: how many kernels each row stands for
    (a summary's row is every call of one name); one each where None."""
    classes = np.full(len(names), "other", dtype=object)
    for label, pattern in reversed(_CLASSES):  # the first pattern in the list wins: applied last
        classes[matches(names, pattern)] = label
    time = pd.Series(durations).groupby(classes).sum()
    total = float(time.sum())
    if total <= 0:
        return
    weights = np.ones(len(names)) if counts is None else counts
    if counts is None:  # single kernels in the order they ran: runs of fusable ones can be seen
        chained = in_runs(np.isin(classes, ("elementwise", "reduction")))
        facts.add(
            "trace.kernel_chain_share",
            float(durations[chained].sum() / total),
            f"{where}: kernel time in runs of {CHAIN} or more elementwise or reduction kernels in a row",
        )
    facts.add(
        "trace.elementwise_share",
        float(weights[classes == "elementwise"].sum() / weights.sum()),
        f"{where}: kernels named elementwise, vectorized, pointwise (count share)",
    )
    facts.add(
        "trace.communication_share",
        float(time.get("communication", 0.0) / total),
        f"{where}: kernel time in collectives (NCCL, RCCL)",
    )
    facts.add(
        "trace.matmul_share",
        float(time.reindex(["gemm", "attention", "convolution"]).fillna(0).sum() / total),
        f"{where}: kernel time in GEMM, attention and convolution kernels",
    )
    by_name = (
        pd.Series(durations)
        .groupby(names.reset_index(drop=True), observed=True)
        .sum()
        .sort_values(ascending=False)
    )
    facts.add(
        "trace.top_kernel.name", short_kernel_name(str(by_name.index[0])), f"{where}: kernel time by name"
    )
    facts.add("trace.top_kernel.share", float(by_name.iloc[0] / total), f"{where}: kernel time by name")


def short_kernel_name(name: str) -> str:
    """A kernel's name without its template arguments and parameter list, which run to pages."""
    head = re.sub(r"^void\s+", "", name)
    depth, out = 0, []
    for char in head:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    short = "".join(out).strip()
    return (short or name)[:80]
