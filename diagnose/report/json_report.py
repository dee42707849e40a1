"""The JSON report: one object on stdout, stable per docs/report-json.md.

The report is typed data (report/model.py) everywhere else; this is the one
place it becomes plain dicts and lists.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass

from diagnose.dump.timestamps import iso
from diagnose.report.model import Report


def render_json(report: Report) -> str:
    return json.dumps(plain(report), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def plain(value: object) -> object:
    """The report, or any part of it, as the JSON object docs/report-json.md describes."""
    if is_dataclass(value) and not isinstance(value, type):
        out = {}
        for spec in fields(value):
            item = getattr(value, spec.name)
            if item is None and spec.metadata.get("omit_if_none"):
                continue
            if spec.metadata.get("time"):
                item = [iso(t) for t in item] if isinstance(item, tuple) else iso(item)
            out[spec.metadata.get("json", spec.name)] = plain(item)
        return out
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value
