"""Report lines about the evidence itself: the recorder's sources, and the OOM verdicts."""

from __future__ import annotations

from diagnose.dump.model import SourceStatus
from diagnose.judge.engine import LIKELY
from diagnose.report.model import EvidenceRead, Hypothesis, Report, SourceState, Summary
from diagnose.units import counted, human_ms, human_us, percent


def source_lines(sources: tuple[SourceState, ...]) -> list[str]:
    """One line per source a recording was given; the ones that failed say when and why."""
    lines = []
    for source in sources:
        line = f"{source.kind} {source.target}: {source.status or 'status not known'}"
        if source.at:
            line += f" at {source.at}"
        if source.reason:
            line += f" ({source.reason})"
        lines.append(line)
    return lines


LESS_LIKELY = "below 0.5: too weak to act on alone; worth a look once the likely causes are ruled out"


def first_less_likely(hypotheses: tuple[Hypothesis, ...]) -> int | None:
    """Where the findings below the "likely" line start (they are ranked, strongest first), or None."""
    return next((i for i, h in enumerate(hypotheses) if h.score < LIKELY), None)


def no_latency_line(evidence: EvidenceRead) -> str:
    """The statement that the dump has no request latencies, with why where the recording says: the
    request log it was given and never read, or lost."""
    log = next(
        (s for s in evidence.sources if s.source == "requests_log" and s.status is not SourceStatus.OK), None
    )
    if log is None:
        trace = [name for name in ("gpu_activity", "host_calls", "op_summary") if name in evidence.tables]
        if trace:
            files = ", ".join(dict.fromkeys(f for name in trace for f in evidence.tables[name].files))
            return f"No request latencies in the dump: the profiler trace ({files}) is judged on its own."
        return "No request latencies in the dump."
    what = f"the {log.kind or 'request log'} {log.target or ''}".rstrip()
    why = f" ({log.reason})" if log.reason else ""
    return f"No request latencies in the dump: {what} was {log.status or 'not read'}{why}."


def dead_source_lines(evidence: EvidenceRead) -> list[str]:
    """The sources that never delivered or were lost: the evidence the recording does not hold."""
    return source_lines(evidence.dead_sources)


def oom_lines(summary: Summary) -> list[str]:
    """One line per class of OOM: how many, and the figures that decided the first one."""
    return [
        f"{oom.count} x {oom.kind}" + (f" ({oom.example})" if oom.example else "") for oom in summary.ooms
    ]


def consequence_line(hypothesis: Hypothesis) -> str:
    """What a consequence's entry says: which likely cause explains its evidence, and how."""
    own = f"{hypothesis.own_score:.2f}" if hypothesis.own_score is not None else "?"
    how = f": {hypothesis.explanation}" if hypothesis.explanation else ""
    return (
        f"A consequence of {hypothesis.explained_by}, not a second cause{how}. On its own evidence it "
        f"scores {own}; its score here is what is left for it as a cause of its own."
    )


def consequences_of(cause: Hypothesis, hypotheses: tuple[Hypothesis, ...]) -> list[Hypothesis]:
    """The hypotheses whose evidence ``cause`` explains."""
    return [h for h in hypotheses if h.explained_by == cause.id]


def explains_line(consequences: list[Hypothesis]) -> str | None:
    """What a cause's entry says of the findings it explains, or None where it explains none."""
    if not consequences:
        return None
    named = ", ".join(f"{c.id} ({c.own_score or 0:.2f} on its own evidence)" for c in consequences)
    return f"Explains, as its consequences: {named}"


def trace_lines(report: Report) -> list[str]:
    """What a profiler trace says at a glance, whatever the rules made of it: the kernels, how busy the
    GPU was and where its idle time went (or, for a run on the host, its operators)."""
    number, facts = report.number, report.facts
    kernels = number("trace.kernels")
    lines = []
    if kernels:
        gpu = facts["trace.kernels"].source.rsplit(", ", 1)[-1].split(":")[0]
        line = counted(kernels, "kernel")
        if gpu.startswith("GPU"):
            line += f" on {gpu}"
        span, median, short = (
            number("trace.span_ms"),
            number("trace.kernel_median_us"),
            number("trace.short_kernel_share"),
        )
        if span is not None:
            line += f" over {human_ms(span)}"
        if median is not None and short is not None:
            line += f" (median {human_us(median)}, {percent(short)} under 10 µs)"
        busy = number("trace.gpu_busy_share")
        if busy is not None:
            line += f"; GPU busy {percent(busy)}"
        lines.append(line)
        idle = [
            (label, number(f"trace.idle_{name}_share"))
            for name, label in (
                ("launch", "launching"),
                ("runtime", "other runtime calls"),
                ("operator", "operators"),
                ("cpu", "CPU work"),
                ("sync", "blocked"),
                ("untraced", "nothing traced"),
            )
        ]
        if all(share is not None for _, share in idle):
            host = ", ".join(f"{label} {percent(s)}" for label, s in idle)
            wait = number("trace.queue_wait_median_us")
            gpu_side = [  # where the GPU had its next kernel already: the host's states are the rest
                f"{label} {percent(share)}"
                for label, share in (
                    ("its next kernel already queued", number("trace.idle_queued_share")),
                    ("turning between queued kernels", number("trace.idle_turnaround_share")),
                )
                if share is not None and share >= 0.005
            ]
            if gpu_side and wait is not None:
                lines.append(
                    f"while it idled: {', '.join(gpu_side)} (kernels started a median {human_us(wait)} after "
                    f"their launch); the host {host}"
                )
            else:
                lines.append(f"while it idled, the host was: {host}")
    elif kernels == 0 and number("trace.ops_per_step") is not None:
        chain = number("trace.host_chain_share")
        line = f"a run on the host: {number('trace.ops_per_step'):,.0f} operators a step"
        median = number("trace.op_median_us")
        if median is not None:
            line += f" (median {human_us(median)})"
        if chain is not None:
            line += f"; {percent(chain)} of their time in chains of elementwise operators"
        lines.append(line)
    return [f"profiler trace: {lines[0]}", *(f"  {line}" for line in lines[1:])] if lines else []


def gain_line(h: Hypothesis) -> str | None:
    """``P50 88.9 ms -> 84.3 ms [80.9 ms, 90.6 ms], P99 555 ms -> 218 ms [198 ms, 257 ms], with ...``."""
    gain = h.expected_gain
    if gain is None:
        return h.gain_note
    parts = []
    for figure in gain.figures:
        bounds = (
            f" [{human_ms(figure.low_ms)}, {human_ms(figure.high_ms)}]"
            if figure.low_ms is not None and figure.high_ms is not None
            else ""
        )
        parts.append(
            f"{figure.name.upper()} {human_ms(figure.now_ms)} -> {human_ms(figure.expected_ms)}{bounds}"
        )
    return (
        f"{', '.join(parts)}, with {gain.how} ({gain.source}; 95 % intervals by a block bootstrap over time)"
    )
