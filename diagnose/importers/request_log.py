"""A request log under any name: rows that carry the requests table's columns are a requests table.

The dump contract names the file ``requests.*``; people drop in what their service writes
(``service-requests.jsonl``, ``access-2026-06-07.csv``). A file whose rows carry what the contract's
requests table requires — an arrival time ``ts`` and ``latency_ms``, or stages it can be summed from
(``stage_<name>_ms``) — is read as one, JSON lines or CSV, whatever its name (docs/dump-format.md).
"""

from __future__ import annotations

import csv
import io
import json
import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.units import counted

_LATENCY = re.compile(r"^(?:latency_ms|stage_\w+_ms)$")
_SAMPLED = 20  # rows looked at to recognise the file


def _carries_a_request(fields: list[str]) -> bool:
    return "ts" in fields and any(_LATENCY.match(field) for field in fields)


class RequestLogImporter(Importer):
    name = "request-log"
    description = "a request log under any name: JSON lines or CSV with ts and latency_ms (or stage_*_ms)"

    def recognise(self, head: str) -> Claim | None:
        """JSON lines or CSV naming a request's figures: a shape any service's own log may have."""
        lines = [line for line in head.splitlines() if line.strip()][:_SAMPLED]
        if not lines:
            return None
        if lines[0].lstrip().startswith("{"):
            rows = [_object(line) for line in lines[:-1] or lines]  # the head's last line may be cut
            found = bool(rows) and all(row is not None and _carries_a_request(list(row)) for row in rows)
        else:
            header = next(csv.reader([lines[0]]), [])
            found = len(lines) > 1 and _carries_a_request([field.strip() for field in header])
        return claim(Strength.SHAPE, len(lines)) if found else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        text = source.text
        result = Imported()
        if text.lstrip().startswith("{"):
            rows, bad = [], 0
            for line in text.splitlines():
                if line.strip():
                    row = _object(line)
                    if row is None:
                        bad += 1
                    else:
                        rows.append(row)
            if bad:
                result.warnings.append(f"passed over {counted(bad, 'line')} that are not a JSON object")
            frame = pd.DataFrame(rows)
        else:
            frame = pd.read_csv(io.StringIO(text), skipinitialspace=True, on_bad_lines="skip")
        result.tables["requests"] = frame
        return result


def _object(line: str) -> dict | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
