"""Events from log lines: PyTorch CUDA OOM messages and NVIDIA Xid errors."""

from __future__ import annotations

import re

from diagnose.oom import is_oom_message

_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def events_from_lines(lines: list[str], ts: float, source: str) -> list[dict]:
    events = []
    for line in lines:
        if is_oom_message(line):
            events.append({"ts": ts, "kind": "oom", "message": line.strip(), "source": source})
            continue
        match = _XID.search(line)
        if match:
            events.append(
                {
                    "ts": ts,
                    "kind": "xid",
                    "xid": int(match.group(2)),
                    "device": match.group(1),
                    "message": line.strip(),
                    "source": source,
                }
            )
    return events
