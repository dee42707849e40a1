"""A load run as files and as reports: ``capacity.json`` is the result, text and Markdown are read from it.

The run's folder is a dump (docs/dump-format.md): ``requests.jsonl`` holds every request with its
``load_stage``, so ``diagnose file`` analyses it like any recording, and ``manifest.yaml`` says what
made it. ``capacity.json`` (``diagnose-capacity/1``, docs/load.md) holds each stage's figures, the
knee, the setting and the soak's verdict; the text and Markdown reports are rendered from it alone,
so a report can be rendered again from an old run.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from diagnose.load.curve import Figure, StageResult
from diagnose.load.plan import Target
from diagnose.load.soak import Soak
from diagnose.load.sweep import Sweep

FORMAT = "diagnose-capacity/1"
REQUESTS_FILE = "requests.jsonl"
RESULT_FILE = "capacity.json"


def write_run(sweep: Sweep, target: Target, out: Path) -> dict[str, Any]:
    """The run's folder: requests, manifest and result; returns the result as written."""
    out.mkdir(parents=True, exist_ok=True)
    requests = sweep.requests.rename(columns={"stage": "load_stage"})
    requests.to_json(out / REQUESTS_FILE, orient="records", lines=True)
    started = float(requests["ts"].min()) if len(requests) else datetime.now(UTC).timestamp()
    manifest = {
        "format": "diagnose-dump/1",
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "notes": f"diagnose load against {public_url(target.url)}: the client's view of every request "
        "(capacity.json)",
    }
    (out / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    result = capacity(sweep, target)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return result


def public_url(url: str) -> str:
    """The URL without what may be a credential: a user and password, a query (api_key=...)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def capacity(sweep: Sweep, target: Target) -> dict[str, Any]:
    knee = sweep.knee
    return json_ready(
        {
            "format": FORMAT,
            "target": {"url": public_url(target.url), "api": target.api.value, "model": target.model},
            "settings": asdict(sweep.settings),
            "baseline": _stage(sweep.baseline),
            "steps": [_stage(s) for s in sweep.steps],
            "knee": {
                "found": knee.found,
                "kept_up_rps": knee.kept_up_rps,
                "fell_behind_rps": knee.fell_behind_rps,
                "kept_up_planned_rps": knee.kept_up_planned_rps,
                "fell_behind_planned_rps": knee.fell_behind_planned_rps,
                "low_rps": knee.low_rps,
                "high_rps": knee.high_rps,
                "kept_up_resolution": knee.kept_up_resolution,
                "fell_behind_resolution": knee.fell_behind_resolution,
                "capacity_rps": _figure(knee.capacity_rps),
                "collapsed_rps": knee.collapsed_rps,
                "degraded": [
                    {
                        "offered_rps": d.offered_rps,
                        "throughput_rps": _figure(d.throughput_rps),
                        "than_offered_rps": d.than_offered_rps,
                        "than_throughput_rps": _figure(d.than_throughput_rps),
                    }
                    for d in knee.degraded
                ],
                "latency_rises_rps": knee.latency_rises_rps,
                "why": knee.why,
            },
            "recommended": {
                "share_of_knee": sweep.settings.soak_share,
                "rate_rps": sweep.recommended_rps,
                "concurrency": sweep.recommended_concurrency,
            },
            "soak": _soak(sweep.soak) if sweep.soak is not None else None,
            "notes": sweep.notes,
            "source": REQUESTS_FILE,
        }
    )


def _figure(figure: Figure) -> dict[str, float]:
    return {"value": figure.value, "low": figure.low, "high": figure.high}


def _stage(result: StageResult) -> dict[str, Any]:
    return {
        "index": result.stage.index,
        "kind": result.stage.kind.value,
        "rate_rps": result.stage.rate_rps,
        "duration_s": result.stage.duration_s,
        "sent": result.sent,
        "answered": result.ok,
        "failed": result.failed,
        "offered_rps": result.offered_rps,
        "throughput_rps": _figure(result.throughput_rps),
        "latency_p50_ms": _figure(result.latency_p50_ms),
        "latency_p99_ms": _figure(result.latency_p99_ms),
        "ttft_p50_ms": result.ttft_p50_ms,
        "ttft_p99_ms": result.ttft_p99_ms,
        "tpot_p50_ms": result.tpot_p50_ms,
        "in_flight": result.in_flight,
        "backlog_s_per_s": _figure(result.backlog_slope),
        "send_lag_p99_ms": result.send_lag_p99_ms,
        "fell_behind": result.falls_behind(),
        "first_error": result.first_error,
    }


def _soak(soak: Soak) -> dict[str, Any]:
    return {
        "stable": soak.stable,
        "reasons": soak.reasons,
        "started": soak.started,
        "stage": _stage(soak.result),
        "p99_change": _figure(soak.p99_change),
        "stalls": [
            {"start": e.start, "end": e.end, "peak_ms": e.peak, "baseline_ms": e.baseline}
            for e in soak.stalls
        ],
        "stall_period_s": soak.period.period_s if soak.period is not None and soak.period.periodic else None,
        "memory_growth": _figure(soak.memory_growth),
        "memory_source": public_url(soak.memory_source) if soak.memory_source else "",
        "windows": soak.windows.to_dict(orient="records"),
    }


def json_ready(value: Any) -> Any:
    """NaN and infinity as null: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item) for item in value]
    return value


def render_text(result: dict[str, Any], folder: Path) -> str:
    """The capacity report for the terminal, from capacity.json's content."""
    title = f"diagnose load: {result['target']['url']} ({result['target']['api']})"
    baseline, findings = _prose(result, folder)
    return "\n".join([title, "", baseline, "", *_table(result["steps"]), "", *findings]) + "\n"


def render_markdown(
    result: dict[str, Any], folder: Path, pictures: list[tuple[str, str, str]] | None = None
) -> str:
    """The same for an incident review or a ticket; ``pictures``: (title, link, alt), after the findings."""
    baseline, findings = _prose(result, folder)
    lines = [
        f"# Capacity of {result['target']['url']}",
        "",
        baseline,
        "",
        *_markdown_table(result["steps"]),
        "",
    ]
    items = [line if line.startswith("  - ") else f"- {line}" for line in findings]  # reasons nest
    shown = [f"\n**{title}**\n\n![{alt}]({link})" for title, link, alt in pictures or []]
    return "\n".join(lines + items + shown) + "\n"


def _prose(result: dict[str, Any], folder: Path) -> tuple[str, list[str]]:
    """The baseline's line, and what follows the table of steps."""
    base = result["baseline"]
    baseline = (
        f"Baseline, one request at a time for {base['duration_s']:.0f} s: P50 {_ms(base['latency_p50_ms'])}, "
        f"P99 {_ms(base['latency_p99_ms'])} ({base['answered']} of {base['sent']} answered)."
    )
    lines = _knee_lines(result)
    soak = result["soak"]
    if soak is not None:
        stage = soak["stage"]
        verdict = "stable" if soak["stable"] else "UNSTABLE"
        lines.append(
            f"Soak: {stage['duration_s']:.0f} s at {stage['rate_rps']:.3g} req/s: {verdict}; P50 "
            f"{_ms(stage['latency_p50_ms'])}, P99 {_ms(stage['latency_p99_ms'])}, P99 change over the soak "
            f"{_change(soak['p99_change'])}; server memory " + _memory(soak) + "."
        )
        lines += [f"  - {reason}" for reason in soak["reasons"]]
    elif result["knee"]["found"]:
        lines.append("Soak: not run (--soak 0).")
    lines += _knee_diagnosis_lines(result.get("knee_diagnosis"))
    lines += _history_lines(result.get("history"))
    lines += [f"Note: {note}" for note in result["notes"]]
    lines += [f"Every request: {folder / REQUESTS_FILE} (diagnose file {folder} analyses the run as a dump)."]
    return baseline, lines


_SHOWN = 3  # hypotheses at the knee in the report


def _knee_diagnosis_lines(diagnosis: dict[str, Any] | None) -> list[str]:
    """What saturates at the knee (--record), strongest first; the whole report is diagnose file's."""
    if diagnosis is None:
        return []
    if diagnosis["problem"]:
        return [f"At the knee: not diagnosed: {diagnosis['problem']}."]
    window = diagnosis["window"]
    found = diagnosis["hypotheses"][:_SHOWN]
    steps = ", ".join(map(str, diagnosis["steps"]))
    head = f"At the knee (steps {steps}, {window['start']} to {window['end']}), " + (
        "the recording shows:" if found else "no hypothesis has evidence in the recording."
    )
    return [head, *(f"  - {h['id']} {h['score']:.2f} ({h['confidence']}): {h['title']}" for h in found)]


def _history_lines(history: dict[str, Any] | None) -> list[str]:
    if history is None:
        return []
    against = history["against"]
    if against is None:
        return [f"Archived as the first run of {history['name']!r}: the next ones are judged against it."]
    verdict = (
        "REGRESSED: the knee moved down beyond its interval" if history["regressed"] else "no regression"
    )
    lines = [f"Against run #{against['id']} of {history['name']!r} ({against['added_at']}): {verdict}."]
    for move in history["moves"]:
        worse = " (worse)" if move["worse"] else ""
        lines.append(
            f"  - {move['figure']}: {move['before']} then, {move['after']} now: {move['verdict']}{worse}"
        )
    return lines


def _share(resolution: float | None) -> str:
    return "?" if resolution is None else f"{resolution * 100:.0f} %"


def _knee_lines(result: dict[str, Any]) -> list[str]:
    knee, recommended = result["knee"], result["recommended"]
    if not knee["found"]:
        return [
            f"Knee: not reached; the service kept up with {knee['kept_up_rps']:.3g} req/s, "
            "the highest offered."
        ]
    lines = [
        f"Knee: between {knee['kept_up_rps']:.3g} req/s (kept up) and {knee['fell_behind_rps']:.3g} req/s "
        f"(fell behind: {knee['why']})."
    ]
    if knee.get("high_rps") is not None and knee.get("low_rps") is not None:
        lines.append(
            f"A {result['settings']['step_s']:g}-second step tells a rate from the capacity only to within "
            f"{_share(knee.get('kept_up_resolution'))} at {knee['kept_up_rps']:.3g} req/s and "
            f"{_share(knee.get('fell_behind_resolution'))} at {knee['fell_behind_rps']:.3g} (a queue at its "
            f"capacity wanders by chance): the knee's 95 % interval is {knee['low_rps']:.3g} to "
            f"{knee['high_rps']:.3g} req/s; longer steps narrow it."
        )
    cap = knee["capacity_rps"]
    if cap["value"] is not None:
        lines.append(
            f"Throughput where it fell behind (its capacity): {cap['value']:.3g} req/s "
            f"({cap['low']:.3g} to {cap['high']:.3g})."
        )
    elif knee.get("collapsed_rps") is not None:
        lines.append(
            f"Past the knee it did not hold its throughput: at most {knee['collapsed_rps']:.3g} req/s "
            "answered, with many requests failing. Overloaded, it collapses rather than queueing at its "
            "capacity; a limit on waiting requests (admission control) would hold it at the knee."
        )
    for slowed in knee.get("degraded") or []:
        lines.append(
            f"At {slowed['offered_rps']:.3g} req/s it answered {slowed['throughput_rps']['value']:.3g} req/s "
            f"(at most {slowed['throughput_rps']['high']:.3g}), less than the "
            f"{slowed['than_throughput_rps']['value']:.3g} it answered at {slowed['than_offered_rps']:.3g}: "
            "the deeper its queue, the less work it did (not counted in its capacity). A limit on waiting "
            "requests (admission control) would hold it at the knee."
        )
    if knee["latency_rises_rps"] is not None:
        lines.append(
            f"Latency leaves its low-load level (P50 twice alone's) from "
            f"{knee['latency_rises_rps']:.3g} req/s."
        )
    share = recommended["share_of_knee"]
    lines.append(
        f"Production setting, {share:.0%} of the knee: {recommended['rate_rps']:.3g} req/s"
        + (
            f", concurrency {recommended['concurrency']} ({share:.0%} of the requests in flight at the knee)."
            if recommended["concurrency"]
            else "."
        )
    )
    return lines


_HEADER = ("rate", "offered", "answered", "throughput", "P50", "P99", "TTFT P50", "TPOT P50", "in flight", "")


def _row(step: dict[str, Any]) -> tuple[str, ...]:
    answered = step["answered"] / step["sent"] if step["sent"] else float("nan")
    verdict = f"fell behind: {step['fell_behind']}" if step["fell_behind"] else "kept up"
    return (
        f"{step['rate_rps']:.3g}",
        f"{step['offered_rps']:.3g}",
        f"{answered:.0%}",
        f"{_num(step['throughput_rps']['value'])}",
        _ms(step["latency_p50_ms"]),
        _ms(step["latency_p99_ms"]),
        _ms({"value": step["ttft_p50_ms"]}),
        _ms({"value": step["tpot_p50_ms"]}),
        f"{step['in_flight']:.1f}",
        verdict,
    )


def _table(steps: list[dict[str, Any]]) -> list[str]:
    rows = [_HEADER, *(_row(s) for s in sorted(steps, key=lambda s: s["rate_rps"]))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER) - 1)]
    return [
        "  ".join(cell.rjust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows
    ]


def _markdown_table(steps: list[dict[str, Any]]) -> list[str]:
    header = ("rate (req/s)", *_HEADER[1:-1], "verdict")
    rows = [_row(s) for s in sorted(steps, key=lambda s: s["rate_rps"])]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---:|" * (len(header) - 1) + "---|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _ms(figure: dict[str, Any]) -> str:
    value = figure.get("value")
    return "-" if value is None else f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _memory(soak: dict[str, Any]) -> str:
    if not soak["memory_source"]:
        return "not read (no process_resident_memory_bytes at --metrics-url)"
    if soak["memory_growth"]["value"] is None:
        return f"read from {soak['memory_source']}, too few samples to judge"
    return f"{_change(soak['memory_growth'])} over its second half ({soak['memory_source']})"


def _change(figure: dict[str, Any]) -> str:
    if figure["value"] is None:
        return "not measured"
    if figure["low"] is None:
        return f"{figure['value']:+.0%}"
    return f"{figure['value']:+.0%} ({figure['low']:+.0%} to {figure['high']:+.0%})"
