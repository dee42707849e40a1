"""A profile's DataLoader fetches: PyTorch marks each with a record_function named
``enumerate(DataLoader)#<iterator class>.__next__`` (torch/utils/data/dataloader.py); the time inside them
is the model waiting for its input."""

from __future__ import annotations

import json

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from tests.test_profiler_table import HOST_TOTAL_US, ROWS, _new_table

_FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _event(cat: str, name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {}}


def test_a_summary_cut_before_its_footer_gives_the_fetches_share_of_its_self_cpu(tmp_path):
    # the fetch first, as sort_by="cpu_time_total" prints it: 90 ms of CPU total, 60 ms of it its own
    rows = [(_FETCH, 60_000.0, 90_000.0, 0.0, 0.0, 100), *ROWS]
    total = HOST_TOTAL_US + 60_000.0
    table = _new_table(rows).replace(f"{HOST_TOTAL_US / 1000:.3f}ms", f"{total / 1000:.3f}ms")
    for self_us in (row[1] for row in rows):  # the shares of this table's total
        table = table.replace(f"{self_us / HOST_TOTAL_US:.2%}", f"{self_us / total:.2%}")
    (tmp_path / "profile.txt").write_text(table[: table.index("Self CPU time total")])
    facts = compute_facts(load_dump(str(tmp_path)))
    assert facts.number("trace.data_loading_share") == pytest.approx(90_000.0 / total, rel=1e-3)


def test_a_trace_gives_the_time_inside_the_fetches_over_its_host_span(tmp_path):
    events = []
    for step in range(3):
        start = step * 1000.0
        events += [
            _event("user_annotation", _FETCH.replace("Single", "MultiProcessing"), start, 600.0),
            _event("cpu_op", "aten::conv2d", start + 600.0, 400.0),
        ]
    (tmp_path / "trace.json").write_text(json.dumps({"traceEvents": events}))
    facts = compute_facts(load_dump(str(tmp_path)))
    assert facts.number("trace.data_loading_share") == pytest.approx(1800.0 / 3000.0)


def test_a_profile_without_a_dataloader_has_no_such_share(tmp_path):
    (tmp_path / "profile.txt").write_text(_new_table())
    assert "trace.data_loading_share" not in compute_facts(load_dump(str(tmp_path))).values
