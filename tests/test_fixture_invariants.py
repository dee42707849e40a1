"""The committed fixtures obey the physics of the machines they pretend to come from.

A fixture where a thread uses more CPU than its process, or PyTorch reserves
more memory than its process holds on the GPU, teaches the rules things no
real dump can show. Each invariant is checked on every committed dump.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.oom import parse_oom_message
from tests.conftest import DUMPS

RECORDED = DUMPS.parent / "recorded"  # real recordings of the testbed: the physics must hold there too
PAIRS = DUMPS.parent / "pairs"  # the before/after pairs of diagnose compare
FOLDERS = (
    sorted(path for path in DUMPS.iterdir() if path.is_dir())
    + sorted(RECORDED.glob("*/dump"))
    + sorted(PAIRS.glob("*/before"))
    + sorted(PAIRS.glob("*/after"))
    + sorted((DUMPS.parent / "recorded-pairs").glob("*/*/"))
)


@pytest.fixture(
    scope="module",
    params=FOLDERS,
    ids=lambda path: (
        path.name if path.parent == DUMPS else f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
    ),
)
def dump(request):
    return load_dump(str(request.param))


def _by_gpu_second(frame: pd.DataFrame) -> pd.DataFrame:
    keyed = frame.assign(second=frame["ts"].round(3))
    return keyed.groupby(["second", "gpu"])["mem_used_bytes"].sum()


def test_a_gpu_holds_at_least_its_processes_memory_and_at_most_its_own(dump):
    gpu, processes = dump.table("gpu"), dump.table("gpu_processes")
    if gpu is None:
        pytest.skip("no gpu table")
    assert (gpu["mem_used_bytes"] <= gpu["mem_total_bytes"]).all()
    if processes is None:
        return
    card = gpu.assign(second=gpu["ts"].round(3)).set_index(["second", "gpu"])["mem_used_bytes"]
    held = _by_gpu_second(processes)
    both = held.index.intersection(card.index)
    assert len(both) > 0
    assert (card.loc[both] >= held.loc[both]).all(), "a GPU shows less memory than its processes hold"


def test_clocks_and_shares_stay_within_their_ranges(dump):
    gpu = dump.table("gpu")
    if gpu is None:
        pytest.skip("no gpu table")
    assert gpu["util_pct"].between(0, 100).all()
    if {"sm_clock_mhz", "max_sm_clock_mhz"} <= set(gpu.columns):
        assert (gpu["sm_clock_mhz"] <= gpu["max_sm_clock_mhz"]).all()


def test_the_allocator_reserves_within_its_process_and_allocates_within_its_reserve(dump):
    allocator, processes = dump.table("allocator"), dump.table("gpu_processes")
    if allocator is None:
        pytest.skip("no allocator table")
    assert (allocator["allocated_bytes"] <= allocator["reserved_bytes"]).all()
    if processes is None:
        return
    held = processes.assign(second=processes["ts"].round(3)).set_index(["second", "pid"])["mem_used_bytes"]
    reserved = allocator.assign(second=allocator["ts"].round(3)).set_index(["second", "pid"])[
        "reserved_bytes"
    ]
    both = reserved.index.intersection(held.index)
    assert len(both) > 0
    assert (reserved.loc[both] <= held.loc[both]).all(), "PyTorch reserves more than its process holds"


def test_a_thread_never_uses_more_cpu_than_its_process(dump):
    processes = dump.table("processes")
    if processes is None or "max_thread_cpu_pct" not in processes.columns:
        pytest.skip("no per-thread figures")
    known = processes.dropna(subset=["max_thread_cpu_pct", "cpu_pct"])
    assert (known["max_thread_cpu_pct"] <= known["cpu_pct"]).all()


def test_host_memory_and_cpu_stay_within_the_machine(dump):
    system = dump.table("system")
    if system is None:
        pytest.skip("no system table")
    assert system["cpu_pct"].between(0, 100).all()
    assert (system["mem_used_bytes"] <= system["mem_total_bytes"]).all()


def test_an_oom_happens_only_when_the_card_has_less_free_than_was_asked(dump):
    events = dump.table("events")
    if events is None or "message" not in events.columns:
        pytest.skip("no events")
    messages = [parse_oom_message(str(m)) for m in events.loc[events["kind"] == "oom", "message"]]
    parsed = [m for m in messages if m is not None and m.free_bytes is not None and m.requested_bytes]
    if not parsed:
        pytest.skip("no OOM with figures")
    assert all(m.free_bytes < m.requested_bytes for m in parsed)
    gpu = dump.table("gpu")
    if gpu is not None:
        total = float(np.median(gpu["mem_total_bytes"]))
        assert all(abs(m.total_bytes - total) <= 0.01 * total for m in parsed if m.total_bytes)
