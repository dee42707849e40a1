"""Score recorded runs: does `diagnose file` put the injected cause first, in its top three, and
does it raise no false alarm?

A run is a folder with ``dump/`` and ``truth.yaml`` (what the runner writes).
Per run: the rank of the injected cause among the hypotheses, whether it is
first with a score of at least 0.5 (AC@1, the bar the testbed is held to),
whether it is in the top three (AC@3), and false alarms: hypotheses other
than the cause scoring 0.5 or more (on a healthy run, every such hypothesis).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

LIKELY = 0.5


@dataclass(frozen=True)
class RunScore:
    run: str
    scenario: str
    cause: str | None
    rank: int | None  # 1-based rank of the cause among the hypotheses; None: not among them
    cause_score: float | None
    top: tuple[tuple[str, float], ...]  # the first three hypotheses
    false_alarms: tuple[str, ...]
    # Whether the run's fault reached the strength its scenario promises (truth.yaml's ``strength``);
    # None where the scenario promises none. A run that fell short is shown, not counted.
    strength_held: bool | None = None
    # What the cause's evidence cites (or the first hypothesis's, where the cause is not found): the
    # engine's own metrics (server table), its log (events), the request log, the process table, ...
    cited: tuple[str, ...] = ()

    @property
    def first(self) -> bool:
        """AC@1: the cause ranked first with a likely score; for a healthy run, no likely hypothesis."""
        if self.cause is None:
            return not self.false_alarms
        return self.rank == 1 and (self.cause_score or 0.0) >= LIKELY

    @property
    def top3(self) -> bool:
        return self.cause is None or (self.rank is not None and self.rank <= 3)


def score_report(run: str, truth: dict, report: dict) -> RunScore:
    hypotheses = [(h["id"], float(h["score"])) for h in report.get("hypotheses", [])]
    ids = [i for i, _ in hypotheses]
    cause = truth.get("cause")
    rank = ids.index(cause) + 1 if cause in ids else None
    return RunScore(
        run=run,
        scenario=str(truth.get("scenario", "?")),
        cause=cause,
        rank=rank,
        cause_score=hypotheses[rank - 1][1] if rank else None,
        top=tuple(hypotheses[:3]),
        false_alarms=tuple(i for i, s in hypotheses if s >= LIKELY and i != cause),
        strength_held=(truth.get("strength") or {}).get("held"),
        cited=_cited(report.get("hypotheses", []), cause),
    )


_TABLES = {
    "server": "engine metrics",
    "events": "log events",
    "requests": "request log",
    "processes": "processes",
    "system": "host",
    "gpu": "GPU",
}


def _cited(hypotheses: list[dict], cause: str | None) -> tuple[str, ...]:
    """The kinds of evidence the cause's hypothesis (else the first) cites, in the order first cited."""
    chosen = next((h for h in hypotheses if h["id"] == cause), hypotheses[0] if hypotheses else None)
    if chosen is None:
        return ()
    kinds: dict[str, None] = {}
    for item in chosen.get("evidence", []):
        for source in item.get("sources", []):
            table = source.split(":", 1)[0].split(".", 1)[0].strip()
            kinds[_TABLES.get(table, table)] = None
    return tuple(kinds)


def score_run(folder: Path) -> RunScore:
    truth = yaml.safe_load((folder / "truth.yaml").read_text(encoding="utf-8")) or {}
    done = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(folder / "dump"), "--format", "json"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{folder}: diagnose file exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return score_report(folder.name, truth, json.loads(done.stdout))


def table(scores: list[RunScore]) -> str:
    """The per-run table and the totals, as Markdown."""
    lines = [
        "| run | injected | rank | score | AC@1 | AC@3 | false alarms | top hypotheses | its evidence from |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        top = ", ".join(f"{i} {v:.2f}" for i, v in s.top) or "none"
        lines.append(
            f"| {s.run}{' (weak fault)' if s.strength_held is False else ''} | {s.cause or 'healthy'} | "
            f"{s.rank or '-'} | "
            f"{'-' if s.cause_score is None else f'{s.cause_score:.2f}'} | {_mark(s.first)} | "
            f"{_mark(s.top3)} | {', '.join(s.false_alarms) or '-'} | {top} | {', '.join(s.cited) or '-'} |"
        )
    weak = [s.run for s in scores if s.strength_held is False]
    faults = [s for s in scores if s.cause is not None and s.strength_held is not False]
    healthy = [s for s in scores if s.cause is None]
    if weak:
        lines.append("")
        lines.append(f"not counted, their fault weaker than the scenario promises: {', '.join(weak)}")
    if faults:
        lines.append("")
        lines.append(
            f"faults: AC@1 {sum(s.first for s in faults)}/{len(faults)}, "
            f"AC@3 {sum(s.top3 for s in faults)}/{len(faults)}"
        )
    if healthy:
        alarms = sum(len(s.false_alarms) for s in healthy)
        lines.append(f"healthy runs: {len(healthy)}, likely hypotheses on them: {alarms}")
    return "\n".join(lines)


def by_scenario(scores: list[RunScore]) -> str:
    """Per scenario, over its seeds: runs right (AC@1; for a healthy one, no likely finding), the injected
    cause's score from lowest to highest, and what came first when it did not: the check of record a
    rule, fact or score-map change is judged by (docs/testbed.md)."""
    lines = [
        "| scenario | runs | right | score of the cause | first instead, where it was not |",
        "|---|---|---|---|---|",
    ]
    for scenario in dict.fromkeys(s.scenario for s in scores):
        runs = [s for s in scores if s.scenario == scenario and s.strength_held is not False]
        if not runs:
            continue
        cause_scores = [s.cause_score or 0.0 for s in runs]
        spread = "-" if runs[0].cause is None else f"{min(cause_scores):.2f}-{max(cause_scores):.2f}"
        others = [s.top[0] for s in runs if not s.first and s.top]
        instead = ", ".join(f"{i} {v:.2f}" for i, v in others) or "-"
        lines.append(f"| {scenario} | {len(runs)} | {sum(s.first for s in runs)} | {spread} | {instead} |")
    return "\n".join(lines)


def _mark(ok: bool) -> str:
    return "yes" if ok else "no"
