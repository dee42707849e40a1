"""Property-based: real samples, damaged as evidence gets damaged, never make the pipeline fail.

A short run for CI; ``benchmarks/bench_fuzz.py`` runs 10,000+ cases.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from diagnose.dump import load_dump
from diagnose.errors import DumpError
from diagnose.judge import default_rules_dir, load_rules
from tests.conftest import SHARED_DATA
from tests.helpers.fuzz import escapes
from tests.helpers.mutate import MUTATIONS

SAMPLES = sorted(
    path
    for path in (SHARED_DATA / "real-samples").rglob("*")
    if path.is_file() and path.name not in ("README.md", "SOURCES.tsv")
)
needs_samples = pytest.mark.skipif(not SAMPLES, reason="../shared/data/real-samples is not here")
mutation_lists = st.lists(st.integers(0, len(MUTATIONS) - 1), min_size=1, max_size=4)


@needs_samples
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sample=st.sampled_from(SAMPLES), mutations=mutation_lists, seed=st.integers(0, 2**31 - 1))
def test_damaged_real_samples_never_escape_an_importer_or_the_reader(sample, mutations, seed):
    with tempfile.TemporaryDirectory() as folder:
        assert escapes(sample, mutations, seed, Path(folder), analyse=False) == []


@needs_samples
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sample=st.sampled_from(SAMPLES), mutations=mutation_lists, seed=st.integers(0, 2**31 - 1))
def test_damaged_real_samples_are_analysed_end_to_end(sample, mutations, seed):
    rules = load_rules(default_rules_dir())
    with tempfile.TemporaryDirectory() as folder:
        assert escapes(sample, mutations, seed, Path(folder), analyse=True, rules=rules) == []


_cell = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.text(max_size=12),
    st.none(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=st.sampled_from(["requests", "gpu", "system", "processes", "allocator", "events"]),
    columns=st.lists(
        st.sampled_from(
            ["ts", "latency_ms", "gpu", "pid", "util_pct", "mem_used_bytes", "kind", "name", "x"]
        ),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    rows=st.integers(0, 40),
    cells=st.data(),
    suffix=st.sampled_from([".csv", ".jsonl"]),
)
def test_generated_tables_are_read_or_refused_in_one_line(table, columns, rows, cells, suffix):
    frame = pd.DataFrame({c: [cells.draw(_cell) for _ in range(rows)] for c in columns})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{table}{suffix}"
        if suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_json(path, orient="records", lines=True, default_handler=str)
        try:
            dump = load_dump(folder)
        except DumpError as error:
            assert "\n" not in str(error)
            return
        from diagnose.pipeline import analyse_dump

        report = analyse_dump(dump, load_rules(default_rules_dir())).report
        assert not [w for w in report.evidence.warnings if "This is a bug" in w]
