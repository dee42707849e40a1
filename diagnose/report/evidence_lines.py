"""Report lines about the evidence itself: the recorder's sources, and the OOM verdicts."""

from __future__ import annotations

from diagnose.report.model import EvidenceRead, SourceState, Summary


def source_lines(sources: tuple[SourceState, ...]) -> list[str]:
    """One line per source a recording was given; the ones that failed say when and why."""
    lines = []
    for source in sources:
        line = f"{source.kind} {source.target}: {source.status}"
        if source.at:
            line += f" at {source.at}"
        if source.reason:
            line += f" ({source.reason})"
        lines.append(line)
    return lines


def dead_source_lines(evidence: EvidenceRead) -> list[str]:
    """The sources that never delivered or were lost: the evidence the recording does not hold."""
    return source_lines(evidence.dead_sources)


def oom_lines(summary: Summary) -> list[str]:
    """One line per class of OOM: how many, and the figures that decided the first one."""
    return [
        f"{oom.count} x {oom.kind}" + (f" ({oom.example})" if oom.example else "") for oom in summary.ooms
    ]
