"""The Markdown report: what an engineer pastes into an incident review."""

from __future__ import annotations

import re

from diagnose.dump.timestamps import iso
from diagnose.report.evidence_lines import (
    LESS_LIKELY,
    consequence_line,
    consequences_of,
    explains_line,
    first_less_likely,
    gain_line,
    no_latency_line,
    oom_lines,
    source_lines,
    trace_lines,
)
from diagnose.report.model import EvidenceRead, Hypothesis, Line, Report, Summary
from diagnose.report.spikes_section import (
    ALIGNMENT_HEADER,
    EPISODE_HEADER,
    SIGNAL_HEADER,
    alignment_rows,
    episode_rows,
    legend,
    processes_left_out,
    spike_rows,
)
from diagnose.report.stages_section import UNACCOUNTED, stage_rows
from diagnose.units import counted, human_ms, human_rate


def render_markdown(report: Report, pictures: list[tuple[str, str, str]] | None = None) -> str:
    """``pictures``: (title, path relative to the report, alt text), shown after the summary."""
    out: list[str] = [f"# diagnose report: `{report.dump}`", ""]
    window = report.window
    if iso(window.start):
        out += [f"Window: {iso(window.start)} to {iso(window.end)}", ""]
    out += _summary(report.summary, report.evidence)
    trace = trace_lines(report)
    out += (
        [
            f"**Profiler trace:** {trace[0].removeprefix('profiler trace: ')}",
            *[f"- {t.strip()}" for t in trace[1:]],
            "",
        ]
        if trace
        else []
    )
    if pictures:
        out += ["## Pictures", ""]
        for title, path, alt in pictures:
            out += [f"**{title}**", "", f"![{alt}]({path})", ""]
    hypotheses = report.hypotheses
    below = first_less_likely(hypotheses)
    out += ["## Hypotheses", ""]
    if not hypotheses:
        out += ["No rule found evidence of a known root cause.", ""]
    elif below == 0:
        out += ["No likely root cause: no finding scored 0.5 or more.", ""]
    for rank, h in enumerate(hypotheses, start=1):
        if rank - 1 == below:
            out += ["## Less likely", "", f"Scored {LESS_LIKELY}.", ""]
        out += render_hypothesis(rank, h, consequences_of(h, hypotheses))
    out += _spikes(report)
    out += render_not_found(report)
    out += _evidence_section(report.evidence)
    return "\n".join(out).rstrip() + "\n"


def render_hypothesis(rank: int, h: Hypothesis, explains: list[Hypothesis] | None = None) -> list[str]:
    """One hypothesis as Markdown lines: evidence, verification, remedy, pitfalls; ``explains``: the
    findings that are its consequences."""
    out = [
        f"### {rank}. {h.title}",
        "",
        f"`{h.id}` · score **{h.score:.2f}** ({h.confidence}) · rule: `{h.rule_shown_as}`",
        "",
        *([f"*{consequence_line(h)}*", ""] if h.is_consequence else []),
        *([explained, ""] if (explained := explains_line(explains or [])) else []),
        "**Evidence**",
        "",
        *[f"- **Settles it:** {_evidence(e)}" for e in h.evidence if e.decisive],
        *[f"- {_evidence(e)}" for e in h.evidence if not e.decisive],
        *[f"- *Against:* {_evidence(e)}" for e in h.contrary],
        "",
    ]
    if (gain := gain_line(h)) is not None:
        out += [f"**Expected gain if the cause is removed:** {gain}", ""]
    if h.not_checked:
        settled = any(e.decisive for e in h.evidence)
        lead = "Would confirm it, not in the dump" if settled else "Not checked for lack of"
        out += [f"{lead}: {', '.join(h.not_checked)}", ""]
    if h.not_seen:
        out += ["Would raise it, looked for and not seen:", "", *[f"- {_cell(s)}" for s in h.not_seen], ""]
    out += ["**Verify**", "", *[f"{i}. {s}" for i, s in enumerate(h.verify, 1)], ""]
    out += ["**Remedy**", "", *[f"{i}. {s}" for i, s in enumerate(h.remedy, 1)], ""]
    out += ["**Pitfalls**", "", *[f"- {s}" for s in h.pitfalls], ""]
    return out


def render_sources(evidence: EvidenceRead) -> list[str]:
    """The recorder's sources; the ones that delivered nothing are what this dump lacks."""
    lines = source_lines(evidence.sources)
    if not lines:
        return []
    return ["Sources the recorder was given:", "", *[f"- {line}" for line in lines], ""]


def render_not_found(report: Report) -> list[str]:
    """The rules that did not fire: ruled out (failing values) or not checked (missing evidence)."""
    out: list[str] = []
    if report.ruled_out:
        out += ["## Ruled out", "", "| rule | why |", "|---|---|"]
        out += [f"| `{r.id}` | {_cell(r.reason)} |" for r in report.ruled_out]
        out.append("")
    if report.not_run:
        out += ["## Not checked (missing evidence)", "", "| rule | missing |", "|---|---|"]
        out += [f"| `{r.id}` | {_cell('; '.join(r.missing))} |" for r in report.not_run]
        out.append("")
    return out


def _spikes(report: Report) -> list[str]:
    rows, left_out = spike_rows(report), processes_left_out(report)
    if not rows and not left_out:
        return []
    out = ["## Spikes and change points", "", *([*_table(SIGNAL_HEADER, rows), ""] if rows else [])]
    reference, episodes = episode_rows(report)
    if episodes:
        out += [
            f"Episodes of `{reference}` (first {len(episodes)}):",
            "",
            *_table(EPISODE_HEADER, episodes),
            "",
        ]
    alignments = alignment_rows(report)
    if alignments:
        out += [f"What moves with `{reference}`:", "", *_table(ALIGNMENT_HEADER, alignments), ""]
    if left_out:
        out += [
            f"{counted(left_out, 'other process signal')} left out: no finding or alignment names them.",
            "",
        ]
    said = legend(report)
    return out + [f"*{said[0].upper()}{said[1:]}.*", ""]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _summary(summary: Summary, evidence: EvidenceRead) -> list[str]:
    latency = summary.latency_ms
    ooms = [f"- {line}" for line in oom_lines(summary)]
    ooms = ["Out-of-memory errors:", "", *ooms, ""] if ooms else []
    if not latency:
        return [no_latency_line(evidence), "", *ooms]
    out = [
        "## Summary",
        "",
        "| requests | throughput | P50 | P95 | P99 | P99.9 | mean |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {summary.requests:,} | {_rps(summary.throughput_rps)} | "
        + " | ".join(human_ms(latency.get(k)) for k in ("p50", "p95", "p99", "p999", "mean"))
        + " |",
        "",
    ]
    llm = summary.llm
    if llm:
        out += ["| | P50 | P95 | P99 | from |", "|---|---:|---:|---:|---|"]
        names = {"ttft": "time to first token", "tpot": "time per output token"}
        out += [
            f"| {names[name]} | "
            + " | ".join(human_ms(getattr(row, p)) for p in ("p50", "p95", "p99"))
            + f" | {_cell(row.source)} |"
            for name, row in llm.items()
        ]
        out.append("")
    target, p99 = summary.slo_p99_ms, latency.get("p99")
    if target and p99 is not None:
        verdict = "met" if p99 <= target else f"**missed**: P99 is {p99 / target:.1f}x the target"
        out += [f"Target: P99 ≤ {human_ms(target)} ({summary.slo_source}): {verdict}.", ""]
    out += ooms
    stages = stage_rows(summary)
    if stages:
        out += [
            "| stage | kind | share of mean | share of P99 requests | share of tail excess | P50 | P99 |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for name, kind, *cells in stages:
            shown = f"*{name}*" if name == UNACCOUNTED else name
            out.append(f"| {shown} | {kind} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _evidence_section(evidence: EvidenceRead) -> list[str]:
    out = ["## Evidence used", "", "| table | rows | files |", "|---|---:|---|"]
    out += [f"| {n} | {t.rows:,} | {', '.join(t.files)} |" for n, t in evidence.tables.items()]
    out.append("")
    if evidence.missing:
        out += [f"Missing tables: {', '.join(evidence.missing)}", ""]
    if evidence.not_used:
        out += [f"Files not used: {', '.join(evidence.not_used)}", ""]
    out += render_sources(evidence)
    if evidence.warnings:
        out += ["Warnings:", "", *[f"- {w}" for w in evidence.warnings], ""]
    return out


def _evidence(line: Line) -> str:
    sources = "; ".join(line.sources)
    return f"{line.text} *(from {sources})*" if sources else line.text


_TAG_LIKE = re.compile(r"<(?=[A-Za-z/!?])")


def _cell(text: str) -> str:
    """A table cell's text: its bars and line breaks escaped, and a ``<`` that would open an HTML tag
    (``stage_<name>_ms`` is no tag, but a Markdown viewer drops it as one)."""
    return _TAG_LIKE.sub(r"\\<", text.replace("|", "\\|").replace("\n", " "))


def _rps(value: float | None) -> str:
    return "-" if value is None else human_rate(value)
