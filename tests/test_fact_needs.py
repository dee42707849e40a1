"""Each fact's needs (diagnose/facts/needs.py) name only what a dump can hold, and are said once.

A fact that asks for a column no writer writes, an event kind nobody documents or a manifest field the
manifest has not, could never be met; the report would send a user for evidence that does not exist.
"""

from __future__ import annotations

import re

import pytest

from diagnose.dump.registry import REGISTERED, is_registered
from diagnose.facts.catalogue import CATALOGUE, LIVE, PROBES
from diagnose.facts.model import Facts
from diagnose.facts.needs import columns, either, event, every, table
from diagnose.judge.engine import _needs
from tests.test_column_registry import _section

_EVENT_KINDS = set(re.findall(r"`([a-z_]+)`", _section("## events.jsonl").split("Extra fields are kept")[0]))
_MANIFEST = set(re.findall(r"^([a-z_0-9]+):", _section("## manifest.yaml"), re.MULTILINE))


def _problem(item: str) -> str | None:
    kind, colon, name = item.partition(":")
    if colon and kind == "events":
        return None if name in _EVENT_KINDS else f"event kind {name!r} is not in docs/dump-format.md"
    if colon and kind == "manifest":
        return None if name in _MANIFEST else f"manifest field {name!r} is not in docs/dump-format.md"
    if colon and kind == "live":
        return None if name in PROBES else f"no probe {name!r} in the catalogue's PROBES"
    table_name, dot, column = item.partition(".")
    if table_name not in REGISTERED:
        return f"no table {table_name!r} in the column registry"
    if dot and not is_registered(table_name, column.replace("<name>", "name")):
        return f"{item} is not in the column registry"
    return None


@pytest.mark.parametrize("name", sorted({**CATALOGUE, **LIVE}))
def test_a_fact_needs_only_what_a_dump_or_a_probe_can_hold(name):
    spec = CATALOGUE.get(name) or LIVE[name]
    problems = [p for item in sorted(spec.needs.items()) if (p := _problem(item))]
    assert not problems, f"{name}: {'; '.join(problems)}"
    assert spec.needs.text


def test_a_live_fact_needs_its_probe_and_a_dump_fact_never_a_probe():
    for probe, names in PROBES.items():
        for name in names:
            assert LIVE[name].needs.items() == {f"live:{probe}"}, name
    assert not [n for n, spec in CATALOGUE.items() if any(i.startswith("live:") for i in spec.needs.items())]


def test_wider_needs_contain_the_narrower_and_alternatives_count():
    running = columns("server", "running")
    both = columns("server", "queue_depth", "running")
    assert running.within(both) and not both.within(running) and not both.within(both)
    either_stage = either(columns("requests", "ttft_ms"), columns("requests", "stage_decode_ms"))
    assert either_stage.within(columns("requests", "ttft_ms"))  # ttft_ms meets either
    assert not columns("requests", "ttft_ms").within(either_stage)  # either need not be ttft_ms
    assert either_stage.within(every(either_stage, columns("requests", "input_len")))
    assert table("requests").within(every(event("oom"), table("requests")))
    assert event("oom").text == "events: oom" and both.text == "server: queue_depth and running"


def test_a_skipped_rule_asks_for_the_wider_evidence_once():
    nested = [
        (narrow, wide)
        for narrow, narrow_spec in CATALOGUE.items()
        for wide, wide_spec in CATALOGUE.items()
        if narrow_spec.needs.within(wide_spec.needs)
    ]
    assert nested  # e.g. "server: running" within "server: queue_depth and running"
    facts = Facts()
    for narrow, wide in nested:
        assert _needs([narrow, wide], facts) == [CATALOGUE[wide].needs.text]
    narrow, wide = nested[0]
    facts.cannot([narrow], "too few samples")  # the evidence was there: its own reason is said
    assert _needs([narrow, wide], facts) == ["too few samples", CATALOGUE[wide].needs.text]
