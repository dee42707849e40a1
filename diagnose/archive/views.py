"""The archive as people read it: the list, one recording with its comparisons, a figure's trend."""

from __future__ import annotations

from collections.abc import Sequence

from diagnose.archive.store import ComparisonRow, Entry
from diagnose.compare.render import value_text

_LIST_FIGURES = ("p50", "p99", "throughput", "gpu_mem_peak")


def entries_table(entries: list[Entry]) -> str:
    if not entries:
        return "the archive is empty: add a recording with diagnose archive add DUMP --label NAME\n"
    header = (
        "id",
        "added",
        "label",
        "change",
        "requests",
        "P50",
        "P99",
        "throughput",
        "GPU mem peak",
        "top finding",
    )
    rows = [
        (
            f"#{e.id}",
            e.added_at[:16].replace("T", " "),
            e.label or "-",
            _short(e.change),
            f"{e.requests:,}",
            *(value_text(e.figures.get(name), e.units.get(name, "")) for name in _LIST_FIGURES),
            f"{e.hypotheses[0][0]} {e.hypotheses[0][1]:.2f}" if e.hypotheses else "-",
        )
        for e in entries
    ]
    return _table(header, rows)


def entry_text(entry: Entry, comparisons: list[ComparisonRow]) -> str:
    lines = [
        f"#{entry.id}  {entry.label or '(no label)'}  added {entry.added_at}",
        f"  dump: {entry.dump}  {entry.window[0]} .. {entry.window[1]}, {entry.requests:,} requests",
    ]
    for name, value in (("change", entry.change), ("expected", entry.expect), ("note", entry.note)):
        if value:
            lines.append(f"  {name}: {value}")
    lines += ["", "figures:"]
    lines += [f"  {name:<24} {value_text(value, entry.units[name])}" for name, value in entry.figures.items()]
    lines += ["", "hypotheses:" if entry.hypotheses else "hypotheses: none"]
    lines += [f"  {rule_id} {score:.2f}" for rule_id, score in entry.hypotheses]
    if comparisons:
        lines += ["", "comparisons:"]
        for c in comparisons:
            role = "against baseline" if c.candidate == entry.id else "as the baseline of"
            other = c.baseline if c.candidate == entry.id else c.candidate
            lines.append(f"  {role} #{other}: {c.headline}")
            if c.expected:
                lines.append(f"    expected: {c.expected}; measured: {measured_text(c.measured)}")
    return "\n".join(lines) + "\n"


def trend_table(entries: list[Entry], metric: str) -> str:
    having = [e for e in entries if e.figures.get(metric) is not None]
    if not having:
        names = sorted({name for e in entries for name in e.figures})
        return f"no recording in the archive has {metric!r}; the figures are: {', '.join(names) or 'none'}\n"
    rows: list[tuple[str, ...]] = []
    previous: float | None = None
    for e in having:
        value = e.figures[metric]
        step = "-" if value is None or not previous else f"{value / previous - 1:+.1%}"
        rows.append(
            (
                f"#{e.id}",
                e.added_at[:16].replace("T", " "),
                e.label or "-",
                value_text(value, e.units[metric]),
                step,
            )
        )
        previous = value
    return _table(("id", "added", "label", metric, "vs the one before"), rows)


def measured_text(measured: dict[str, float | None]) -> str:
    """Measured changes as people write them: relative, the error rate in percentage points."""
    parts = [
        f"{name} {value * 100:+.2f} points" if name == "error_rate" else f"{name} {value:+.1%}"
        for name, value in measured.items()
        if value is not None
    ]
    return ", ".join(parts) or "-"


def _short(text: str | None, width: int = 28) -> str:
    if not text:
        return "-"
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"
