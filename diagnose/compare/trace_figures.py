"""The figures of a profiler trace, for comparing two traces (a before/after pair of one model's steps).

A trace has no requests to resample: each figure is the trace's own fact
(diagnose/facts/gpu_trace.py), judged by its size alone, as a memory peak is
(diagnose/compare/figures.py). What a trace can say of an optimisation: the
step's time, where the GPU's time went (busy; idle waiting on the host's
launches, on its CPU work, or with it blocked; idle with its next kernel
already queued), the kernels launched per step and the median kernel's
length. The step's time is the GPU's, from one step's first kernel to the
next's: the host's annotation ends when it has issued the step, which may be
well before the GPU has run it.
"""

from __future__ import annotations

from diagnose.compare.measure import Measure
from diagnose.report.model import Report

_METHOD = "a trace's figure has no requests to resample"
# name, fact, label, unit, better, scale
_FIGURES = (
    ("step_time", "trace.gpu_step_ms", "step time on the GPU (median)", "ms", "lower", "relative"),
    ("host_step_time", "trace.step_median_ms", "step time on the host (median)", "ms", None, "relative"),
    ("kernels_per_step", "trace.kernels_per_step", "kernels launched per step", "count", None, "relative"),
    ("kernel_median", "trace.kernel_median_us", "median kernel", "us", None, "relative"),
    ("gpu_busy", "trace.gpu_busy_share", "GPU busy (a kernel running)", "share", None, "difference"),
    (
        "launch_bound_idle",
        "trace.launch_bound_idle_share",
        "GPU idle waiting on the host issuing work",
        "share",
        "lower",
        "difference",
    ),
    (
        "queued_idle",
        "trace.queued_idle_share",
        "GPU idle with its next kernel already queued",
        "share",
        "lower",
        "difference",
    ),
    (
        "cpu_work_idle",
        "trace.cpu_work_idle_share",
        "GPU idle with the host working on the CPU",
        "share",
        "lower",
        "difference",
    ),
    (
        "blocked_idle",
        "trace.blocked_idle_share",
        "GPU idle with the host blocked",
        "share",
        "lower",
        "difference",
    ),
    (
        "host_chain_time",
        "trace.host_chain_share",
        "operator time in unfused chains",
        "share",
        "lower",
        "difference",
    ),
)


def measure_trace(report: Report) -> list[Measure]:
    found = []
    for name, fact, label, unit, better, scale in _FIGURES:
        value = report.number(fact)
        cited = report.facts.get(fact)
        if value is None or cited is None:
            continue
        found.append(Measure(name, label, unit, better, scale, value, None, _METHOD, cited.source))
    return found
