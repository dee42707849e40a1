"""One draw of each of the second trace generator's variations (fixtures/trace_variations.py), analysed
as diagnose file does: the true cause ranks first and is likely, and the quiet ones get no likely
finding. The trace rules were built on fixtures/kernel_trace.py; these steps share none of its code."""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.pipeline import analyse
from fixtures.trace_variations import TRACE_VARIATIONS, write_trace_variation


@pytest.mark.parametrize("variation", TRACE_VARIATIONS, ids=[v.name for v in TRACE_VARIATIONS])
def test_the_cause_ranks_first_and_quiet_traces_stay_quiet(variation, tmp_path):
    report = analyse(str(write_trace_variation(variation, tmp_path / variation.name, seed=7)))
    ranked = [(h.id, h.score) for h in report.hypotheses]
    if variation.cause is None:
        assert [h for h in ranked if h[1] >= 0.5] == [], ranked
    else:
        assert ranked and ranked[0][0] == variation.cause and ranked[0][1] >= 0.5, ranked


def test_the_older_category_names_read_as_the_newer(tmp_path):
    """The same steps written with Kernel/Runtime/Operator/Memcpy give the same kernels and host calls."""
    by_name = {v.name: v for v in TRACE_VARIATIONS}
    rows = {}
    for name in ("eager-decode", "eager-decode-old-categories"):
        dump = load_dump(str(write_trace_variation(by_name[name], tmp_path / name, seed=3)))
        rows[name] = {table: len(frame) for table, frame in dump.traces.items()}
    assert rows["eager-decode"] == rows["eager-decode-old-categories"]
    assert rows["eager-decode"]["gpu_activity"] > 1000
