"""Verify hypotheses on the live host: run the read-only checks their rules list, and say what each found.

The hypotheses are the dump's (a recording of this host, the flight
recorder's, or ``record``'s): the likely ones and the runner-up, or those
named. Each check of a hypothesis's rule runs its probe (once, whichever
checks share it), and its ``confirms`` and ``refutes`` tests are evaluated on
what the probe found beside the dump's facts. A check that confirms moves the
score up by its weight as a condition does (1 - (1 - s)(1 - w)); one that
refutes moves it down (s (1 - w)); one that does neither, or whose facts are
not all there, is inconclusive; a probe that cannot run here leaves its
checks "not run". The weights are the rule's, written beside each check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from diagnose.dump.model import Dump
from diagnose.expressions import expr
from diagnose.facts.model import Facts
from diagnose.judge.rules import Check, Rule
from diagnose.judge.template import render
from diagnose.report.model import Report
from diagnose.verify.probes import Context, Found, Host, run_probe
from diagnose.verify.processes_now import ServerIdentity

LIKELY = 0.5
CONFIRMS, REFUTES, INCONCLUSIVE, NOT_RUN = "confirms", "refutes", "inconclusive", "not run"


@dataclass(frozen=True)
class CheckOutcome:
    check: str
    probe: str
    outcome: str  # confirms, refutes, inconclusive, not run
    says: str  # the check in words, its facts filled in where they are known
    weight: float
    test: str  # the test that decided it (confirms or refutes), or why nothing did
    source: str  # what the probe read, or why it could not


@dataclass(frozen=True)
class Verified:
    cause: str
    score: float  # the dump's
    verified_score: float  # after the checks
    checks: tuple[CheckOutcome, ...]
    note: str | None = None  # why there is nothing to check


@dataclass(frozen=True)
class Verification:
    dump: str
    verified: tuple[Verified, ...]
    probes: tuple[Found, ...]
    host: str = ""  # whether the dump was recorded here, and how that was told
    not_run: str | None = None  # why no check ran (a dump of another host)


def verify(
    dump_path: str,
    rules_dir: Path | None = None,
    causes: list[str] | None = None,
    host: Host | None = None,
    metrics_url: str | None = None,
    metrics_map: dict[str, str] | None = None,
    here_anyway: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """The checks of the dump's hypotheses on this host. A dump recorded on another host is not
    analysed and nothing runs (this host's processes would be judged against that host's incident),
    unless ``here_anyway``."""
    from diagnose.collectors.identity import compare, recorded_host
    from diagnose.dump.reader import read_manifest
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pipeline import analyse_path

    host = host or Host()
    manifest = read_manifest(dump_path)
    where = compare(recorded_host(manifest.host, manifest.extra), host.identity())
    if where.same is False and not here_anyway:
        why = f"{where.reason}: its checks read the host they run on, so none ran (--here-anyway runs them)"
        return Verification(dump_path, (), (), where.reason, why)
    rules = load_rules(rules_dir or default_rules_dir())
    dump, analysis = analyse_path(dump_path, rules_dir, progress=progress)
    found = verify_report(
        dump_path, dump, analysis.report, rules, causes, host, metrics_url, metrics_map, progress
    )
    return replace(found, host=where.reason)


def verify_report(
    name: str,
    dump: Dump,
    report: Report,
    rules: list[Rule],
    causes: list[str] | None = None,
    host: Host | None = None,
    metrics_url: str | None = None,
    metrics_map: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """The checks of ``report``'s hypotheses (``dump``'s analysis, named ``name``) run on the live host:
    what the live view's key runs on the window it shows."""
    by_id = {rule.id: rule for rule in rules}
    facts = Facts()
    for fact, cited in report.facts.items():
        facts.add(fact, cited.value, cited.source)
    scores = {h.id: float(h.score) for h in report.hypotheses}
    chosen = causes if causes else _likely_and_runner_up(scores)
    source = _metrics_source(dump.manifest.extra)
    url = metrics_url or (source.get("target") if isinstance(source.get("target"), str) else None)
    recorded_map = source.get("map") if isinstance(source.get("map"), dict) else None
    context = Context(
        facts,
        url if url and url.startswith(("http://", "https://")) else None,
        metrics_map or ({str(k): str(v) for k, v in recorded_map.items()} if recorded_map else None),
        _server(dump),
        dump.span(),
    )
    host = host or Host()
    probes: dict[str, Found] = {}
    verified = []
    for cause in chosen:
        rule = by_id.get(cause)
        score = scores.get(cause, 0.0)
        if rule is None or not rule.checks:
            verified.append(Verified(cause, score, score, (), "its rule lists no check a program can run"))
            continue
        outcomes = []
        for check in rule.checks:
            if check.probe not in probes:
                if progress is not None:
                    progress(f"checking {cause} on this host ({check.probe.replace('_', ' ')})")
                probes[check.probe] = run_probe(check.probe, host, context)
            outcomes.append(_outcome(check, probes[check.probe], facts))
        verified.append(Verified(cause, score, _moved(score, outcomes), tuple(outcomes)))
    return Verification(name, tuple(verified), tuple(probes.values()))


def _likely_and_runner_up(scores: dict[str, float]) -> list[str]:
    ranked = sorted(scores, key=lambda cause: -scores[cause])
    likely = [cause for cause in ranked if scores[cause] >= LIKELY]
    runner_up = [cause for cause in ranked if scores[cause] < LIKELY][:1]
    return likely + runner_up


def _server(dump: Dump) -> ServerIdentity | None:
    """The dump's server: its pids, and the name and command line of its last row in the process table."""

    pids = {pid for pid in dump.server_pids if pid > 0}  # a group of processes has a negative id
    if not pids:
        return None
    processes = dump.table("processes")
    name = cmdline = None
    if processes is not None and "pid" in processes.columns:
        mine = processes[pd.to_numeric(processes["pid"], errors="coerce").isin(list(pids))]
        if len(mine):
            last = mine.iloc[-1]
            name = str(last["name"]) if "name" in mine.columns and pd.notna(last["name"]) else None
            known = "cmdline" in mine.columns and pd.notna(last["cmdline"])
            cmdline = str(last["cmdline"]) if known else None
    return ServerIdentity(frozenset(pids), name, cmdline)


def _metrics_source(manifest: dict) -> dict:
    """The manifest's record of the metrics endpoint: its target, and the map it was read with."""
    sources = manifest.get("sources")
    source = sources.get("metrics") if isinstance(sources, dict) else None
    return source if isinstance(source, dict) else {}


def _outcome(check: Check, found: Found, facts: Facts) -> CheckOutcome:
    if found.not_run is not None:
        return CheckOutcome(
            check.name, check.probe, NOT_RUN, _says(check, facts, found), check.weight, "", found.not_run
        )
    both = Facts(values=dict(facts.values))
    for name, value in found.facts.items():
        both.add(name, value, found.source)
    lookup = {name: fact.value for name, fact in both.values.items()}
    says = _says(check, both, found)
    if expr.evaluate(check.confirms, lookup) is True:
        return CheckOutcome(
            check.name, check.probe, CONFIRMS, says, check.weight, check.confirms_text, found.source
        )
    if check.refutes is not None and expr.evaluate(check.refutes, lookup) is True:
        text = check.refutes_text or ""
        return CheckOutcome(check.name, check.probe, REFUTES, says, check.weight, text, found.source)
    read = expr.names(check.confirms) | (expr.names(check.refutes) if check.refutes is not None else set())
    unread = sorted(name for name in read if name.startswith("live.") and name not in lookup)
    why = f"not measured now: {_meanings(unread)}" if unread else "neither test held"
    if unread and found.facts.get("live.server.found") is False:
        why = "the dump's server is not running now: its figures cannot be read"
    return CheckOutcome(check.name, check.probe, INCONCLUSIVE, says, check.weight, why, found.source)


def _says(check: Check, facts: Facts, found: Found) -> str:
    """The check in words, its facts filled in; where the probe could not measure some of them, what
    it checked and what it could not measure, never a sentence with holes ("at none of a core")."""
    rendered = render(check.says, facts)
    if rendered is not None:
        return rendered
    unread = [name for name in check.says.facts if facts.get(name) is None]
    server_gone = found.facts.get("live.server.found") is False
    because = "; the dump's server is not running now" if server_gone else ""
    return f"{check.name.replace('_', ' ')}: not measured now ({_meanings(unread)}){because}"


def _meanings(names: list[str]) -> str:
    """What facts are, in words (their catalogue's meaning), for a sentence that says they are missing."""
    from diagnose.facts.catalogue import CATALOGUE, LIVE

    said = [(LIVE.get(name) or CATALOGUE.get(name)) for name in names]
    return "; ".join(
        spec.meaning if spec is not None else name for spec, name in zip(said, names, strict=True)
    )


def _moved(score: float, outcomes: list[CheckOutcome]) -> float:
    for outcome in outcomes:
        if outcome.outcome == CONFIRMS:
            score = 1 - (1 - score) * (1 - outcome.weight)
        elif outcome.outcome == REFUTES:
            score *= 1 - outcome.weight
    return score
