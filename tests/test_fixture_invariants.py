"""The committed fixtures obey the physics of the machines they pretend to come from.

A fixture where a thread uses more CPU than its process, or PyTorch reserves
more memory than its process holds on the GPU, teaches the rules things no
real dump can show. Each invariant is checked on every committed dump.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.engines.oom import parse_oom_message
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


def _shown_as(path: Path) -> str:
    return path.name if path.parent == DUMPS else f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


def _oom_figures(dump) -> list:
    """The OOM messages of the dump's events that state what was free and what was asked."""
    events = dump.table("events")
    if events is None or "message" not in events.columns:
        return []
    messages = [parse_oom_message(str(m)) for m in events.loc[events["kind"] == "oom", "message"]]
    return [m for m in messages if m is not None and m.free_bytes is not None and m.requested_bytes]


@functools.cache
def _evidence_of_each() -> dict[Path, frozenset[str]]:
    """What each committed dump holds that an invariant reads, found once at collection: each invariant
    runs on the dumps that have its evidence, so a skip never stands for a table a fixture simply lacks."""
    held = {}
    for folder in FOLDERS:
        dump = load_dump(str(folder))
        processes = dump.table("processes")
        has = {name for name in ("gpu", "allocator", "system") if dump.table(name) is not None}
        has |= {"thread figures"} if processes is not None and "max_thread_cpu_pct" in processes else set()
        has |= {"oom figures"} if _oom_figures(dump) else set()
        held[folder] = frozenset(has)
    return held


def dumps_with(evidence: str) -> pytest.MarkDecorator:
    folders = [folder for folder, has in _evidence_of_each().items() if evidence in has]
    return pytest.mark.parametrize("dump", folders, ids=_shown_as, indirect=True)


@pytest.fixture(scope="module")
def dump(request):
    return load_dump(str(request.param))


def test_every_kind_of_evidence_an_invariant_reads_is_in_some_fixture():
    """An invariant whose evidence no fixture holds would check nothing, silently."""
    held = set().union(*_evidence_of_each().values())
    assert held == {"gpu", "allocator", "system", "thread figures", "oom figures"}


def _by_gpu_second(frame: pd.DataFrame) -> pd.DataFrame:
    keyed = frame.assign(second=frame["ts"].round(3))
    return keyed.groupby(["second", "gpu"])["mem_used_bytes"].sum()


@dumps_with("gpu")
def test_a_gpu_holds_at_least_its_processes_memory_and_at_most_its_own(dump):
    gpu, processes = dump.table("gpu"), dump.table("gpu_processes")
    assert (gpu["mem_used_bytes"] <= gpu["mem_total_bytes"]).all()
    if processes is None:
        return
    card = gpu.assign(second=gpu["ts"].round(3)).set_index(["second", "gpu"])["mem_used_bytes"]
    held = _by_gpu_second(processes)
    both = held.index.intersection(card.index)
    assert len(both) > 0
    assert (card.loc[both] >= held.loc[both]).all(), "a GPU shows less memory than its processes hold"


@dumps_with("gpu")
def test_clocks_and_shares_stay_within_their_ranges(dump):
    gpu = dump.table("gpu")
    assert gpu["util_pct"].between(0, 100).all()
    if {"sm_clock_mhz", "max_sm_clock_mhz"} <= set(gpu.columns):
        assert (gpu["sm_clock_mhz"] <= gpu["max_sm_clock_mhz"]).all()


@dumps_with("allocator")
def test_the_allocator_reserves_within_its_process_and_allocates_within_its_reserve(dump):
    allocator, processes = dump.table("allocator"), dump.table("gpu_processes")
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


@dumps_with("thread figures")
def test_a_thread_never_uses_more_cpu_than_its_process(dump):
    processes = dump.table("processes")
    known = processes.dropna(subset=["max_thread_cpu_pct", "cpu_pct"])
    assert (known["max_thread_cpu_pct"] <= known["cpu_pct"]).all()


@dumps_with("system")
def test_host_memory_and_cpu_stay_within_the_machine(dump):
    system = dump.table("system")
    assert system["cpu_pct"].between(0, 100).all()
    assert (system["mem_used_bytes"] <= system["mem_total_bytes"]).all()


@dumps_with("oom figures")
def test_an_oom_happens_only_when_the_card_has_less_free_than_was_asked(dump):
    parsed = _oom_figures(dump)
    assert all(m.free_bytes < m.requested_bytes for m in parsed)
    gpu = dump.table("gpu")
    if gpu is not None:
        total = float(np.median(gpu["mem_total_bytes"]))
        assert all(abs(m.total_bytes - total) <= 0.01 * total for m in parsed if m.total_bytes)
