"""The index page of recent alerts and their top hypotheses: one small HTML page, nothing fetched.

Every value on it came from an alert's labels or a report, so all of it is
escaped; the page refreshes itself every 30 s for an engineer who keeps it open.
"""

from __future__ import annotations

import html

from diagnose.judge.engine import LIKELY
from diagnose.pull.pull import iso_utc
from diagnose.serve.queue import Entry, State

_SHOWN = 2  # findings on an alert's row

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1a1a1a; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; }
th { background: #f3f3f3; } .failed { color: #a00; } .waiting { color: #666; }
"""


def index_page(entries: list[Entry], counts: dict[State, int]) -> str:
    waiting = counts[State.QUEUED] + counts[State.RUNNING]
    rows = (
        "\n".join(_row(entry) for entry in entries) or '<tr><td colspan="6">No alert received yet.</td></tr>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="refresh" content="30">\n<title>diagnose serve: alerts</title>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<h1>Alerts and their diagnoses</h1>\n"
        f"<p>{counts[State.DONE]} diagnosed, {counts[State.FAILED]} failed, {waiting} waiting or running, "
        f"{counts[State.RESOLVED]} resolved before their firing was seen. A finding is likely at a score of "
        f"{LIKELY} or more.</p>\n<table>\n<tr><th>alert</th><th>instance</th><th>firing since</th>"
        "<th>state</th><th>top hypotheses</th><th>report</th></tr>\n"
        f"{rows}\n</table>\n</body>\n</html>\n"
    )


def _row(entry: Entry) -> str:
    job = entry.job
    if entry.state is State.DONE:
        shown = entry.findings[:_SHOWN]
        found = (
            "; ".join(
                f"{html.escape(f['id'])} {f['score']:.2f}" + (" (likely)" if f["score"] >= LIKELY else "")
                for f in shown
            )
            or "no hypothesis"
        )
        link = f'<a href="/reports/{html.escape(job.key)}">report</a>'
    elif entry.state is State.FAILED:
        found, link = f'<span class="failed">{html.escape(entry.problem or "")}</span>', ""
    else:
        found, link = f'<span class="waiting">{entry.state}</span>', ""
    cells = [
        html.escape(job.name),
        html.escape(job.instance),
        iso_utc(job.starts_at),
        str(entry.state),
        found,
        link,
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"
