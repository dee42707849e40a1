"""The JSON report: one object on stdout, stable per docs/report-json.md."""

from __future__ import annotations

import json


def render_json(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
