"""Assemble the report as plain data in the shape of docs/report-json.md.

Every renderer (JSON, Markdown, terminal text) reads this one structure, so
the three can never disagree about a number.
"""

from __future__ import annotations

import math

from diagnose.detect import SignalFindings, SpikeAnalysis
from diagnose.detect.alignment import Alignment
from diagnose.dump.model import Dump
from diagnose.dump.reader import KNOWN_TABLES
from diagnose.dump.timestamps import iso
from diagnose.facts.model import Facts
from diagnose.judge.engine import FIRED, RULED_OUT, SKIPPED, EvidenceLine, Outcome

REPORT_FORMAT = "diagnose-report/1"


def build_report(
    dump: Dump, facts: Facts, outcomes: list[Outcome], spikes: SpikeAnalysis | None = None
) -> dict:
    return {
        "format": REPORT_FORMAT,
        "dump": dump.path,
        "window": {"start": iso(facts.start), "end": iso(facts.end)},
        "evidence": {
            "tables": {
                name: {"rows": int(len(frame)), "files": dump.files[name]}
                for name, frame in dump.tables.items()
            },
            "missing": [name for name in KNOWN_TABLES if name not in dump.tables],
            "importers": list(dump.importers),
            "not_used": list(dump.not_used),
            "warnings": [*dump.warnings, *(spikes.warnings if spikes else []), *facts.warnings],
            "sources": _sources(dump),
            "environment": _environment(dump),
        },
        "summary": _summary(facts),
        "signals": _signals(spikes) if spikes else {},
        "alignments": [_alignment(a) for a in spikes.alignments] if spikes else [],
        "hypotheses": _hypotheses(outcomes),
        "ruled_out": [
            {"id": o.rule.id, "rule": o.rule.path, "reason": o.reason}
            for o in outcomes
            if o.status == RULED_OUT
        ],
        "not_run": [
            {"id": o.rule.id, "rule": o.rule.path, "missing": o.missing}
            for o in outcomes
            if o.status == SKIPPED
        ],
        "facts": {
            name: {"value": fact.value, "source": fact.source} for name, fact in sorted(facts.values.items())
        },
    }


def _sources(dump: Dump) -> list[dict]:
    """What a recorder was asked to read, and whether it delivered (the manifest's ``sources``)."""
    section = dump.manifest.extra.get("sources")
    if not isinstance(section, dict):
        return []
    sources = []
    for key, entry in section.items():
        if isinstance(entry, dict):
            fields = ("kind", "target", "status", "at", "reason")
            sources.append({"source": str(key), **{f: _text(entry.get(f)) for f in fields}})
    return sources


def _environment(dump: Dump) -> dict[str, str]:
    """Versions and settings the evidence states (manifest ``environment``, or what importers found)."""
    found = dump.manifest.extra.get("environment")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _summary(facts: Facts) -> dict:
    summary = facts.summary
    return {
        "slo_p99_ms": summary.slo_p99_ms,
        "slo_source": summary.slo_source,
        "ooms": [dict(entry) for entry in summary.ooms],
        "llm": {
            name: {k: _round(v) if isinstance(v, float) else v for k, v in row.items()}
            for name, row in summary.llm.items()
        },
        "requests": summary.requests,
        "throughput_rps": _round(summary.throughput_rps),
        "latency_ms": {k: _round(v) for k, v in summary.latency_ms.items()},
        "stages": {
            name: {k: _round(v) if isinstance(v, float) else v for k, v in row.items()}
            for name, row in summary.stages.items()
        },
        "unaccounted_share": _round(summary.unaccounted_share),
        "window_s": summary.window_s,
        "windows": [
            {**{k: _round(v) for k, v in w.items() if k != "start"}, "start": iso(w["start"])}
            for w in summary.windows
        ],
    }


def _signals(spikes: SpikeAnalysis) -> dict:
    """Signals where something happened: a change point, an episode or a period."""
    return {
        name: _signal(found)
        for name, found in spikes.findings.items()
        if found.change_points or found.episodes
    }


def _signal(found: SignalFindings) -> dict:
    entry: dict = {
        "kind": found.signal.kind,
        "step_s": found.signal.step,
        "change_points": [iso(t) for t in found.change_points],
        "episodes": [
            {
                "start": iso(e.start),
                "end": iso(e.end),
                "peak": _round(e.peak),
                "baseline": _round(e.baseline),
                "direction": "up" if e.direction > 0 else "down",
                "routine": usual,
            }
            for e, usual in zip(found.episodes, found.routine, strict=True)
        ],
        "period_s": None,
    }
    period = found.periodicity
    if period is not None:
        entry["period_s"] = _round(period.period_s) if period.periodic else None
        entry["periodicity"] = {
            "estimate_s": _round(period.period_s),
            "jitter_s": _round(period.jitter_s),
            "occurrences": period.occurrences,
            "p_value": _round(period.p_value),
            "periodic": period.periodic,
        }
    meta = {k: v for k, v in found.signal.meta.items() if k in ("pids", "name", "cmdline", "gpu", "stage")}
    if meta:
        entry["meta"] = meta
    return entry


def _alignment(alignment: Alignment) -> dict:
    return {
        "a": alignment.a,
        "b": alignment.b,
        "coincidence": _round(alignment.coincidence),
        "locked": _round(alignment.locked),
        "lag_s": None if math.isnan(alignment.lag_s) else _round(alignment.lag_s),
        "p_value": _round(alignment.p_value),
        "matched": alignment.matched,
    }


def _hypotheses(outcomes: list[Outcome]) -> list[dict]:
    """Fired rules, strongest first; rules sharing an id appear once, with the strongest evidence."""
    best: dict[str, Outcome] = {}
    for outcome in outcomes:
        if outcome.status != FIRED or not outcome.evidence:
            continue
        if outcome.rule.id not in best or outcome.score > best[outcome.rule.id].score:
            best[outcome.rule.id] = outcome
    ranked = sorted(best.values(), key=lambda o: (-o.score, o.rule.id))
    return [
        {
            "id": o.rule.id,
            "rule": o.rule.path,
            "rule_shown_as": o.rule.shown_as,
            "title": o.rule.title,
            "summary": o.rule.summary,
            "score": o.score,
            "confidence": o.confidence,
            "evidence": [_line(e) for e in o.evidence],
            "contrary": [_line(e) for e in o.contrary],
            "not_checked": o.missing,
            "verify": list(o.rule.verify),
            "remedy": list(o.rule.remedy),
            "pitfalls": list(o.rule.pitfalls),
        }
        for o in ranked
    ]


def _line(line: EvidenceLine) -> dict:
    value = _round(line.value) if isinstance(line.value, float) else line.value
    return {"text": line.text, "value": value, "sources": list(line.sources)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
