"""A profiler trace's GPU timeline: when the GPU was busy, and why it idled when it did.

The GPU analysed is the one with the most kernel time. It is *busy* while a
kernel runs on it (the union of its kernels' intervals, as Holistic Trace
Analysis measures it: copy engines moving data do not compute), over the span
from its first kernel's start to its last kernel's end.

An idle stretch whose next kernel had already been issued (its launch call
returned before the stretch began) is not the host's doing: the GPU had work
and did not run it, waiting on something the kernels do not show (an event
from another stream or device, a copy, a collective's peers, another process).
That is Holistic Trace Analysis' test for "host wait" against "other", by the
launch each kernel's correlation id names; as there, a stretch of a few
microseconds between queued kernels is the GPU turning to the next one
("kernel wait"), not a wait on anything. Every other idle stretch is
split by what the host's threads were doing meanwhile, in this order: one of
them issuing work (in a launch call; in another runtime call; in a framework
operator that gives the GPU work, less the time that thread was blocked inside
it), one working on the CPU (in an operator that launches, copies and sets
nothing: CPU tensors, preprocessing), one blocked in a
synchronising call (a stream, event or device synchronise, a copy to or from
pageable memory, CUPTI's own sync records), or none in anything the trace
recorded (data loading, an untraced thread, sleep). Issuing comes first: while
one thread waits on the GPU, another may be what the GPU waits for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts import intervals
from diagnose.facts.intervals import Intervals

LAUNCH = re.compile(r"Launch", re.IGNORECASE)
_GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.IGNORECASE)
_ENQUEUE = re.compile(r"Launch|Memcpy|Memset", re.IGNORECASE)  # runtime calls that give the GPU work
# Calls that block the host until the GPU catches up: synchronise calls, and copies without "Async"
# (cudaMemcpy, cuMemcpyDtoH_v2, hipMemcpy): they return when the copy is done.
SYNC = re.compile(r"Synchronize|^(?:cuda|hip|cu)Memcpy(?!.*Async)", re.IGNORECASE)
_STEP_MARK = re.compile(r"^(?:ProfilerStep|model_run)#\d+$")

# Why the GPU idled, in the order an idle microsecond is given to them: its next kernel already issued
# (the host is not what it waits for), then what the host was doing: a thread issuing work (launching,
# in other runtime calls, in operators that give the GPU work), or working on the CPU, before a thread
# blocked, since while one thread waits on the GPU another may be what the GPU waits for.
IDLE_STATES = ("queued", "turnaround", "launch", "runtime", "operator", "cpu", "sync", "untraced")
# A queued kernel that starts within this of the previous one's end is the GPU turning from one kernel
# to the next (a microsecond or two, in a CUDA graph or a deep queue): the cost of many kernels, not a
# wait on anything.
TURNAROUND_US = 10.0


@dataclass(frozen=True)
class GpuTimeline:
    """The analysed GPU's kernels and, for each idle state but the last, the host's time in it or in
    an earlier one (so the first layer holding an idle instant names its state)."""

    gpu: float | None
    begin: float
    end: float
    activity: pd.DataFrame  # everything that ran on this GPU: kernels, copies, memsets
    kernels: pd.DataFrame
    busy: Intervals
    layers: tuple[Intervals, ...] = ()  # queued; +launch; ...; +sync, as IDLE_STATES (none without host)
    host: HostCalls | None = field(default=None, compare=False)
    issued: np.ndarray | None = field(default=None, compare=False)  # per kernel: its launch's return

    def kernel_steps(self) -> pd.Series:
        """Each kernel's step, by its launch's correlation id (missing where none says)."""
        host = self.host
        if host is None or "correlation" not in self.kernels:
            return pd.Series(np.nan, index=self.kernels.index)
        stepped = np.isfinite(host.step) & np.isfinite(host.correlation)
        step_of = pd.Series(host.step[stepped], index=host.correlation[stepped])
        return self.kernels["correlation"].map(step_of[~step_of.index.duplicated()])

    def step_starts(self) -> np.ndarray:
        """Where each step's first kernel ran, in step order."""
        steps = self.kernel_steps()
        known = steps.notna()
        if not known.any():
            return np.zeros(0)
        return self.kernels["ts"][known].groupby(steps[known]).min().sort_index().to_numpy(dtype="float64")

    def state_at(self, at: np.ndarray) -> np.ndarray:
        """Per instant: -1 while a kernel runs, else the index of its state in IDLE_STATES."""
        state = np.full(at.shape, len(IDLE_STATES) - 1)
        for index in reversed(range(len(self.layers))):
            state[intervals.inside(self.layers[index], at)] = index
        state[intervals.inside(self.busy, at)] = -1
        return state


def gpu_timeline(dump: Dump) -> GpuTimeline | None:
    """The GPU with the most kernel time, with the host's calls laid over its idle time."""
    activity = dump.traces.get("gpu_activity")
    if activity is None or not len(activity) or "kind" not in activity or "dur_us" not in activity:
        return None
    is_kernel = activity["kind"].to_numpy() == "kernel"
    if not is_kernel.any():
        return None
    gpu = _busiest_gpu(activity, is_kernel)
    on_gpu = np.ones(len(activity), dtype=bool) if gpu is None else activity["gpu"].to_numpy() == gpu
    kernels = activity[is_kernel & on_gpu]
    starts = kernels["ts"].to_numpy(dtype="float64")
    ends = starts + kernels["dur_us"].to_numpy(dtype="float64")
    host = _host_calls(dump)
    busy = intervals.union(starts, ends)
    begin, end = float(starts.min()), float(ends.max())
    layers: tuple[Intervals, ...] = ()
    issued = None
    if host is not None:
        blocked = host.sync_record | host.sync_call
        issued = host.issued_at(kernels)
        queued, turning = _queued_gaps(kernels, issued, busy, begin, end)
        turnaround = intervals.union_of(queued, turning)
        launch = intervals.union_of(turnaround, host.intervals(host.launch))
        runtime = intervals.union_of(launch, host.issuing(host.runtime & ~blocked, blocked))
        operator = intervals.union_of(runtime, host.issuing(host.operator & host.enqueues, blocked))
        cpu = intervals.union_of(operator, host.issuing(host.operator & ~host.enqueues, blocked))
        blocked_too = intervals.union_of(cpu, host.intervals(blocked))
        layers = (queued, turnaround, launch, runtime, operator, cpu, blocked_too)
    return GpuTimeline(gpu, begin, end, activity[on_gpu], kernels, busy, layers, host, issued)


def _queued_gaps(
    kernels: pd.DataFrame, issued: np.ndarray | None, busy: Intervals, begin: float, end: float
) -> tuple[Intervals, Intervals]:
    """The idle stretches whose next kernel's launch call had returned before the stretch began: the
    GPU had the work queued and did not start it; those of TURNAROUND_US or more (a wait), and the
    shorter ones (the GPU turning to its next kernel), apart. A kernel whose launch the trace does
    not name (no correlation id, or its call outside the trace) leaves its stretch to the host's
    states."""
    gaps = intervals.gaps(busy, begin, end)
    if not gaps[0].size or issued is None:
        return (np.zeros(0), np.zeros(0)), (np.zeros(0), np.zeros(0))
    starts = kernels["ts"].to_numpy(dtype="float64")
    order = np.argsort(starts, kind="stable")
    # The kernel that ends each stretch starts at its end; where several start together, the one
    # issued first counts.
    at, first = np.unique(starts[order], return_index=True)
    issued_first = np.minimum.reduceat(np.nan_to_num(issued[order], nan=np.inf), first)
    index = np.clip(np.searchsorted(at, gaps[1]), 0, at.size - 1)
    queued = (at[index] == gaps[1]) & (issued_first[index] <= gaps[0])
    short = gaps[1] - gaps[0] < TURNAROUND_US
    waited, turned = queued & ~short, queued & short
    return (gaps[0][waited], gaps[1][waited]), (gaps[0][turned], gaps[1][turned])


def _host_calls(dump: Dump) -> HostCalls | None:
    calls = dump.traces.get("host_calls")
    if calls is None or not len(calls) or not {"kind", "name", "dur_us"} <= set(calls.columns):
        return None
    return HostCalls(calls, dump.traces.get("gpu_activity"))


class HostCalls:
    """The host calls as arrays, with the masks the timeline and every trace fact use: computed once."""

    def __init__(self, calls: pd.DataFrame, activity: pd.DataFrame | None) -> None:
        self.ts = calls["ts"].to_numpy(dtype="float64")
        self.dur = calls["dur_us"].to_numpy(dtype="float64")
        kind = calls["kind"].to_numpy()
        self.runtime = kind == "runtime"
        self.operator = kind == "operator"
        self.sync_record = kind == "sync"
        self.annotation = kind == "annotation"
        self.launch = self.runtime & matches(calls["name"], LAUNCH)
        self.graph_launch = self.launch & matches(calls["name"], _GRAPH_LAUNCH)
        self.step_mark = self.annotation & matches(calls["name"], _STEP_MARK)
        nan = np.full(len(calls), np.nan)
        self.correlation = calls["correlation"].to_numpy(dtype="float64") if "correlation" in calls else nan
        self.step = calls["step"].to_numpy(dtype="float64") if "step" in calls else nan
        self.thread = calls["thread"].to_numpy() if "thread" in calls else np.zeros(len(calls))
        # A copy to or from pageable memory returns when it is done, "Async" or not: it blocks.
        blocking_copy = self.runtime & np.isin(self.correlation, _pageable_correlations(activity))
        self.sync_call = self.runtime & (matches(calls["name"], SYNC) | blocking_copy)
        self.enqueues = self._enqueues(self.runtime & matches(calls["name"], _ENQUEUE))

    def _enqueues(self, calls: np.ndarray) -> np.ndarray:
        """Which operators give the GPU work: a call that launches, copies or sets memory runs on their
        thread within them (an operator on CPU tensors, preprocessing say, gives it none)."""
        found = np.zeros(self.ts.size, dtype=bool)
        for thread in pd.unique(self.thread[self.operator]):
            mine = self.thread == thread
            starts = np.sort(self.ts[calls & mine])
            ops = np.flatnonzero(self.operator & mine)
            inside = np.searchsorted(starts, self.ts[ops] + self.dur[ops], side="right")
            found[ops] = inside > np.searchsorted(starts, self.ts[ops], side="left")
        return found

    def intervals(self, mask: np.ndarray) -> Intervals:
        return intervals.union(self.ts[mask], self.ts[mask] + self.dur[mask])

    def issued_at(self, kernels: pd.DataFrame) -> np.ndarray | None:
        """When each kernel's launch call returned (NaN where the trace names no launch for it), by
        the correlation id the launch and the kernel share: the last call with that id to start
        before the kernel did (ids can repeat: traces merged from several processes, a wrapped
        counter)."""
        calls = self.runtime & np.isfinite(self.correlation)
        if "correlation" not in kernels or not calls.any():
            return None
        launches = pd.DataFrame(
            {
                "ts": self.ts[calls],
                "returned": self.ts[calls] + self.dur[calls],
                "id": self.correlation[calls],
            }
        ).sort_values("ts", kind="stable")
        wanted = pd.DataFrame(
            {
                "ts": kernels["ts"].to_numpy(dtype="float64"),
                "id": kernels["correlation"].to_numpy(dtype="float64"),
                "row": np.arange(len(kernels)),
            }
        )
        known = wanted[np.isfinite(wanted["id"])].sort_values("ts", kind="stable")
        matched = pd.merge_asof(known, launches, on="ts", by="id", direction="backward")
        issued = np.full(len(kernels), np.nan)
        issued[matched["row"].to_numpy()] = matched["returned"].to_numpy(dtype="float64")
        return issued

    def issuing(self, mask: np.ndarray, blocked: np.ndarray) -> Intervals:
        """The time of ``mask``'s calls less, thread by thread, the time that thread was blocked in
        them (an operator around a synchronising call is waiting, not issuing work)."""
        parts = [
            intervals.difference(self.intervals(mask & mine), self.intervals(blocked & mine))
            for thread in pd.unique(self.thread[mask])
            if (mine := self.thread == thread).any()
        ]
        if not parts:
            return np.zeros(0), np.zeros(0)
        return intervals.union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _pageable_correlations(activity: pd.DataFrame | None) -> np.ndarray:
    if activity is None or not {"kind", "pinned", "correlation"} <= set(activity.columns):
        return np.zeros(0)
    pageable = (activity["pinned"] == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712 - nullable
    copies = activity[(activity["kind"].to_numpy() == "memcpy") & pageable]
    return copies["correlation"].dropna().to_numpy(dtype="float64")


def matches(column: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Which rows' text matches, decided once per distinct name: a trace repeats a few hundred names
    millions of times."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        hits = np.array([bool(pattern.search(str(name))) for name in column.cat.categories] + [False])
        return hits[column.cat.codes.to_numpy()]  # a missing name's code, -1, takes the last: False
    return column.astype("string").str.contains(pattern, na=False).to_numpy(dtype=bool)


def _busiest_gpu(activity: pd.DataFrame, is_kernel: np.ndarray) -> float | None:
    if "gpu" not in activity or activity["gpu"].isna().all():
        return None
    kernels = activity[is_kernel]
    busiest = kernels.groupby("gpu")["dur_us"].sum().idxmax()
    return float(busiest) if isinstance(busiest, int | float) else None
