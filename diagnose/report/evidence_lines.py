"""Report lines about the evidence itself: the recorder's sources, and the OOM verdicts."""

from __future__ import annotations


def source_lines(evidence: dict) -> list[str]:
    """One line per source a recording was given; the ones that failed say when and why."""
    lines = []
    for source in evidence.get("sources", []):
        line = f"{source['kind']} {source['target']}: {source['status']}"
        if source.get("at"):
            line += f" at {source['at']}"
        if source.get("reason"):
            line += f" ({source['reason']})"
        lines.append(line)
    return lines


def dead_source_lines(evidence: dict) -> list[str]:
    """The sources that never delivered or were lost: the evidence the recording does not hold."""
    return [
        line
        for line, source in zip(source_lines(evidence), evidence.get("sources", []), strict=True)
        if source["status"] != "ok"
    ]


def oom_lines(summary: dict) -> list[str]:
    """One line per class of OOM: how many, and the figures that decided the first one."""
    return [
        f"{entry['count']} x {entry['class']}" + (f" ({entry['example']})" if entry.get("example") else "")
        for entry in summary.get("ooms", [])
    ]
