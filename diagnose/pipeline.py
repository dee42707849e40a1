"""The offline pipeline in one call: load -> facts -> judge -> report data."""

from __future__ import annotations

from pathlib import Path

from diagnose.detect import analyse_spikes
from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.judge import default_rules_dir, judge, load_rules
from diagnose.report import build_report


def analyse(
    dump_path: str, rules_dir: Path | None = None, slo_p99_ms: float | None = None, tz: str | None = None
) -> dict:
    rules = load_rules(rules_dir or default_rules_dir())
    dump = load_dump(dump_path, tz=tz)
    spikes = analyse_spikes(dump)
    facts = compute_facts(dump, slo_p99_ms=slo_p99_ms, spikes=spikes)
    return build_report(dump, facts, judge(rules, facts), spikes)
