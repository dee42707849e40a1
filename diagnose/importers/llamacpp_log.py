"""llama.cpp's server log: each request's own timings -> the ``requests`` table.

When a request ends, the server prints its slot's timings (``print_timings``, read in its source: the
llama.cpp copies vendored by llama-cpp-python's sdists 0.2.20 to 0.3.36) in one of three generations:

- to early 2024 (``LOG_TEE``): ``print_timings: prompt eval time = 215.60 ms / 13 tokens (...)``,
  ``print_timings: eval time = ... ms / N runs (...)``, ``print_timings: total time = ... ms``; the
  library's own ``llama_print_timings:`` lines (llama-cpp-python, ollama) say the same;
- 2024 (``LOG_INFO``: JSON, or text with ``--log-format text``): ``"msg":"prompt eval time = ..."``,
  ``"generation eval time = ... runs"``, ``"total time = ..."``, each with ``id_slot``, ``id_task``
  and the Unix ``timestamp``;
- late 2024 on (``SLT_INF``): ``slot print_timing: id 0 | task 5 |`` then ``prompt eval time = ...
  tokens``, ``eval time = ... tokens``, ``total time = ... ms / N tokens``, on continuation lines or
  each behind its slot's head (in its JSON lines mode, each a ``"msg"`` with the same clock as ``"time"``).

Each request becomes a row: the prompt's processing as ``stage_prefill_ms`` (``input_len``: the tokens
processed, a cached prefix left out) and the generation as ``stage_decode_ms`` (``output_len``:
the tokens generated; ``tpot_ms`` the server's own time per token), ``latency_ms`` the total: the
server's time on the request, not the wait for a free slot before it. The lines are printed as it ends;
its arrival is that time less the total. A line's time is its own stamp (a container's, journald's,
an ISO time; a continuation line takes its head's), else the JSON ``timestamp``, else the
server's relative ``M.SS.mmm.uuu`` stamp placed so that the last falls at the file's modification time,
else the file's modification time (said each time).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.stamps import line_stamp
from diagnose.units import counted

_MS = r"(\d+(?:\.\d+)?)\s*ms"
_TIMING_WORDS = re.compile(r"print_timing|eval time|total time")
_PROMPT = re.compile(rf"\bprompt eval time\s*=\s*{_MS}\s*/\s*(\d+)\s*tokens")
_EVAL = re.compile(rf"(?<!prompt )\b(?:generation )?eval time\s*=\s*{_MS}\s*/\s*(\d+)\s*(?:tokens|runs)")
_TOTAL = re.compile(rf"\btotal time\s*=\s*{_MS}")
_SLOT = re.compile(r"\bid\s+(\d+)\s*\|\s*task\s+(-?\d+)\s*\|")
_JSON_IDS = re.compile(r'"?id_slot"?\s*[:=]\s*(\d+).*?"?id_task"?\s*[:=]\s*(-?\d+)')
_EPOCH = re.compile(r'"?timestamp"?\s*[:=]\s*(\d{10})\b')
# common/log.cpp's prefix with timestamps on: minutes.seconds.milliseconds.microseconds since start
_RELATIVE = re.compile(r"(?:^|\s)(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) [DIWE] ")
# the same clock in its JSON lines mode: microseconds since start
_RELATIVE_JSON = re.compile(r'"type"\s*:\s*"log"\s*,\s*"time"\s*:\s*(\d+)')


class LlamaCppLogImporter(Importer):
    name = "llama-cpp-log"
    description = "llama.cpp server logs: each request's prompt and generation timings (print_timings)"

    def recognise(self, head: str) -> Claim | None:
        if not (_PROMPT.search(head) and _EVAL.search(head)):
            return None
        own = sum(1 for line in head.splitlines() if _TIMING_WORDS.search(line) or _SLOT.search(line))
        return claim(Strength.STATEMENT, own)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        year = datetime.fromtimestamp(source.mtime, UTC).year
        open_by_task: dict[object, dict] = {}
        done: list[dict] = []
        slot: tuple[int, int] | None = None  # the last "id N | task M" head seen: the lines under it are its
        stamp: tuple[str, float] | None = None  # the last timing line's time: a continuation has none
        for line in source.lines():
            if _TIMING_WORDS.search(line):  # only the timings' lines are timed: a log is mostly other lines
                stamp = _stamp(line, year, tz) or stamp
            if ids := _SLOT.search(line) or _JSON_IDS.search(line):
                slot = (int(ids.group(1)), int(ids.group(2)))
            key = slot[1] if slot is not None else None
            if prompt := _PROMPT.search(line):
                open_by_task[key] = {
                    "slot": slot,
                    "stage_prefill_ms": float(prompt.group(1)),
                    "input_len": int(prompt.group(2)),
                    "stamp": stamp,
                }
            elif (generated := _EVAL.search(line)) and key in open_by_task:
                request = open_by_task[key]
                request["stage_decode_ms"], request["output_len"] = (
                    float(generated.group(1)),
                    int(generated.group(2)),
                )
            elif (total := _TOTAL.search(line)) and key in open_by_task:
                request = open_by_task.pop(key)
                if "stage_decode_ms" not in request:
                    continue  # a total with no generation line before it: not a whole request
                request["latency_ms"] = float(total.group(1))
                request["stamp"] = stamp or request["stamp"]
                done.append(request)
        if not done:
            return result
        result.tables["requests"] = pd.DataFrame(_rows(done, source.mtime, result.warnings))
        return result


def _stamp(line: str, year: int, tz: str | None) -> tuple[str, float] | None:
    """A line's own time, and which kind: absolute (a prefix's stamp, the JSON timestamp) or relative."""
    absolute = line_stamp(line, year, tz)
    if absolute is not None:
        return "absolute", absolute
    if epoch := _EPOCH.search(line):
        return "absolute", float(epoch.group(1))
    if relative := _RELATIVE.search(line):
        minutes, seconds, ms, us = (int(g) for g in relative.groups())
        return "relative", minutes * 60 + seconds + ms / 1e3 + us / 1e6
    if relative_json := _RELATIVE_JSON.search(line):
        return "relative", int(relative_json.group(1)) / 1e6
    return None


def _rows(done: list[dict], mtime: float, warnings: list[str]) -> list[dict]:
    relative = [r["stamp"][1] for r in done if r["stamp"] and r["stamp"][0] == "relative"]
    last_relative = max(relative, default=0.0)
    unstamped = sum(1 for r in done if r["stamp"] is None)
    if relative:
        warnings.append(
            f"{counted(len(relative), 'request')} timed by the server's clock since its start: placed so "
            "that the last ends at the file's modification time"
        )
    if unstamped:
        warnings.append(
            f"{counted(unstamped, 'request')} with no time of its own: taken at the file's modification "
            "time (their latencies are theirs; when they came is not known)"
        )
    rows = []
    for request in done:
        kind, at = request["stamp"] or ("none", mtime)
        ended = mtime - (last_relative - at) if kind == "relative" else at
        slot = request["slot"]
        output = request["output_len"]
        rows.append(
            {
                "ts": ended - request["latency_ms"] / 1e3 if kind != "none" else ended,
                "id": str(slot[1]) if slot is not None else None,
                "worker": f"slot {slot[0]}" if slot is not None else None,
                "latency_ms": request["latency_ms"],
                "stage_prefill_ms": request["stage_prefill_ms"],
                "stage_decode_ms": request["stage_decode_ms"],
                "tpot_ms": request["stage_decode_ms"] / output if output else None,
                "input_len": request["input_len"],
                "output_len": output,
            }
        )
    return rows
