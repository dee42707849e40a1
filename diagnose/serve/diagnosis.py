"""One alert diagnosed, in a worker process: its host's window pulled, analysed, and kept.

The window runs from ``before_s`` ahead of the alert's start (an alert fires
after its ``for:``, and the cause comes before the symptom) to ``after_s``
past it, or to now if that is sooner. What is kept, in the alert's own folder
(``reports/FINGERPRINT-START/``): the pulled dump, ``report.md`` with its
pictures in ``report.assets/``, ``report.json`` (docs/report-json.md) and a
self-contained ``report.html``; and, where an archive is given, the window's
figures and diagnosis as an archive entry labelled with the alert.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.dump.model import Dump
from diagnose.errors import DiagnoseError
from diagnose.judge.rules import Rule
from diagnose.pull import Auth, PrometheusClient, pull
from diagnose.pull.pull import iso_utc
from diagnose.report import Report
from diagnose.serve.queue import Job


@dataclass(frozen=True)
class Settings:
    """What a worker needs to diagnose an alert (sent to it whole, so plain and picklable)."""

    prometheus: str
    reports: Path
    auth: Auth = field(default_factory=Auth)
    ca_file: Path | None = None
    timeout_s: float = 30.0
    before_s: float = 1800.0
    after_s: float = 300.0
    step_s: float | None = None
    rules: Path | None = None
    archive: Path | None = None


@dataclass(frozen=True)
class Result:
    key: str
    folder: str | None
    findings: list[dict]  # {"id", "score", "confidence", "title"}, strongest first
    problem: str | None = None


def diagnose_alert(job: Job, settings: Settings) -> Result:
    """Never raises: an alert that cannot be diagnosed is a result that says why."""
    folder = settings.reports / job.key
    try:
        return Result(job.key, str(folder), _diagnose(job, settings, folder))
    except DiagnoseError as error:
        return Result(job.key, str(folder) if folder.exists() else None, [], str(error))
    except Exception as error:  # noqa: BLE001 - one alert's bug is that alert's failure, not the service's
        return Result(
            job.key, None, [], f"not diagnosed: this is a bug in diagnose ({type(error).__name__}: {error})"
        )


def window(job: Job, settings: Settings, now: float) -> tuple[float, float]:
    return job.starts_at - settings.before_s, min(job.starts_at + settings.after_s, now)


def _diagnose(job: Job, settings: Settings, folder: Path) -> list[dict]:
    from diagnose.dump import load_dump
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pictures import render_pictures
    from diagnose.pipeline import analyse_dump
    from diagnose.report import render_json, render_markdown
    from diagnose.report.html import inline as inline_pictures, page

    shutil.rmtree(folder, ignore_errors=True)  # an attempt a stop cut short: the folder is ours
    folder.mkdir(parents=True)
    client = PrometheusClient(settings.prometheus, settings.auth, settings.ca_file, settings.timeout_s)
    start, end = window(job, settings, time.time())
    summary = pull(client, job.instance, start, end, folder / "dump", settings.step_s, say=lambda _: None)
    rules = load_rules(settings.rules or default_rules_dir())
    dump = load_dump(str(summary.path))
    analysis = analyse_dump(dump, rules)
    report = analysis.report
    assets = folder / "report.assets"
    pictures = render_pictures(report, analysis.spikes, dump, assets)
    heading = _alert_heading(job, settings.prometheus, start, end)
    links = [(p.title, f"{assets.name}/{p.path.name}", p.alt) for p in pictures]
    (folder / "report.md").write_text(heading + render_markdown(report, links), encoding="utf-8")
    (folder / "report.json").write_text(render_json(report), encoding="utf-8")
    inline = inline_pictures([(p.title, p.path.read_bytes(), p.alt) for p in pictures])
    (folder / "report.html").write_text(
        page(f"{job.name} on {job.instance}", heading + render_markdown(report, inline)), encoding="utf-8"
    )
    if settings.archive is not None:
        _archive(job, dump, rules, report, settings.archive)
    return [h.brief() for h in report.hypotheses]


def _alert_heading(job: Job, prometheus: str, start: float, end: float) -> str:
    """What paged, above the report: the alert, its labels and words, and the window pulled."""
    words = [f"> {key}: {' '.join(value.split())}" for key, value in sorted(job.annotations.items())]
    labels = ", ".join(f"{k}={v}" for k, v in sorted(job.labels.items()))
    return (
        "\n".join(
            [
                f"# Alert {job.name} on {job.instance}",
                "",
                f"Firing since {iso_utc(job.starts_at)} (fingerprint {job.fingerprint}); labels: {labels}.",
                "",
                *([*words, ""] if words else []),
                f"The window diagnosed below, {iso_utc(start)} to {iso_utc(end)}, was pulled from "
                f"{prometheus}.",
                "",
            ]
        )
        + "\n"
    )


def _archive(job: Job, dump: Dump, rules: list[Rule], report: Report, path: Path) -> None:
    """The window's figures and diagnosis, kept as an archive entry that names the alert."""
    from diagnose.archive import Archive
    from diagnose.compare.evidence import measure_dump

    evidence, _ = measure_dump(dump, rules, salt=2, helper=False, report=report)
    note = json.dumps(
        {"alert": job.name, "fingerprint": job.fingerprint, "starts_at": iso_utc(job.starts_at)}
    )
    with Archive(path) as archive:
        archive.add(evidence, f"alert {job.name} {job.instance}", None, None, note)
