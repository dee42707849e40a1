"""The committed fixtures obey the physics of the machines they pretend to come from.

A fixture where a thread uses more CPU than its process, or PyTorch reserves
more memory than its process holds on the GPU, teaches the rules things no
real dump can show. Each invariant is checked on every committed dump that holds
its evidence: which dump holds what is kept in tests/fixture_evidence.json, read
at collection (finding it by loading every dump cost each test process seconds),
and checked against the dumps themselves by the last test here; after adding or
changing a fixture, ``UPDATE_GOLDEN=1 pytest tests/test_fixture_invariants.py``
rewrites it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.engines.oom import parse_oom_message
from tests.conftest import DUMPS

FIXTURES = DUMPS.parent
RECORDED = FIXTURES / "recorded"  # real recordings of the testbed: the physics must hold there too
PAIRS = FIXTURES / "pairs"  # the before/after pairs of diagnose compare
FOLDERS = (
    sorted(path for path in DUMPS.iterdir() if path.is_dir())
    + sorted(RECORDED.glob("*/dump"))
    + sorted(PAIRS.glob("*/before"))
    + sorted(PAIRS.glob("*/after"))
    + sorted((FIXTURES / "recorded-pairs").glob("*/*/"))
)
INDEX = Path(__file__).with_name("fixture_evidence.json")
KINDS = ("allocator", "gpu", "oom figures", "system", "thread figures")
_FOUND: dict[str, list[str]] = {}  # what each dump loaded here held, by its name in the index


def _named(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def _oom_figures(dump) -> list:
    """The OOM messages of the dump's events that state what was free and what was asked."""
    events = dump.table("events")
    if events is None or "message" not in events.columns:
        return []
    messages = [parse_oom_message(str(m)) for m in events.loc[events["kind"] == "oom", "message"]]
    return [m for m in messages if m is not None and m.free_bytes is not None and m.requested_bytes]


def _evidence(dump) -> list[str]:
    """What of the dump an invariant reads."""
    processes = dump.table("processes")
    has = {name for name in ("gpu", "allocator", "system") if dump.table(name) is not None}
    has |= {"thread figures"} if processes is not None and "max_thread_cpu_pct" in processes else set()
    has |= {"oom figures"} if _oom_figures(dump) else set()
    return sorted(has)


def dumps_with(evidence: str) -> pytest.MarkDecorator:
    """Each invariant runs on the dumps that hold its evidence (the index), so a skip never stands for a
    table a fixture simply lacks."""
    index = json.loads(INDEX.read_text(encoding="utf-8")) if INDEX.exists() else {}
    folders = [folder for folder in FOLDERS if evidence in index.get(_named(folder), ())]
    return pytest.mark.parametrize("dump", folders, ids=_named, indirect=True)


@pytest.fixture(scope="module")
def dump(request):
    loaded = load_dump(str(request.param))
    _FOUND[_named(request.param)] = _evidence(loaded)
    return loaded


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


def test_the_index_says_what_each_dump_holds_and_every_kind_is_held_somewhere():
    """Run last: the dumps the invariants loaded are not loaded again. An invariant whose evidence no
    fixture holds would check nothing, silently."""
    found = {
        _named(folder): _FOUND[_named(folder)]
        if _named(folder) in _FOUND
        else _evidence(load_dump(str(folder)))
        for folder in FOLDERS
    }
    if os.environ.get("UPDATE_GOLDEN"):
        lines = [f"  {json.dumps(name)}: {json.dumps(found[name])}" for name in sorted(found)]
        INDEX.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    index = json.loads(INDEX.read_text(encoding="utf-8"))
    stale = sorted(name for name in found.keys() | index.keys() if found.get(name) != index.get(name))
    assert not stale, (
        f"{INDEX.name} is out of date for {stale}: UPDATE_GOLDEN=1 pytest tests/{Path(__file__).name}"
    )
    assert set().union(*map(set, found.values())) == set(KINDS)
