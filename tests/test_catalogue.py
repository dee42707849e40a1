"""The fact catalogue is the facts the analysis produces: what rules may name, with the kind they read.

A fact computed but not catalogued cannot be used by a rule, and `diagnose rules facts` does not list
it; a catalogued fact that nothing computes is a rule condition that can never hold. docs/extending.md
says where each is added.
"""

from __future__ import annotations

import pytest

from diagnose.facts.catalogue import CATALOGUE
from tests.conftest import DUMPS

# The simulated fixtures and the testbed's recordings (a real runtime's profile among them).
COMMITTED = sorted(DUMPS.iterdir()) + sorted((DUMPS.parent / "recorded").glob("*/dump"))
# Facts no committed dump carries, each computed and checked elsewhere: the engine's start-up lines
# (vLLM's "Maximum concurrency", SGLang's max_total_num_tokens), vLLM V0's swapped-requests gauge, a
# server's full-queue statements and a profile's DataLoader fetches.
FROM_ENGINE_LOGS_ONLY = {
    "engine.kv_capacity_tokens": "tests/test_engine_findings.py, tests/test_sglang_log.py",
    "engine.max_concurrency": "tests/test_engine_findings.py, tests/test_sglang_log.py",
    "engine.swapped.max": "tests/test_engine_findings.py",
    "engine.queue_full_line": "tests/test_statements.py",
    "trace.data_loading_share": "tests/test_data_loading.py",
}


@pytest.mark.parametrize("dump", COMMITTED, ids=lambda p: p.parent.name if p.name == "dump" else p.name)
def test_every_fact_produced_is_catalogued_with_the_kind_it_has(dump, report_of):
    facts = report_of(dump)["facts"]
    unknown = sorted(set(facts) - set(CATALOGUE))
    assert not unknown, f"facts missing from diagnose/facts/catalogue.py (see docs/extending.md): {unknown}"
    for name, cited in facts.items():
        is_name = CATALOGUE[name].unit == "name"
        assert isinstance(cited["value"], str) == is_name, (name, CATALOGUE[name].unit, cited["value"])
        assert cited["source"], name


def test_every_catalogued_fact_is_produced_by_some_committed_dump(report_of):
    produced = {name for dump in COMMITTED for name in report_of(dump)["facts"]}
    never = sorted(set(CATALOGUE) - produced - set(FROM_ENGINE_LOGS_ONLY))
    assert not never, (
        f"catalogued but computed from no committed dump: {never}; give one a fixture that produces it "
        "or remove it from diagnose/facts/catalogue.py (docs/extending.md)"
    )
    assert set(FROM_ENGINE_LOGS_ONLY) <= set(CATALOGUE)
