"""The optional notifier: each diagnosed alert's top hypotheses and report address, posted as JSON.

Nothing is posted anywhere unless ``--notify URL`` is given. The body is one
small JSON object (below) that a chat bridge or an incident tool can read; a
notifier that does not answer is logged, and the diagnosis is kept anyway.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from diagnose.pull.pull import iso_utc
from diagnose.serve.diagnosis import Result
from diagnose.serve.queue import Job

log = logging.getLogger("diagnose.serve")

SHOWN = 3  # hypotheses in a notification
TIMEOUT_S = 10.0


def message(job: Job, result: Result, report_url: str) -> dict:
    """``{"alert", "instance", "starts_at", "fingerprint", "report", "hypotheses": [...], "problem"}``."""
    return {
        "alert": job.name,
        "instance": job.instance,
        "starts_at": iso_utc(job.starts_at),
        "fingerprint": job.fingerprint,
        "report": report_url if result.problem is None else None,
        "hypotheses": [
            {k: finding[k] for k in ("id", "score", "confidence", "title")}
            for finding in result.findings[:SHOWN]
        ],
        "problem": result.problem,
    }


def post(url: str, body: dict) -> None:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            answer.read()
    except urllib.error.HTTPError as error:
        log.warning("the notifier %s answered %s for %s", url, error.code, body["alert"])
    except OSError as error:
        log.warning("the notifier %s could not be reached (%s) for %s", url, error, body["alert"])
