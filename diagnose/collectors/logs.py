"""Events from log lines: PyTorch CUDA OOM messages, NVIDIA Xid errors, profilers started or stopped,
and what the statement catalogue knows (statements/: an engine that stalled, waited, died, ran out of
KV cache, started), with a service's own "watchdog timeout" besides (diagnose/engines/failures.py):
a statement seen live is the same event as one found in a file afterwards.

A profiler line is one that names a profiler (or profiling) and says it
started or stopped: vLLM's ``Profiler started.`` after ``POST /start_profile``,
SGLang's ``Profiling starts``, a service's own ``profiler enabled``. A line
that says a profiler is *not* on is neither.
"""

from __future__ import annotations

import re

from diagnose.engines.failures import engine_failure_kind
from diagnose.engines.oom import is_oom_message
from diagnose.statements import builtin_finder

_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")
_PROFILER = re.compile(r"\bprofil(?:er|ing)\b", re.IGNORECASE)
_STARTED = re.compile(r"\b(?:started|starts|enabled|is on|turned on)\b", re.IGNORECASE)
_STOPPED = re.compile(r"\b(?:stopped|stops|disabled|done|finished|is off|turned off)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:not|no|never|cannot|failed)\b|n't\b", re.IGNORECASE)


def events_from_lines(lines: list[str], ts: float, source: str) -> list[dict]:
    events = []
    for line in lines:
        if is_oom_message(line):
            events.append({"ts": ts, "kind": "oom", "message": line.strip(), "source": source})
            continue
        stated = next(builtin_finder().find(line), None)
        if stated is not None and stated.statement.event not in _READ_HERE:
            figures = {k: v for k, v in stated.figures.items() if k not in _FIELDS}
            event = {"ts": ts, "kind": str(stated.statement.event), "message": line.strip(), "source": source}
            events.append({**figures, **event, "statement": stated.statement.id})
            continue
        if (kind := engine_failure_kind(line) or _profiler_kind(line)) is not None:
            events.append({"ts": ts, "kind": kind, "message": line.strip(), "source": source})
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


_READ_HERE = frozenset({"oom", "xid"})  # read above and below with their own figures
_FIELDS = frozenset({"ts", "kind", "message", "source", "statement"})


def _profiler_kind(line: str) -> str | None:
    if not _PROFILER.search(line) or _NEGATED.search(line):
        return None
    if _STOPPED.search(line):
        return "profiler_stop"
    if _STARTED.search(line):
        return "profiler_start"
    return None
