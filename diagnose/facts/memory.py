"""Allocator figures and OOM events: is memory short, or stranded?"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from diagnose.dump.model import Dump
from diagnose.engines.oom import (
    EXHAUSTION,
    EXHAUSTION_OTHER_PROCESS,
    EXHAUSTION_REQUEST_TOO_LARGE,
    FRAGMENTATION,
    OomMessage,
    explain_oom,
    parse_oom_message,
    stranded_share,
)
from diagnose.facts.model import Facts, OomClass
from diagnose.units import counted

# When several OOMs disagree, the one most telling about the cause is reported.
_PRECEDENCE = (FRAGMENTATION, EXHAUSTION_REQUEST_TOO_LARGE, EXHAUSTION_OTHER_PROCESS, EXHAUSTION)


def add_allocator_facts(facts: Facts, dump: Dump) -> None:
    allocator = dump.table("allocator")
    if allocator is None:
        return
    source = dump.source("allocator")
    by_pid = allocator.groupby("pid") if "pid" in allocator.columns else [(None, allocator)]
    if {"reserved_bytes", "allocated_bytes"} <= set(allocator.columns):
        stranded = allocator["reserved_bytes"] - allocator["allocated_bytes"]
        share = stranded / allocator["reserved_bytes"].where(allocator["reserved_bytes"] > 0)
        cite = f"{source}: reserved_bytes - allocated_bytes"
        facts.add("allocator.stranded_bytes.max", _number(stranded.max()), cite)
        facts.add("allocator.stranded_share.max", _number(share.max()), cite)
    if "largest_free_block_bytes" in allocator.columns:
        facts.add(
            "allocator.largest_free_block_bytes.min",
            _number(allocator["largest_free_block_bytes"].min()),
            f"{source}: largest_free_block_bytes",
        )
    for column, name in (("num_alloc_retries", "allocator.alloc_retries"), ("num_ooms", "allocator.ooms")):
        if column in allocator.columns:
            growth = sum(_counter_growth(group[column]) for _, group in by_pid)
            facts.add(name, int(growth), f"{source}: {column}, growth over the dump")


def add_oom_facts(facts: Facts, dump: Dump) -> None:
    events = dump.table("events")
    if events is None:
        return
    source = dump.source("events")
    kinds = events["kind"].astype("string").str.lower()
    ooms = events.loc[kinds == "oom"]
    facts.add("oom.count", len(ooms), f"{source}: kind=oom")
    read = [
        (row, oom) for row, oom in ((row, _event_oom(row)) for _, row in ooms.iterrows()) if oom is not None
    ]
    parsed = [oom for _, oom in read]
    if not parsed:
        return
    cite = f"{source}: OOM message figures, {counted(len(parsed), 'event')}"
    # An importer that knew the message's context (a serving engine's log) classified it already.
    verdicts = [
        (row["oom_class"], str(row.get("oom_reason") or ""))
        if isinstance(row.get("oom_class"), str)
        else explain_oom(oom)
        for row, oom in read
    ]
    kinds_found = [kind for kind, _ in verdicts]
    facts.summary.ooms = _verdict_summary(verdicts)
    facts.add("oom.parsed", len(parsed), cite)
    facts.add("oom.fragmentation_count", kinds_found.count(FRAGMENTATION), cite)
    facts.add("oom.exhaustion_count", sum(k.startswith(EXHAUSTION) for k in kinds_found), cite)
    ranked = sorted(
        zip(verdicts, parsed, strict=True),
        key=lambda pair: (
            _PRECEDENCE.index(pair[0][0]) if pair[0][0] in _PRECEDENCE else len(_PRECEDENCE),
            -_stranded_ratio(pair[1]),
        ),
    )
    (kind, reason), oom = ranked[0]
    facts.add("oom.kind", kind, cite)
    facts.add("oom.reason", reason or None, cite)
    for field in ("requested_bytes", "total_bytes", "free_bytes", "reserved_unallocated_bytes"):
        facts.add(f"oom.{field}", getattr(oom, field), cite)
    if oom.requested_bytes and oom.reserved_unallocated_bytes is not None:
        facts.add("oom.stranded_over_request", oom.reserved_unallocated_bytes / oom.requested_bytes, cite)
    facts.add("oom.stranded_card_share", stranded_share(oom), cite)
    facts.add("oom.other_processes_bytes", oom.other_processes_bytes, cite)


def _verdict_summary(verdicts: list[tuple[str, str]]) -> list[OomClass]:
    """Each class of OOM found, how often, and the reason given for its first one."""
    counts = Counter(kind for kind, _ in verdicts)
    first = {kind: reason for kind, reason in reversed(verdicts)}
    return [OomClass(kind, count, first[kind]) for kind, count in counts.most_common()]


def _stranded_ratio(oom: OomMessage) -> float:
    """Reserved-but-unallocated over the request: the strongest fragmentation evidence is reported."""
    if not oom.requested_bytes or oom.reserved_unallocated_bytes is None:
        return 0.0
    return oom.reserved_unallocated_bytes / oom.requested_bytes


def _event_oom(row: pd.Series) -> OomMessage | None:
    """Figures from structured fields when the event has them, else from its message."""
    requested = _number(row.get("requested_bytes"))
    if requested is not None:
        return OomMessage(
            requested_bytes=requested,
            total_bytes=_number(row.get("total_bytes")),
            free_bytes=_number(row.get("free_bytes")),
            allocated_bytes=_number(row.get("allocated_bytes")),
            reserved_unallocated_bytes=_number(row.get("reserved_unallocated_bytes")),
            process_in_use_bytes=_number(row.get("process_in_use_bytes")),
        )
    message = row.get("message")
    return parse_oom_message(message) if isinstance(message, str) else None


def _counter_growth(counter: pd.Series) -> float:
    """Increase of a cumulative counter, counting resets (a restart) as starting from zero."""
    values = counter.dropna().to_numpy(dtype="float64")
    if values.size < 2:
        return 0.0
    steps = values[1:] - values[:-1]
    return float(steps[steps > 0].sum() + values[1:][steps < 0].sum())


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if number == number else None
