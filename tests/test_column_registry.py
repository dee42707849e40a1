"""docs/dump-format.md and the column registry (diagnose/dump/registry.py) say the same, both ways.

The suite's every importer read and recorder row is held to the registry by tests/conftest.py; here the
registry is held to the document, and the writers whose columns are lists (the recorder's header,
pull's queries) to the registry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diagnose.dump.registry import REGISTERED, is_registered, unregistered
from diagnose.dump.schema import COLUMNS

DOC = Path(__file__).resolve().parents[1] / "docs" / "dump-format.md"
_NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")
_ROW = re.compile(r"^\| `([a-z_]+)` \|(.*)$")


def _without_asides(text: str) -> str:
    """The text less what is in parentheses: there the document names values and sources, not columns."""
    kept, depth = [], 0
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start : end if end > 0 else None]


def documented() -> dict[str, set[str]]:
    """Each table's columns as the document names them: the table rows' key and column cells, each
    request column's row, each event field's row."""
    tables: dict[str, set[str]] = {}
    for title in ("## Time-series tables", "## Summary tables", "## Trace tables"):
        for line in _section(title).splitlines():
            if match := _ROW.match(line):
                cells = match.group(2).split(" | ")
                names = set(_NAME.findall(_without_asides(" | ".join(cells[-2:]))))
                tables[match.group(1)] = {"ts", *names} if title.startswith("## Time") else names
    requests = _section("## requests (one row per request)")
    tables["requests"] = {m.group(1) for line in requests.splitlines() if (m := _ROW.match(line))}
    events = _section("## events.jsonl")
    tables["events"] = {
        name
        for line in events.splitlines()
        if line.startswith("| `")
        for name in _NAME.findall(line.split(" | ")[0])
    }
    tables["series"] = set(_NAME.findall(_section("## Foreign files").split("`series` table", 1)[1][:40]))
    return tables


def test_the_document_names_every_table_of_the_registry():
    assert set(documented()) == set(REGISTERED)


@pytest.mark.parametrize("table", sorted(REGISTERED))
def test_the_document_and_the_registry_name_the_same_columns(table):
    doc = documented()[table]
    assert not doc - REGISTERED[table], f"{table}: in docs/dump-format.md, not in the registry"
    assert not REGISTERED[table] - doc, f"{table}: in the registry, not in docs/dump-format.md"


def test_the_stage_columns_are_a_family_the_document_names():
    assert "`stage_<name>_ms`" in _section("## requests (one row per request)")
    assert is_registered("requests", "stage_tokenize_ms")
    assert not is_registered("requests", "stage_tokenize")


def test_the_recorders_header_is_registered():
    for table, columns in COLUMNS.items():
        assert unregistered(table, columns) == [], table


def test_pulls_queries_write_registered_columns():
    from diagnose.engines.metrics import engine_maps
    from diagnose.pull.queries import GPU, PROCESSES, SYSTEM, engine_columns

    pulled = [*SYSTEM, *GPU, *PROCESSES]
    for engine, mapping in engine_maps().items():
        names = {n for _, n, _ in mapping.gauges} | {c for _, c in mapping.rates}
        names |= {name for _, ratio in mapping.means for name in (ratio.numerator, ratio.denominator)}
        pulled += engine_columns(engine, names)
    assert len(pulled) > 50
    assert [f"{c.table}.{c.column}" for c in pulled if not is_registered(c.table, c.column)] == []


def test_an_event_field_beyond_the_registry_must_be_a_named_figure():
    assert unregistered("events", ["kind", "blocks_free"]) == ["blocks_free"]
    assert unregistered("events", ["kind", "blocks_free"], frozenset({"blocks_free"})) == []
    assert unregistered("no_such_table", ["ts"]) == ["ts"]
