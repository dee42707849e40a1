"""Pseudo-optimisations: over-parallelism and memory cleaned after every request, from each form of
their evidence, and compare naming a change that made latency worse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.compare import compare_evidence, measure_both
from diagnose.dump.model import Dump, Manifest
from diagnose.facts import Facts
from diagnose.facts.memory_cleanup import add_memory_cleanup_facts
from diagnose.facts.parallelism import add_parallelism_facts

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "dumps"
T0 = 1_800_000_000.0


def _dump(**tables: pd.DataFrame) -> Dump:
    dump = Dump("/nowhere", {}, {}, Manifest(extra={"server_pids": [42]}))
    for name, frame in tables.items():
        if name in ("host_calls", "gpu_activity"):
            dump.traces[name] = frame
        else:
            dump.tables[name] = frame
    return dump


def _facts(dump: Dump) -> dict:
    facts = Facts()
    add_parallelism_facts(facts, dump)
    add_memory_cleanup_facts(facts, dump)
    return {name: fact.value for name, fact in facts.values.items()}


def _requests(seconds: int, per_second: int = 10) -> pd.DataFrame:
    ts = T0 + np.repeat(np.arange(seconds), per_second) + np.tile(np.arange(per_second) / per_second, seconds)
    return pd.DataFrame({"ts": ts + 0.05, "latency_ms": 20.0})


def _server(seconds: int, **columns: np.ndarray | float) -> pd.DataFrame:
    frame = pd.DataFrame({"ts": T0 + np.arange(seconds, dtype="float64"), "pid": 42, "name": "python"})
    return frame.assign(**columns)


def test_the_server_own_threads_filling_the_run_queue_and_preempted_are_over_parallelism_facts():
    seconds = 60
    system = pd.DataFrame(
        {
            "ts": T0 + np.arange(seconds, dtype="float64"),
            "cpu_pct": 97.0,
            "cpu_count": 4,
            "procs_running": 25,
            "cpu_system_pct": 24.0,
            "ctx_switches_per_s": 40_000.0,
        }
    )
    server = _server(
        seconds,
        cpu_pct=370.0,
        num_threads=96,
        cores_allowed=4.0,
        ctx_switches_voluntary_per_s=400.0,
        ctx_switches_involuntary_per_s=600.0,
        run_queue_wait_pct=800.0,
    )
    facts = _facts(_dump(system=system, processes=server, requests=_requests(seconds)))
    assert facts["host.run_queue_per_core.p50"] == pytest.approx(25 / 4)
    assert facts["host.cpu_system_share"] == pytest.approx(24 / 97)
    assert facts["host.server_cpu_share"] == pytest.approx(370 / 388)
    assert facts["server.threads_per_core"] == pytest.approx(24.0)
    assert facts["server.involuntary_switch_share"] == pytest.approx(0.6)
    assert facts["server.run_queue_wait_per_core.p50"] == pytest.approx(2.0)
    assert facts["server.core_share.p50"] == pytest.approx(370 / 100 / 4)


def test_the_server_of_several_workers_is_summed_and_its_cores_are_those_it_may_use():
    """Four worker processes with their threads: one service; a container quota of two cores on an
    eight-core host is what its threads share."""
    seconds = 30
    workers = pd.concat(
        [
            _server(seconds, cpu_pct=50.0, num_threads=16, cores_allowed=2.0).assign(pid=pid)
            for pid in range(1, 5)
        ]
    )
    system = pd.DataFrame({"ts": T0 + np.arange(seconds, dtype="float64"), "cpu_pct": 30.0, "cpu_count": 8})
    dump = _dump(system=system, processes=workers)
    dump.manifest.extra["server_pids"] = [1, 2, 3, 4]
    facts = _facts(dump)
    assert facts["server.processes"] == 4 and facts["server.cores"] == 2.0
    assert facts["server.threads_per_core"] == pytest.approx(64 / 2)
    assert facts["server.core_share.p50"] == pytest.approx(2.0 / 2)


def test_device_allocations_climbing_with_the_requests_and_a_cache_freed_once_differ():
    seconds, rate = 120, 10
    requests = _requests(seconds, rate)
    per_request = pd.DataFrame(
        {
            "ts": T0 + np.arange(seconds, dtype="float64"),
            "pid": 42,
            "num_device_alloc": 100 + 12 * rate * np.arange(seconds),
            "allocated_bytes": 10e9,
            "reserved_bytes": 10.01e9,
        }
    )
    facts = _facts(_dump(allocator=per_request, requests=requests))
    assert facts["allocator.device_allocs_per_request"] == pytest.approx(12.0, rel=0.02)
    assert facts["allocator.alloc_growth_share"] == 1.0
    assert facts["allocator.cached_share.p50"] == pytest.approx(0.001, rel=0.01)
    once = per_request.assign(
        num_device_alloc=100 + 30 * (np.arange(seconds) >= 60), reserved_bytes=12e9
    )  # freed once at 60 s, refilled in one interval
    facts = _facts(_dump(allocator=once, requests=requests))
    assert facts["allocator.alloc_growth_share"] == pytest.approx(1 / (seconds - 1))
    assert facts["allocator.device_allocs_per_request"] < 0.05


def test_a_counter_reset_by_a_restart_counts_nothing_for_that_interval():
    seconds = 40
    counts = np.concatenate([100 + np.arange(20), 5 + np.arange(20)])  # restarted at 20 s
    allocator = pd.DataFrame({"ts": T0 + np.arange(seconds, dtype="float64"), "num_device_alloc": counts})
    facts = _facts(_dump(allocator=allocator, requests=_requests(seconds)))
    assert facts["allocator.device_allocs"] == 38


def test_pages_faulted_while_the_resident_memory_stays_put_are_recycled_and_a_leak_is_not():
    seconds, rate = 60, 10
    requests = _requests(seconds, rate)
    churn = _server(seconds, cpu_pct=50.0, minor_faults_per_s=800.0 * rate, rss_bytes=800e6)
    churn.loc[churn.index % 2 == 0, "rss_bytes"] = 804e6
    facts = _facts(_dump(processes=churn, requests=requests))
    assert facts["server.minor_faults_per_request.p50"] == pytest.approx(800.0)
    faulted = 800 * rate * (seconds - 1) * 4096
    assert facts["server.faulted_bytes"] == pytest.approx(faulted)
    assert facts["server.fault_recycling"] == pytest.approx(faulted / 4e6)
    # A leak faults in what it keeps: the resident memory grows by what was faulted.
    leak = churn.assign(rss_bytes=800e6 + np.arange(seconds) * 800 * rate * 4096)
    facts = _facts(_dump(processes=leak, requests=requests))
    # The range is P5 to P95 of the resident memory: 90 % of a steady growth.
    assert facts["server.fault_recycling"] == pytest.approx(1 / 0.9, rel=0.05)


def _calls(steps: int, frees_every_step: bool) -> pd.DataFrame:
    rows = []
    for step in range(steps):
        base = step * 10_000.0
        if step == 0 or frees_every_step:
            rows += [{"ts": base + i * 100, "dur_us": 90.0, "kind": "runtime", "name": "cudaMalloc", "step": step}
                     for i in range(4)]  # fmt: skip
        rows.append(
            {"ts": base + 500, "dur_us": 5.0, "kind": "runtime", "name": "cudaLaunchKernel", "step": step}
        )
        rows.append(
            {"ts": base + 600, "dur_us": 5.0, "kind": "runtime", "name": "cudaMallocAsync", "step": step}
        )
        if frees_every_step:
            rows.append(
                {"ts": base + 9000, "dur_us": 120.0, "kind": "runtime", "name": "cudaFree", "step": step}
            )
    return pd.DataFrame(rows)


def test_cuda_free_in_every_step_is_the_cache_emptied_and_warm_up_mallocs_are_not():
    facts = _facts(_dump(host_calls=_calls(10, frees_every_step=True)))
    assert facts["trace.free_step_share"] == 1.0
    assert facts["trace.device_alloc_calls"] == 50  # cudaMallocAsync is the pool's, not counted
    facts = _facts(_dump(host_calls=_calls(10, frees_every_step=False)))
    assert facts["trace.free_step_share"] == 0.0 and facts["trace.device_alloc_calls"] == 4


def test_compare_names_a_change_that_made_latency_worse_a_pseudo_optimisation():
    before, after, requests = measure_both(
        str(DUMPS / "healthy-steady"), str(DUMPS / "memory-cleanup-per-request"), second=False
    )
    named = compare_evidence(before, after, requests, "torch.cuda.empty_cache() after each request")
    assert named.verdict == "regressed"
    assert named.headline.startswith("pseudo-optimisation ('torch.cuda.empty_cache() after each request'):")
    assert named.pseudo_optimisation is not None
    assert [rule for rule, _ in named.pseudo_optimisation.findings] == ["memory-cleanup-per-request"]
    assert named.to_dict()["pseudo_optimisation"]["change"].startswith("torch.cuda")
    # Without the person's words, the finding that appeared still names it.
    unnamed = compare_evidence(before, after, requests)
    assert unnamed.pseudo_optimisation is not None and unnamed.pseudo_optimisation.change is None
    # The other way round latency improved (and the GPU memory the cache keeps rose): a trade, named as
    # the regression it is in memory, never a pseudo-optimisation, whatever the change was called.
    reverse = compare_evidence(
        *measure_both(str(DUMPS / "memory-cleanup-per-request"), str(DUMPS / "healthy-steady"), second=False),
        "removed the per-request cleanup",
    )
    assert "P50 latency" in reverse.headline.split("although")[-1]
    assert reverse.pseudo_optimisation is None and not reverse.headline.startswith("pseudo")


def test_a_pasted_memory_stats_carries_the_device_allocation_counters(tmp_path):
    from diagnose.dump import load_dump

    (tmp_path / "stats.txt").write_text(
        ">>> torch.cuda.memory_stats()\n"
        "OrderedDict([('active_bytes.all.current', 2048), ('allocated_bytes.all.current', 1024), "
        "('num_alloc_retries', 0), ('num_device_alloc', 5120), ('num_device_free', 5080), "
        "('reserved_bytes.all.current', 4096)])\n",
        encoding="utf-8",
    )
    row = load_dump(str(tmp_path)).table("allocator").iloc[0]
    assert row["num_device_alloc"] == 5120 and row["num_device_free"] == 5080
    assert row["reserved_bytes"] == 4096
