"""Turn the lines of a service's request log (JSONL or CSV) into rows of the requests table.

Columns are those of docs/dump-format.md; ``--map`` renames others
(``--map duration=latency_ms,t=ts``). A line that cannot be read is counted,
not fatal: a log written while the recorder runs can have a torn line.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass

from diagnose.collectors.follow import FileFollower
from diagnose.errors import InputError


def parse_map(text: str | None, option: str = "--map", pair: str = "SOURCE=COLUMN") -> dict[str, str]:
    """``"duration=latency_ms,t=ts"`` -> ``{"duration": "latency_ms", "t": "ts"}``.

    Every ``NAME=VALUE,...`` option of the recorder is read here; ``option`` and
    ``pair`` name it in the error.
    """
    if not text:
        return {}
    mapping = {}
    for item in text.split(","):
        source, sep, target = item.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise InputError(f"{option}: expected {pair} pairs separated by commas, got {item!r}")
        mapping[source.strip()] = target.strip()
    return mapping


@dataclass
class RequestLog:
    follower: FileFollower
    mapping: dict[str, str]
    format: str  # "jsonl" or "csv"
    unreadable: int = 0

    @classmethod
    def open(cls, path: str, mapping: dict[str, str], format: str = "auto") -> RequestLog:
        follower = FileFollower(path)
        if format == "auto":
            format = "csv" if path.endswith(".csv") else "jsonl"
        return cls(follower, mapping, format)

    def rows(self) -> list[dict]:
        lines = self.follower.read_lines()
        if self.format == "csv":
            header = self.follower.header()
            if header is None:
                return []
            columns = next(csv.reader([header]))
            records = [
                dict(zip(columns, values, strict=False)) for values in csv.reader(lines) if values != columns
            ]
        else:
            records = []
            for line in lines:
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    self.unreadable += 1
                    continue
                if isinstance(value, dict):
                    records.append(value)
                else:
                    self.unreadable += 1
        rows = []
        for record in records:
            row = {self.mapping.get(key, key): value for key, value in record.items()}
            if row.get("ts") in (None, ""):
                self.unreadable += 1
                continue
            rows.append(row)
        return rows
