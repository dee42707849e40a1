"""A comparison as terminal text, Markdown or JSON; all three read the same :class:`Comparison`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from diagnose.compare.delivery import relative_text
from diagnose.compare.model import Comparison, Delivery, FigureChange, GateTrip
from diagnose.compare.verdict import change_text
from diagnose.units import counted, human_measure


def render(
    comparison: Comparison,
    form: str,
    trips: list[GateTrip] | None = None,
    pictures: list[tuple[str, str, str]] | None = None,
) -> str:
    """``pictures``: (title, link, alt) for Markdown (a relative path) and HTML (a data URI)."""
    if form == "json":
        data = comparison.to_dict()
        if trips is not None:
            data["gate"] = {"tripped": [trip.__dict__ for trip in trips]}
        return json.dumps(data, indent=2) + "\n"
    if form == "html":
        from diagnose.report.html import page

        return page(f"diagnose comparison: {comparison.headline}", _markdown(comparison, pictures))
    return _markdown(comparison, pictures) if form == "markdown" else _text(comparison)


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if (measured := human_measure(value, unit)) is not None:
        return measured
    if unit == "share":
        return f"{value:.2%}"
    if unit == "pct":
        return f"{value:.1f} %"
    return f"{value:,.4g}"


def _rows(figures: list[FigureChange]) -> list[tuple[str, str, str, str, str]]:
    return [
        (f.label, value_text(f.before, f.unit), value_text(f.after, f.unit), _change(f), f.verdict)
        for f in figures
    ]


def _change(figure: FigureChange) -> str:
    if (
        figure.scale == "difference"
        and figure.unit in ("bytes", "ms", "pct", "rps")
        and figure.change is not None
    ):
        text = value_text(figure.change, figure.unit)
        return text if text.startswith("-") else f"+{text}"
    return change_text(figure)


def _sides(comparison: Comparison) -> list[str]:
    lines = []
    for name, side in (("before", comparison.before), ("after", comparison.after)):
        if side.window[0] is None and not side.requests:  # a profiler trace: its own clock, no requests
            lines.append(f"{name}: {side.dump}  (a profiler trace)")
            continue
        cold = f", {side.cold_excluded:,} cold requests left out" if side.cold_excluded else ""
        lines.append(
            f"{name}: {side.dump}  {side.window[0]} .. {side.window[1]}, "
            f"{counted(side.requests, 'request')}{cold}"
        )
    return lines


def _methods(comparison: Comparison) -> list[str]:
    """How the intervals were made, then how figures without one (peaks) were judged."""
    with_interval = {f.method for f in comparison.figures if f.low is not None}
    without = {f.method for f in comparison.figures if f.low is None and f.better is not None}
    return sorted(with_interval) + sorted(without)


def _text(c: Comparison) -> str:
    out = [f"verdict: {c.verdict.upper()}", f"  {c.headline}", "", *_sides(c), ""]
    out += _table(_rows(c.figures))
    out += ["", "intervals: " + "; ".join(_methods(c))]
    if c.delivery is not None:
        out += ["", f"expected against delivered: the fix for {c.delivery.cause}: {c.delivery.verdict}"]
        out += [f"  expected: {c.delivery.how}"]
        out += _table(_delivery_rows(c.delivery), _DELIVERY_HEADER)
    out += ["", "traffic: " + ("the same" if c.traffic.same else "differs")]
    out += [f"  {line}" for line in _traffic_lines(c, "->", "{}")]
    if c.traffic.reweighted:
        out += ["", f"re-weighted: {c.traffic.reweighting}"]
        out += _table(_rows(c.traffic.reweighted))
    out += [
        "",
        "environment: " + ("the same, as far as the dumps say" if not c.differences else "differences"),
    ]
    for d in c.differences:
        mark = "  (not comparable)" if d.blocks else ""
        out.append(f"  [{d.kind}] {d.what}: {d.before} -> {d.after}{mark}")
    out += ["", "diagnosis: " + ("the same hypotheses" if not c.diagnosis else "what changed")]
    for move in c.diagnosis:
        out.append(f"  {move.id}: {move.change} ({_score(move.before)} -> {_score(move.after)})")
    if c.warnings:
        out += ["", "warnings:", *(f"  {w}" for w in c.warnings)]
    return "\n".join(out) + "\n"


def _traffic_lines(c: Comparison, arrow: str, name: str) -> list[str]:
    """The request rate, each length check and the notes; ``name`` formats a column's name."""
    lines = []
    if c.traffic.rate_change is not None:
        rate = c.traffic.rate_change
        lines.append(
            f"request rate: {value_text(rate.before, 'rps')} {arrow} {value_text(rate.after, 'rps')} "
            f"({change_text(rate)})"
        )
    for check in c.traffic.lengths:
        lines.append(
            f"{name.format(check.column)}: median {check.before_median:g} {arrow} {check.after_median:g}, "
            f"KS D {check.statistic:.3f} (p {check.p_value:.2g}): {'differs' if check.differs else 'same'}"
        )
    return lines + list(c.traffic.notes)


_FIGURES_HEADER = ("figure", "before", "after", "change [95% interval]", "verdict")
_DELIVERY_HEADER = ("figure", "expected change", "measured change", "share of the expected gain", "verdict")


def _table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...] = _FIGURES_HEADER) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows]
    ]


def _markdown(c: Comparison, pictures: list[tuple[str, str, str]] | None = None) -> str:
    out = [f"# Comparison: {c.verdict}", "", f"**{c.headline}**", ""]
    out += [f"- {line}" for line in _sides(c)]
    for title, link, alt in pictures or []:
        out += ["", f"**{title}**", "", f"![{alt}]({link})"]
    out += [
        "",
        "## Figures",
        "",
        *_md_table(_rows(c.figures)),
        "",
        "Intervals: " + "; ".join(_methods(c)) + ".",
    ]
    if c.delivery is not None:
        d = c.delivery
        out += ["", f"## Expected against delivered: the fix for {d.cause}", "", f"**{d.verdict}.**"]
        out += ["", f"Expected: {d.how}.", ""]
        out += ["| " + " | ".join(_DELIVERY_HEADER) + " |", "|---|---|---|---:|---|"]
        out += ["| " + " | ".join(row) + " |" for row in _delivery_rows(d)]
        out += ["", f"Sources: {d.source}."]
    out += ["", "## Traffic", "", "The same." if c.traffic.same else "It differs.", ""]
    out += [f"- {line}" for line in _traffic_lines(c, "→", "`{}`")]
    if c.traffic.reweighted:
        out += ["", f"Re-weighted: {c.traffic.reweighting}.", "", *_md_table(_rows(c.traffic.reweighted))]
    out += ["", "## Environment", ""]
    if not c.differences:
        out.append("The same, as far as the dumps say.")
    else:
        out += ["| kind | what | before | after | comparable |", "|---|---|---|---|---|"]
        out += [
            f"| {d.kind} | {d.what} | {d.before} | {d.after} | {'no' if d.blocks else 'yes'} |"
            for d in c.differences
        ]
    out += ["", "## Diagnosis", ""]
    if not c.diagnosis:
        out.append("The same hypotheses on both sides.")
    else:
        out += ["| hypothesis | change | before | after |", "|---|---|---|---|"]
        out += [f"| {m.id} | {m.change} | {_score(m.before)} | {_score(m.after)} |" for m in c.diagnosis]
    if c.warnings:
        out += ["", "## Warnings", "", *(f"- {w}" for w in c.warnings)]
    return "\n".join(out) + "\n"


def _delivery_rows(delivery: Delivery) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            f"{f.name.upper()} latency (every request)",
            relative_text(f.expected, f.expected_low, f.expected_high),
            relative_text(f.measured, f.measured_low, f.measured_high),
            "-" if f.share is None else f"{f.share:.0%}",
            f.verdict,
        )
        for f in delivery.figures
    ]


def _md_table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| figure | before | after | change [95% interval] | verdict |", "|---|---:|---:|---|---|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _score(score: float | None) -> str:
    return "-" if score is None else f"{score:.2f}"
