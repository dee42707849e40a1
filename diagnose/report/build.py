"""Assemble the report (report/model.py) from the dump, its facts, the rules' outcomes and the spikes.

Every renderer (JSON, Markdown, terminal text, HTML), the live view, the
pictures and compare read this one structure, so none can disagree about a
number.
"""

from __future__ import annotations

import math
from dataclasses import replace

from diagnose.detect import SignalFindings, SpikeAnalysis
from diagnose.detect.alignment import Alignment
from diagnose.dump.model import Dump, SourceStatus
from diagnose.dump.reader import KNOWN_TABLES
from diagnose.dump.schema import SUMMARY_TABLES, TRACE_TABLES
from diagnose.facts.model import Facts
from diagnose.gain import ExpectedGain, expected_gain, no_counterfactual
from diagnose.isolation import isolated
from diagnose.judge.engine import LIKELY, Outcome, Status
from diagnose.report.model import (
    AlignmentReport,
    CitedValue,
    Direction,
    Episode,
    EvidenceRead,
    Hypothesis,
    ImporterUse,
    LatencyWindow,
    Line,
    NotRun,
    Periodicity,
    Report,
    RuledOut,
    SignalReport,
    SourceState,
    StageShare,
    Summary,
    TableRead,
    TokenLatency,
    Window,
)

REPORT_FORMAT = "diagnose-report/1"


def build_report(
    dump: Dump, facts: Facts, outcomes: list[Outcome], spikes: SpikeAnalysis | None = None
) -> Report:
    gain_warnings: list[str] = []
    hypotheses = _hypotheses(outcomes, dump, spikes, gain_warnings)
    return Report(
        format=REPORT_FORMAT,
        dump=dump.path,
        window=Window(facts.start, facts.end),
        evidence=EvidenceRead(
            tables={
                name: TableRead(int(len(frame)), tuple(dump.files[name]))
                for name, frame in {**dump.tables, **dump.traces, **dump.summaries}.items()
            },
            # A profiler trace or a load test is evidence of another kind: its absence is no gap.
            missing=tuple(
                name
                for name in KNOWN_TABLES
                if name not in dump.tables and name not in TRACE_TABLES and name not in SUMMARY_TABLES
            ),
            importers=tuple(ImporterUse(u["file"], u["importer"], int(u["rows"])) for u in dump.importers),
            not_used=tuple(dump.not_used),
            warnings=(
                *dump.warnings,
                *_recorder_notes(dump),
                *(spikes.warnings if spikes else []),
                *facts.warnings,
                *gain_warnings,
            ),
            sources=_sources(dump),
            environment=_environment(dump),
        ),
        summary=_summary(facts),
        signals=_signals(spikes) if spikes else {},
        alignments=tuple(_alignment(a) for a in spikes.alignments) if spikes else (),
        hypotheses=hypotheses,
        ruled_out=tuple(
            RuledOut(o.rule.id, o.rule.path, o.reason) for o in outcomes if o.status == Status.RULED_OUT
        ),
        not_run=tuple(
            NotRun(o.rule.id, o.rule.path, tuple(o.missing)) for o in outcomes if o.status == Status.SKIPPED
        ),
        facts={name: CitedValue(fact.value, fact.source) for name, fact in sorted(facts.values.items())},
    )


def _recorder_notes(dump: Dump) -> list[str]:
    """What the recorder said of evidence it could not take: why a recording holds no GPU table."""
    note = dump.manifest.extra.get("gpu_note")
    return [f"no GPU figures: {note} (the recorder's note)"] if note and "gpu" not in dump.tables else []


def _sources(dump: Dump) -> tuple[SourceState, ...]:
    """What a recorder was asked to read, and whether it delivered (the manifest's ``sources``)."""
    section = dump.manifest.extra.get("sources")
    if not isinstance(section, dict):
        return ()
    statuses = {status.value: status for status in SourceStatus}
    return tuple(
        SourceState(
            str(key),
            _text(entry.get("kind")),
            _text(entry.get("target")),
            statuses.get(str(entry.get("status"))),
            _text(entry.get("at")),
            _text(entry.get("reason")),
        )
        for key, entry in section.items()
        if isinstance(entry, dict)
    )


def _environment(dump: Dump) -> dict[str, str]:
    """Versions and settings the evidence states (manifest ``environment``, or what importers found)."""
    found = dump.manifest.extra.get("environment")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _summary(facts: Facts) -> Summary:
    summary = facts.summary
    return Summary(
        slo_p99_ms=summary.slo_p99_ms,
        slo_source=summary.slo_source,
        ooms=tuple(summary.ooms),
        llm={
            name: TokenLatency(_round(row.p50), _round(row.p95), _round(row.p99), row.source)
            for name, row in summary.llm.items()
        },
        requests=summary.requests,
        throughput_rps=_round(summary.throughput_rps),
        latency_ms={k: _rounded(v) for k, v in summary.latency_ms.items()},
        stages={
            name: StageShare(
                row.kind,
                _rounded(row.share),
                _rounded(row.tail_share),
                _rounded(row.excess_share),
                _rounded(row.p50_ms),
                _rounded(row.p99_ms),
            )
            for name, row in summary.stages.items()
        },
        unaccounted_share=_round(summary.unaccounted_share),
        window_s=summary.window_s,
        windows=tuple(
            LatencyWindow(
                w.requests, _rounded(w.p50), _rounded(w.p95), _rounded(w.p99), _rounded(w.p999), w.start
            )
            for w in summary.windows
        ),
    )


def _signals(spikes: SpikeAnalysis) -> dict[str, SignalReport]:
    """Signals where something happened: a change point or an episode."""
    return {
        name: _signal(found)
        for name, found in spikes.findings.items()
        if found.change_points or found.episodes
    }


def _signal(found: SignalFindings) -> SignalReport:
    period = found.periodicity
    periodicity = (
        None
        if period is None
        else Periodicity(
            _round(period.period_s),
            _round(period.jitter_s),
            period.occurrences,
            _round(period.p_value),
            period.periodic,
        )
    )
    meta = {k: v for k, v in found.signal.meta.items() if k in ("pids", "name", "cmdline", "gpu", "stage")}
    if "server" in found.signal.meta:  # whether it is the serving process's, where the dump says which
        meta["server"] = bool(found.signal.meta["server"])
    return SignalReport(
        kind=found.signal.kind,
        step_s=found.signal.step,
        change_points=tuple(found.change_points),
        episodes=tuple(
            Episode(
                e.start,
                e.end,
                _round(e.peak),
                _round(e.baseline),
                Direction.UP if e.direction > 0 else Direction.DOWN,
                usual,
            )
            for e, usual in zip(found.episodes, found.routine or [], strict=True)
        ),
        period_s=periodicity.estimate_s if periodicity and periodicity.periodic else None,
        periodicity=periodicity,
        meta=meta or None,
    )


def _alignment(alignment: Alignment) -> AlignmentReport:
    return AlignmentReport(
        a=alignment.a,
        b=alignment.b,
        coincidence=_round(alignment.coincidence),
        locked=_round(alignment.locked),
        lag_s=None if math.isnan(alignment.lag_s) else _round(alignment.lag_s),
        p_value=_rounded(alignment.p_value),
        matched=alignment.matched,
    )


def _hypotheses(
    outcomes: list[Outcome], dump: Dump, spikes: SpikeAnalysis | None, warnings: list[str]
) -> tuple[Hypothesis, ...]:
    """Fired rules, strongest first; rules sharing an id appear once, with the strongest evidence; each
    with the gain of removing its cause where a counterfactual exists (a failure of one is a warning).

    Of hypotheses equally likely as shown (the same score to two decimals), the fix that buys the most
    P99 comes first: two causes both certain, the one worth fixing first leads."""
    best: dict[str, Outcome] = {}
    for outcome in outcomes:
        if outcome.status != Status.FIRED or not outcome.evidence:
            continue
        if outcome.rule.id not in best or outcome.score > best[outcome.rule.id].score:
            best[outcome.rule.id] = outcome
    gains = {rule_id: _expected_gain(rule_id, dump, spikes, warnings) for rule_id in best}
    ranked = sorted(
        best.values(), key=lambda o: (-round(o.score, 2), -_p99_saved_ms(gains[o.rule.id]), o.rule.id)
    )
    return tuple(
        Hypothesis(
            id=o.rule.id,
            rule=o.rule.path,
            rule_shown_as=o.rule.shown_as,
            title=o.rule.title,
            summary=o.rule.summary,
            score=o.score,
            confidence=o.confidence,
            evidence=tuple(_line(e) for e in o.evidence),
            contrary=tuple(_line(e) for e in o.contrary),
            not_checked=tuple(o.missing),
            not_seen=tuple(o.unseen) if o.unseen and o.score < LIKELY else None,
            verify=tuple(o.rule.verify),
            remedy=tuple(o.rule.remedy),
            pitfalls=tuple(o.rule.pitfalls),
            explained_by=o.explained_by,
            explanation=o.explanation or None,
            own_score=o.own_score,
            expected_gain=gains[o.rule.id],
            gain_note=no_counterfactual(o.rule.id) if gains[o.rule.id] is None else None,
        )
        for o in ranked
    )


def _p99_saved_ms(gain: ExpectedGain | None) -> float:
    p99 = next((f for f in gain.figures if f.name == "p99"), None) if gain is not None else None
    return 0.0 if p99 is None else max(0.0, p99.now_ms - p99.expected_ms)


def _expected_gain(
    cause: str, dump: Dump, spikes: SpikeAnalysis | None, warnings: list[str]
) -> ExpectedGain | None:
    return isolated(warnings, f"the expected gain of {cause}", lambda: expected_gain(cause, dump, spikes))


def _line(line: Line) -> Line:
    return replace(line, value=_rounded(line.value)) if isinstance(line.value, float) else line


def _round(value: float | None) -> float | None:
    return None if value is None else _rounded(value)


def _rounded(value: float) -> float:
    return round(float(value), 4)
