"""SGLang server logs: the scheduler's batch lines, its retractions, and its start-up figures.

SGLang's scheduler logs a line per prefill batch and one every few dozen decode
steps, each a list of ``key: value`` fields whose set has changed from release
to release (``Decode batch.`` became ``Decode batch,``; ``cuda graph``,
``full token usage`` and ``input throughput`` came later; a hit rate became
``#cached-token``). The fields are read by name, whatever their order or
neighbours:

| field | server column |
|---|---|
| #running-req | running |
| #queue-req | queue_depth |
| token usage (full token usage on hybrid models), 0-1 | kv_cache_usage_pct (x 100) |
| gen throughput (token/s), decode lines | tokens_per_s |
| input throughput (token/s), prefill lines | prompt_tokens_per_s |
| cache hit rate, or #cached-token over #cached-token + #new-token | prefix_cache_hit_pct |

A retraction ("Decode out of memory happened", "KV cache pool is full.
Retract requests.") is SGLang's preemption: running requests are pushed back
to the queue because the KV pool has no room for their next tokens, so it
becomes a ``preemption`` event with the number of requests retracted. The
start-up capacity lines (``max_total_num_tokens=...``, ``KV Cache is
allocated. #tokens: N``) become ``kv_cache_config`` events, the arguments'
dump (``server_args=ServerArgs(``) a ``restart``, "The server is fired up and
ready to roll!" the end of warm-up, a scheduler exception or a child's
sigquit the engine's death, and a watchdog timeout a stall.

Every tensor-parallel rank logs the same batch: only the lowest rank's lines
(``TP0``, or ``DP0 TP0``) are kept, and the report says how many ranks were
left out. Stamps are ``[YYYY-MM-DD HH:MM:SS TPn]`` in the server's zone, or
``[HH:MM:SS TPn]`` in releases of 2024, whose date is the file's.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.engines.failures import SGLANG_DEAD, STALLED
from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, local_epoch, zone_note
from diagnose.importers.oom_log import OomScanner
from diagnose.units import counted

# "[2025-02-27 04:46:39 TP0] ", "[16:43:29 TP0] ", "[2025-05-14 09:31:43] ", "[... DP1 TP1 EP1] ";
# the opening bracket may be cut off a pasted first line.
_STAMP = re.compile(
    r"^\[?(?:(?P<date>\d{4}-\d{2}-\d{2})[ T])?(?P<clock>\d{2}:\d{2}:\d{2})(?:[.,]\d+)?"
    r"(?P<rank>(?:\s+[A-Z]{2,4}\d+)*)\s*\]\s*"
)
_OLD_RANK = re.compile(r"^\[gpu=(\d+)\]\s*")  # 2024's "[gpu=0] Decode batch. ..."
_BATCH_LINE = re.compile(r"(?:Prefill|Decode) batch[.,]? #(?:new-seq|running-req)")
_BATCH = re.compile(r"\b(Prefill|Decode) batch\b[.,]?")
# One field: a name (words, '#', '-', '_', a parenthesised unit) then a number, a percentage or a flag.
_FIELD = re.compile(r"(#?[A-Za-z][\w\- ]*?(?: \([\w/]+\))?):\s*(-?\d+(?:\.\d+)?%?|True|False)")
_RETRACTED = re.compile(
    r"(?:Decode out of memory happened|KV cache pool is full\. Retract requests)\.?.*?#retracted_reqs: (\d+)"
)
_CAPACITY = re.compile(r"max_total_num_tokens=\d+|KV Cache is allocated\. #tokens: \d+")
_STARTED = re.compile(r"server_args=ServerArgs\(")
_WARMED_UP = re.compile(r"The server is fired up and ready to roll")
_SAME_START_S = 300.0


class SglangLogImporter(Importer):
    name = "sglang-log"
    description = "SGLang server logs: prefill/decode batch lines, retractions, start-up KV capacity"

    def recognise(self, head: str) -> Claim | None:
        said = (_BATCH_LINE, _RETRACTED, _WARMED_UP, _STARTED)
        lines = head.splitlines()
        statements = sum(1 for line in lines if any(p.search(line) for p in said))
        if not statements:
            return None
        in_format = sum(1 for line in lines if _STAMP.match(line) or _OLD_RANK.match(line))
        return claim(Strength.STATEMENT, max(statements, in_format))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        clock = _Clock(source.mtime, tz)
        ooms = OomScanner(source.mtime, serving_engine=True, tz=tz)
        ranks: set[str] = set()
        said: list[tuple[str | None, dict]] = []  # (rank, a batch row or an event), in the log's order
        for number, line in enumerate(source.lines(), start=1):
            ooms.feed(line)
            stamped, rank, body = _parse(line)
            ranks |= {rank} if rank is not None else set()
            ts = clock.stamp(stamped)
            stamp = ts if ts is not None else source.mtime
            if (batch := _BATCH.search(body)) and (row := _batch_row(batch.group(1), body[batch.end() :])):
                said.append((rank, {"ts": stamp, **row}))
            kind, extra = _event(body)
            if kind is not None:
                event = {"ts": stamp, "kind": kind, **extra, "message": line.strip()[:500], "line": number}
                said.append((rank, event))
        # Each rank logs its own copy of a batch: the lowest rank's are read, known once every line is.
        lead = min(ranks, key=_rank_order) if ranks else None
        rows: list[dict] = []
        events: list[dict] = []
        for rank, entry in said:
            from_lead = rank is None or rank == lead
            kind = entry.get("kind")
            if kind is None:
                rows += [entry] if from_lead else []
                continue
            if kind in ("preemption", "kv_cache_config") and not from_lead:
                continue
            if any(e["kind"] == kind and abs(e["ts"] - entry["ts"]) < _window(kind) for e in events[-8:]):
                continue  # the same event logged by another rank, or a restart's second line
            events.append(entry)
        events += ooms.events()
        if rows:
            result.tables["server"] = pd.DataFrame(rows)
        if events:
            result.tables["events"] = pd.DataFrame(events)
        if result.tables:
            result.warnings.append(zone_note("SGLang log times", tz))
            if clock.undated:
                day = datetime.fromtimestamp(source.mtime, UTC).date()
                result.warnings.append(
                    f"{counted(clock.undated, 'SGLang line')} stamped with a time and no date: read on "
                    f"{day}, the file's modification date"
                )
            if lead is not None and len(ranks) > 1:
                result.warnings.append(
                    f"read the batches of rank {lead.strip()}: each of the {len(ranks)} ranks logs its own "
                    "copy of them, the others left out"
                )
        return result


def _parse(line: str) -> tuple[re.Match[str] | None, str | None, str]:
    """The line's stamp, its rank label (None when it has none) and what follows them."""
    if m := _STAMP.match(line):
        return m, (m.group("rank").strip() or None), line[m.end() :]
    if m := _OLD_RANK.match(line):
        return None, f"TP{m.group(1)}", line[m.end() :]
    return None, None, line


def _rank_order(rank: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", rank))


def _window(kind: str) -> float:
    return _SAME_START_S if kind == "restart" else 1.0


def _batch_row(kind: str, fields: str) -> dict[str, float]:
    values = {name.strip().lower(): value for name, value in _FIELD.findall(fields)}

    def number(*names: str) -> float | None:
        for name in names:
            if (text := values.get(name)) is not None and text not in ("True", "False"):
                return float(text.rstrip("%"))
        return None

    row: dict[str, float] = {}
    for column, names in (("running", ("#running-req",)), ("queue_depth", ("#queue-req",))):
        if (value := number(*names)) is not None:
            row[column] = value
    if (usage := number("full token usage", "token usage")) is not None:
        row["kv_cache_usage_pct"] = usage * 100.0
    if kind == "Decode" and (rate := number("gen throughput (token/s)")) is not None:
        row["tokens_per_s"] = rate
    if kind == "Prefill":
        if (rate := number("input throughput (token/s)")) is not None:
            row["prompt_tokens_per_s"] = rate
        hit = number("cache hit rate")
        cached, new = number("#cached-token"), number("#new-token")
        if hit is None and cached is not None and new is not None and cached + new > 0:
            hit = 100.0 * cached / (cached + new)
        if hit is not None:
            row["prefix_cache_hit_pct"] = hit
    return row


def _event(body: str) -> tuple[str | None, dict]:
    if m := _RETRACTED.search(body):
        return "preemption", {"mode": "RETRACT", "requests": int(m.group(1))}
    for pattern, kind in (
        (_CAPACITY, "kv_cache_config"),
        (STALLED, "engine_stall"),
        (SGLANG_DEAD, "engine_dead"),
        (_STARTED, "restart"),
        (_WARMED_UP, "warmup_end"),
    ):
        if pattern.search(body):
            return kind, {}
    return None, {}


class _Clock:
    """A line's stamp as epoch seconds; a time with no date goes on the file's date, rolling over midnight."""

    def __init__(self, mtime: float, tz: str | None) -> None:
        self._tz = tz
        self._day = datetime.fromtimestamp(mtime, UTC).date()
        self._last: float | None = None
        self._days_on = 0.0
        self.undated = 0

    def stamp(self, m: re.Match[str] | None) -> float | None:
        """``m``: the line's match of the stamp pattern."""
        if not m:
            return None
        if m.group("date"):
            epoch = local_epoch(f"{m.group('date')}T{m.group('clock')}", self._tz)
        else:
            self.undated += 1
            epoch = local_epoch(f"{self._day.isoformat()}T{m.group('clock')}", self._tz) + self._days_on
            if self._last is not None and epoch < self._last - 12 * 3600:
                self._days_on += 86_400.0  # past midnight
                epoch += 86_400.0
        if epoch != epoch:
            return None
        self._last = epoch
        return epoch
