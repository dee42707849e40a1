"""The terminal report: the same content as the Markdown, laid out for reading in a shell."""

from __future__ import annotations

import textwrap

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
from diagnose.report.model import EvidenceRead, Report, Summary
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
from diagnose.report.stages_section import stage_rows
from diagnose.units import counted, human_ms

DEFAULT_WIDTH = 100  # a report rendered for no output in particular
_UNWRAPPED = 1_000_000  # "no width": a file or a pipe, where each line is as long as its content


def render_text(report: Report, width: int | None = DEFAULT_WIDTH) -> str:
    """The report for ``width`` columns: prose wraps to it (never where None); table rows stay whole."""
    width = max(60, width) if width is not None else _UNWRAPPED
    out: list[str] = [f"diagnose: {report.dump}"]
    window = report.window
    if iso(window.start):
        out.append(f"window:   {iso(window.start)} to {iso(window.end)}")
    out.append("")
    out += _summary(report.summary, report.evidence, width)
    trace = trace_lines(report)
    out += [*trace, ""] if trace else []
    hypotheses = report.hypotheses
    below = first_less_likely(hypotheses)
    if not hypotheses:
        out.append("No rule found evidence of a known root cause.")
    elif below == 0:
        out.append("No likely root cause: no finding scored 0.5 or more.")
    else:
        out.append("HYPOTHESES (most likely first)")
    for rank, h in enumerate(hypotheses, start=1):
        if rank - 1 == below:
            out += ["", f"LESS LIKELY ({LESS_LIKELY})"]
        out.append("")
        out += textwrap.wrap(
            f"{rank}. [{h.score:.2f} {h.confidence}] {h.title}", width, subsequent_indent="   "
        )
        out.append(f"   id {h.id}; rule: {h.rule_shown_as}")
        out += _wrap([consequence_line(h)] if h.is_consequence else [], "   ", width)
        explained = explains_line(consequences_of(h, hypotheses))
        out += _wrap([explained] if explained else [], "   ", width)
        settled = [e.text for e in h.evidence if e.decisive]
        out += _block("Settled by (decisive on its own)", settled, width, bullet="*")
        out += _block("Evidence", [e.text for e in h.evidence if not e.decisive], width, bullet="+")
        out += _block("Against", [e.text for e in h.contrary], width, bullet="-")
        gain = gain_line(h)
        out += _block("Expected gain if the cause is removed", [gain] if gain else [], width, bullet="=")
        missing = "Would confirm it, not in the dump" if settled else "Not checked, missing"
        out += _block(missing, h.not_checked, width, bullet="?")
        out += _block("Would raise it, looked for and not seen", h.not_seen or (), width, bullet="?")
        out += _block("Verify", h.verify, width, numbered=True)
        out += _block("Remedy", h.remedy, width, numbered=True)
        out += _block("Pitfalls", h.pitfalls, width, bullet="!")
    out += _spikes(report, width)
    if report.ruled_out:
        out += ["", "RULED OUT"]
        out += _wrap([f"{r.id}: {r.reason}" for r in report.ruled_out], "  - ", width)
    if report.not_run:
        out += ["", "NOT CHECKED (missing evidence)"]
        out += _wrap([f"{r.id}: needs {'; '.join(r.missing)}" for r in report.not_run], "  - ", width)
    out += ["", *_evidence(report.evidence, width)]
    return "\n".join(out).rstrip() + "\n"


def _spikes(report: Report, width: int) -> list[str]:
    rows, left_out = spike_rows(report), processes_left_out(report)
    if not rows and not left_out:
        return []
    out = ["", "SPIKES AND CHANGE POINTS", *(_columns(SIGNAL_HEADER, rows) if rows else [])]
    reference, episodes = episode_rows(report)
    if episodes:
        out += ["", f"episodes of {reference} (first {len(episodes)}):", *_columns(EPISODE_HEADER, episodes)]
    alignments = alignment_rows(report)
    if alignments:
        out += ["", f"what moves with {reference}:", *_columns(ALIGNMENT_HEADER, alignments)]
    notes = [f"{counted(left_out, 'other process signal')} left out: no finding or alignment names them"]
    return out + [""] + _wrap([*notes[: bool(left_out)], legend(report)], "  ", width)


def _columns(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _summary(summary: Summary, evidence: EvidenceRead, width: int) -> list[str]:
    latency = summary.latency_ms
    if not latency:
        return [no_latency_line(evidence), *_ooms(summary), ""]
    rps = summary.throughput_rps
    out = [
        f"requests {summary.requests:,}" + (f" at {rps:,.1f}/s" if rps else ""),
        "latency  "
        + "  ".join(
            f"{label} {human_ms(latency.get(k))}"
            for k, label in (
                ("p50", "P50"),
                ("p95", "P95"),
                ("p99", "P99"),
                ("p999", "P99.9"),
                ("mean", "mean"),
            )
        ),
        *_llm(summary),
        *_target(summary),
        *_ooms(summary),
    ]
    stages = stage_rows(summary)
    if stages:
        out += ["", f"{'stage':<16}{'kind':<9}{'mean':>7}{'P99 req':>9}{'tail':>7}{'P50':>11}{'P99':>11}"]
        for name, kind, share, tail, excess, p50, p99 in stages:
            out.append(f"{name:<16}{kind:<9}{share:>7}{tail:>9}{excess:>7}{p50:>11}{p99:>11}".rstrip())
        legend = (
            "(mean: share of mean latency; P99 req: share within P99 requests; tail: share of their excess)"
        )
        out += textwrap.wrap(legend, width, subsequent_indent=" ")
    return [*out, ""]


def _llm(summary: Summary) -> list[str]:
    labels = {"ttft": "TTFT", "tpot": "TPOT"}
    return [
        f"{labels[name]:<9}"
        + "  ".join(f"{p.upper()} {human_ms(getattr(row, p))}" for p in ("p50", "p95", "p99"))
        + f"  (from {row.source})"
        for name, row in summary.llm.items()
    ]


def _ooms(summary: Summary) -> list[str]:
    return [f"OOM      {line}" for line in oom_lines(summary)]


def _target(summary: Summary) -> list[str]:
    target, p99 = summary.slo_p99_ms, summary.latency_ms.get("p99")
    if not target or p99 is None:
        return []
    verdict = "met" if p99 <= target else f"missed: P99 is {p99 / target:.1f}x the target"
    return [f"target   P99 <= {human_ms(target)} ({summary.slo_source}): {verdict}"]


def _block(
    title: str, items: list[str] | tuple[str, ...], width: int, bullet: str = "-", numbered: bool = False
) -> list[str]:
    if not items:
        return []
    lines = [f"   {title}:"]
    for i, item in enumerate(items, start=1):
        marker = f"{i}." if numbered else bullet
        lines += textwrap.wrap(
            " ".join(item.split()),
            width,
            initial_indent=f"     {marker} ",
            subsequent_indent=" " * (6 + len(marker)),
        )
    return lines


def _wrap(items: list[str], indent: str, width: int) -> list[str]:
    lines: list[str] = []
    for item in items:
        lines += textwrap.wrap(item, width, initial_indent=indent, subsequent_indent=" " * len(indent))
    return lines


def _evidence(evidence: EvidenceRead, width: int) -> list[str]:
    tables = ", ".join(
        f"{n} ({counted(t.rows, 'row')}, {', '.join(t.files)})" for n, t in evidence.tables.items()
    )
    out = _wrap([f"evidence: {tables}"], "", width)
    if evidence.missing:
        out += _wrap([f"missing:  {', '.join(evidence.missing)}"], "", width)
    if evidence.not_used:
        out += _wrap([f"not used: {', '.join(evidence.not_used)}"], "", width)
    out += _wrap([f"source:   {line}" for line in source_lines(evidence.sources)], "", width)
    for warning in evidence.warnings:
        out += _wrap([f"warning:  {warning}"], "", width)
    return out
