"""Sweep a fleet: one dump per host from Prometheus, each analysed, and one table of who shows what.

A platform team asks "which of my hosts show which problem last night?";
the answer is the same diagnosis ``diagnose file`` gives, run on every host's
pulled dump, summed up in ``fleet.md`` (for people) and ``fleet.json`` (for
scripts). A host that cannot be pulled or analysed is a row that says why,
not the end of the sweep.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from diagnose.errors import DiagnoseError, PullError
from diagnose.pull.client import PrometheusClient
from diagnose.pull.pull import iso_utc as _iso, known_instances, pull

LIKELY = 0.5  # the report's own line between "likely" and not (docs/report-json.md)


@dataclass(frozen=True)
class HostResult:
    host: str
    dump: str | None
    findings: list[dict]  # {"id", "score", "confidence", "title"}, strongest first
    problem: str | None = None


def sweep(
    client: PrometheusClient,
    start: float,
    end: float,
    output: Path,
    job: str | None = None,
    step_s: float | None = None,
    rules_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> list[HostResult]:
    from diagnose.dump import load_dump
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pipeline import analyse_dump

    hosts = known_instances(client, end, job)
    if not hosts:
        raise PullError(f"{client.url}: no instances with an up series" + (f" in job {job!r}" if job else ""))
    output.mkdir(parents=True, exist_ok=True)
    rules = load_rules(rules_dir or default_rules_dir())
    results = []
    for done, host in enumerate(hosts):
        say(f"diagnose: pulling {host} ({done + 1} of {len(hosts)} hosts)")
        try:
            summary = pull(client, host, start, end, output / _folder(host), step_s, say=say)
            report = analyse_dump(load_dump(str(summary.path)), rules).report
        except DiagnoseError as error:
            results.append(HostResult(host, None, [], str(error)))
            continue
        findings = [
            {"id": h.id, "score": h.score, "confidence": h.confidence, "title": h.title}
            for h in report.hypotheses
        ]
        results.append(HostResult(host, str(summary.path), findings))
    _write_summary(output, results, client.url, start, end)
    return results


def _folder(host: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in host) or "host"


def _write_summary(output: Path, results: list[HostResult], url: str, start: float, end: float) -> None:
    (output / "fleet.json").write_text(
        json.dumps(
            {
                "prometheus": url,
                "window": {"start": _iso(start), "end": _iso(end)},
                "likely_at": LIKELY,
                "hosts": [result.__dict__ for result in results],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    ids = sorted({f["id"] for r in results for f in r.findings if f["score"] >= LIKELY})
    lines = [
        f"# Fleet sweep: {len(results)} host{'s' if len(results) != 1 else ''}, {_iso(start)} to {_iso(end)}",
        "",
        f"From {url}. A cell is the hypothesis's score where it is likely (>= {LIKELY}) on that host; "
        "`diagnose file HOST/` gives the whole report.",
        "",
    ]
    header = ["host", *ids, "other findings"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        if result.problem:
            lines.append(
                f"| {result.host} | " + " | ".join("" for _ in ids) + f" | not analysed: {result.problem} |"
            )
            continue
        scores = {f["id"]: f["score"] for f in result.findings}
        cells = [f"{scores[i]:.2f}" if scores.get(i, 0) >= LIKELY else "" for i in ids]
        weaker = [f"{f['id']} {f['score']:.2f}" for f in result.findings if f["score"] < LIKELY]
        lines.append(f"| {result.host} | " + " | ".join([*cells, ", ".join(weaker) or "none"]) + " |")
    (output / "fleet.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
