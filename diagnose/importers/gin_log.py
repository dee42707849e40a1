"""Gin's access log (the Go web framework Ollama and many Go gateways serve with) -> the requests table.

Gin's default logger (gin-gonic/gin, logger.go: ``defaultLogFormatter``) writes one line per request
when it has been answered, behind whatever prefix the service's log adds (journald's, a container's):

    [GIN] 2024/12/11 - 09:58:58 | 500 |        29m59s |      10.0.0.123 | POST     "/api/chat"

the time the response went out (``TimeStamp``, the server's local clock), the status, the latency as
Go prints a ``time.Duration`` (``4.709180529s``, ``1.2ms``, ``850µs``; truncated to the second above a
minute), the client, the method and the path; on a terminal the status and method carry ANSI colours.
A request's ``ts`` is its arrival, the stamp less its latency. Only the inference calls are requests
here: every engine's API takes them by POST (Ollama's ``/api/chat``, OpenAI's ``/v1/...``, TGI's
``/generate``); a GET or HEAD (a health check, a model list, a metrics scrape) is counted and left out.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, local_epoch, zone_note
from diagnose.units import counted

_COLOUR = r"(?:\x1b\[[\d;]*m)?"
_LINE = re.compile(
    r"\[GIN\] (?P<stamp>\d{4}/\d{2}/\d{2} - \d{2}:\d{2}:\d{2}) \|"
    rf"{_COLOUR}\s*(?P<status>\d{{3}})\s*{_COLOUR}\|\s*(?P<latency>[\d.]+[a-zµμ]+(?:[\d.]+[a-zµμ]+)*)\s*\|"
    rf"\s*(?P<client>\S*)\s*\|{_COLOUR}\s*(?P<method>[A-Z]+)\s*{_COLOUR}\s+\"(?P<path>[^\"]*)\"?"
)
_DURATION_PART = re.compile(r"([\d.]+)(h|ms|m|s|us|µs|μs|ns)")
_MS = {
    "h": 3_600_000.0,
    "m": 60_000.0,
    "s": 1000.0,
    "ms": 1.0,
    "us": 1e-3,
    "µs": 1e-3,
    "μs": 1e-3,
    "ns": 1e-6,
}
_INFERENCE_METHOD = "POST"


class GinAccessLogImporter(Importer):
    name = "gin-access-log"
    description = (
        'Gin\'s access log lines (`[GIN] 2024/12/11 - 09:58:58 | 200 | 4.7s | ... | POST "/api/chat"`): '
        "Ollama's and Go gateways' requests, under any prefix"
    )

    def recognise(self, head: str) -> Claim | None:
        found = sum(1 for line in head.splitlines() if _LINE.search(line))
        return claim(Strength.STATEMENT, found) if found >= 2 else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        rows: list[dict] = []
        other = 0
        for line in source.lines():
            found = _LINE.search(line)
            if found is None:
                continue
            if found["method"] != _INFERENCE_METHOD:
                other += 1
                continue
            latency = _duration_ms(found["latency"])
            end = local_epoch(found["stamp"].replace("/", "-").replace(" - ", " "), tz)
            if latency is None:
                continue
            rows.append(
                {
                    "ts": end - latency / 1000,
                    "latency_ms": latency,
                    "status": found["status"],  # an HTTP code: below 400 succeeded (docs/dump-format.md)
                    "operation": f"POST {found['path']}",
                }
            )
        if other:
            result.warnings.append(
                f"{counted(other, 'GET or HEAD request')} in Gin's log left out (health checks, model lists: "
                "not inference calls)"
            )
        if rows:
            result.tables["requests"] = pd.DataFrame(rows)
            result.warnings.append(zone_note("Gin's stamps", tz))
        return result


def _duration_ms(text: str) -> float | None:
    """A Go ``time.Duration`` as its String method prints it (``1h2m3.5s``, ``850µs``), in ms."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(value + unit for value, unit in parts) != text:
        return None
    try:
        return sum(float(value) * _MS[unit] for value, unit in parts)
    except ValueError:
        return None
