"""The spikes part of the text and Markdown reports: episodes, periods and alignments."""

from __future__ import annotations

from diagnose.dump.timestamps import iso
from diagnose.report.model import Episode, Report, SignalReport
from diagnose.units import human_bytes, human_ms, percent

MAX_SIGNALS = 12
MAX_EPISODES = 10
MAX_ALIGNMENTS = 10


# The columns, said once under the tables: what a reader of an incident review would otherwise ask.
# The alignment table's columns are said only where that table is shown.
_SIGNALS_LEGEND = (
    "episodes: spells away from the signal's own usual level; unusual: unlike its other episodes "
    "(the rest recur as a routine); period: how regularly they recur"
)
_ALIGNMENTS_LEGEND = (
    "coincidence: the share of the latency spikes that overlap an episode of the signal; locked: the "
    "share whose nearest episode starts at one common lag; p (chance): how often shifting the signal at "
    "random locks as well"
)


def legend(report: Report) -> str:
    """What the columns of the tables shown mean."""
    return f"{_SIGNALS_LEGEND}; {_ALIGNMENTS_LEGEND}" if report.alignments else _SIGNALS_LEGEND


def spike_rows(report: Report) -> list[list[str]]:
    """signal, episodes, unusual ones, typical length, period, change points; the busiest signals first.
    Another process's signals only where a finding or an alignment names them (on a busy host they
    would fill the table)."""
    signals = report.signals
    reference = report.alignments[0].a if report.alignments else None
    shown = [n for n in signals if n not in _left_out(report)]
    names = sorted(shown, key=lambda n: (n != reference, -len(signals[n].episodes), n))
    rows = []
    for name in names[:MAX_SIGNALS]:
        entry = signals[name]
        episodes = entry.episodes
        rows.append(
            [
                name,
                str(len(episodes)),
                str(sum(not e.routine for e in episodes)),
                f"{_median_length(episodes):.0f} s" if episodes else "-",
                _period(entry),
                str(len(entry.change_points)),
            ]
        )
    return rows


def processes_left_out(report: Report) -> int:
    """How many other processes' signals the table leaves out."""
    return len(_left_out(report))


def _left_out(report: Report) -> set[str]:
    """Signals of processes other than the server's, where the dump says which the server is, that no
    finding or alignment names. Where it does not say, every process may be the server: none left out."""
    named = {cited.value for cited in report.facts.values() if isinstance(cited.value, str)}
    named |= {a.b for a in report.alignments} | {a.a for a in report.alignments}
    return {
        name
        for name, signal in report.signals.items()
        if signal.kind == "process" and (signal.meta or {}).get("server") is False and name not in named
    }


def episode_rows(report: Report) -> tuple[str | None, list[list[str]]]:
    reference: str | None
    if not report.alignments:
        reference = next(
            (n for n in ("requests.latency_ms.p99", "requests.latency_ms.p50") if n in report.signals),
            None,
        )
    else:
        reference = report.alignments[0].a
    if reference is None:
        return None, []
    episodes = report.signals[reference].episodes[:MAX_EPISODES]
    return reference, [
        [
            str(iso(e.start)),
            str(iso(e.end)),
            _in_unit(reference, e.peak),
            _in_unit(reference, e.baseline),
            e.direction,
            "routine" if e.routine else "unusual",
        ]
        for e in episodes
    ]


def alignment_rows(report: Report) -> list[list[str]]:
    return [
        [
            a.b,
            percent(a.coincidence),
            percent(a.locked),
            "-" if a.lag_s is None else f"{a.lag_s:+.1f} s",
            "< 0.001" if a.p_value <= 0.001 else f"{a.p_value:.3f}",
        ]
        for a in report.alignments[:MAX_ALIGNMENTS]
    ]


SIGNAL_HEADER = ["signal", "episodes", "unusual", "typical length", "period", "change points"]
EPISODE_HEADER = ["start", "end", "peak", "baseline", "direction", "kind"]
ALIGNMENT_HEADER = ["moves with the latency spikes", "coincidence", "locked", "lag", "p (chance)"]


def _median_length(episodes: tuple[Episode, ...]) -> float:
    lengths = sorted(e.end - e.start for e in episodes)
    return lengths[len(lengths) // 2]


def _period(entry: SignalReport) -> str:
    period = entry.periodicity
    if period is None:
        return "-"
    if not period.periodic:
        return f"not regular (p = {period.p_value:.2f})"
    return f"{period.estimate_s:.0f} s +- {period.jitter_s:.0f} s"


def _in_unit(signal: str, value: float | None) -> str:
    """A value in the unit its signal's column name carries (latency_ms, mem_used_bytes, util_pct, ...)."""
    if value is None:
        return "-"
    column = signal.split("[")[0]
    if "_ms" in column:
        return human_ms(value)
    if "_bytes" in column:
        return human_bytes(value)
    if "_pct" in column:
        return f"{value:.0f}%"
    return f"{value:,.3g}" if abs(value) < 1e4 else f"{value:,.0f}"
