"""Over-parallelism: more of the service's threads want a core at once than it may use.

Threads are not the evidence: a server keeps hundreds asleep at no cost. What
costs is threads runnable at the same moment, more of them than there are
cores: they take turns, each switched out when its time slice ends (an
involuntary context switch, where a thread that blocks on I/O or a lock leaves
voluntarily) and waiting in the run queue for the next slice. So the facts
are the host's run queue against its cores, the share of the server's context
switches that were forced rather than chosen, the time its threads waited for
a core where the recorder read it, and whose work fills the queue: the
server's own threads (over-parallelism), or another process's (co-located
contention, a rule of its own).

The cores are the ones the server may use (``cores_allowed``: its affinity
capped by its container's CPU quota) where recorded, else the host's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.processes import describe, process_ids
from diagnose.facts.model import Facts

_BUSY_HOST_PCT = 5.0  # below this the host is idle, and its system share says nothing


def _server_named(dump: Dump) -> str:
    """The server as the report names a process: ``pid 4242 (python)``, ``pids 4242, 4243 (vllm)``."""
    processes = dump.table("processes")
    assert processes is not None  # server_rows found the server's rows in it
    ids = process_ids(processes)
    mine = sorted(int(p) for p in dump.server_pids if (ids == p).any())
    named = describe(processes, ids, mine[0]) if len(mine) == 1 else f"pids {', '.join(map(str, mine))}"
    names = processes.loc[ids.isin(mine), "name"].dropna() if "name" in processes.columns else pd.Series()
    return f"{named} ({names.iloc[-1]})" if len(names) else named


def add_parallelism_facts(facts: Facts, dump: Dump) -> None:
    _add_host_facts(facts, dump)
    server = server_rows(dump)
    if server is not None:
        _add_server_facts(facts, dump, server)


def server_rows(dump: Dump) -> pd.DataFrame | None:
    """The server's processes' rows summed per sample (a service of several worker processes is one
    service): ``ts`` and whichever numeric columns the table has, with ``processes`` the count."""
    processes = dump.table("processes")
    if processes is None or "cpu_pct" not in processes.columns:
        return None
    ids = process_ids(processes)
    mine = ids.isin(list(dump.server_pids))
    if not mine.any():
        return None
    rows = processes[mine]
    columns = [
        c
        for c in (
            "cpu_pct",
            "num_threads",
            "rss_bytes",
            "minor_faults_per_s",
            "run_queue_wait_pct",
            "ctx_switches_voluntary_per_s",
            "ctx_switches_involuntary_per_s",
        )
        if c in rows.columns
    ]
    numeric = rows[columns].apply(pd.to_numeric, errors="coerce")
    summed = numeric.groupby(rows["ts"]).sum(min_count=1)
    summed["processes"] = ids[mine].groupby(rows["ts"]).nunique()
    if "cores_allowed" in rows.columns:
        summed["cores_allowed"] = (
            pd.to_numeric(rows["cores_allowed"], errors="coerce").groupby(rows["ts"]).max()
        )
    return summed.reset_index()


def _host_cores(dump: Dump) -> float | None:
    system = dump.table("system")
    if system is None or "cpu_count" not in system.columns:
        return None
    count = pd.to_numeric(system["cpu_count"], errors="coerce").dropna()
    return float(count.median()) if len(count) and count.median() > 0 else None


def _add_host_facts(facts: Facts, dump: Dump) -> None:
    system = dump.table("system")
    if system is None:
        return
    source = dump.source("system")
    cores = _host_cores(dump)
    if cores and "procs_running" in system.columns:
        running = pd.to_numeric(system["procs_running"], errors="coerce").dropna()
        if len(running):
            facts.add(
                "host.run_queue_per_core.p50",
                float(running.median() / cores),
                f"{source}: procs_running / cpu_count ({cores:.0f}), median of {len(running):,} samples",
            )
    if {"cpu_system_pct", "cpu_pct"} <= set(system.columns):
        busy = pd.to_numeric(system["cpu_pct"], errors="coerce")
        kernel = pd.to_numeric(system["cpu_system_pct"], errors="coerce")
        known = busy.notna() & kernel.notna() & (busy >= _BUSY_HOST_PCT)
        if known.any() and busy[known].sum() > 0:
            facts.add(
                "host.cpu_system_share",
                float(kernel[known].sum() / busy[known].sum()),
                f"{source}: cpu_system_pct / cpu_pct over the {int(known.sum()):,} samples the host was busy",
            )


def _add_server_facts(facts: Facts, dump: Dump, server: pd.DataFrame) -> None:
    source = dump.source("processes")
    who = (
        "the server"
        if server["processes"].max() <= 1
        else f"the server's {server['processes'].max():.0f} processes"
    )
    facts.add("server.process", _server_named(dump), f"{source}: the server's rows")
    cores, cores_from = None, ""
    if "cores_allowed" in server.columns and server["cores_allowed"].notna().any():
        cores, cores_from = float(server["cores_allowed"].median()), "cores_allowed"
    elif (host := _host_cores(dump)) is not None:
        cores, cores_from = host, "the host's cpu_count"
    if cores is None or cores <= 0:
        return
    facts.add("server.cores", cores, f"{source}: {cores_from} of {who}")
    facts.add("server.processes", int(server["processes"].max()), f"{source}: server processes at once")
    if "num_threads" in server.columns and server["num_threads"].notna().any():
        facts.add(
            "server.threads_per_core",
            float(server["num_threads"].median() / cores),
            f"{source}: num_threads of {who} / {cores_from}, median",
        )
    cpu = server["cpu_pct"].dropna()
    if len(cpu):
        facts.add(
            "server.core_share.p50",
            float(cpu.median() / 100 / cores),
            f"{source}: cpu_pct of {who} / 100 / {cores_from}, median",
        )
    _add_switch_facts(facts, server, cores, f"{source}: {who}")
    _add_pool_facts(facts, dump, int(server["processes"].max()), cores, cores_from)
    if "run_queue_wait_pct" in server.columns:
        wait = server["run_queue_wait_pct"].dropna()
        if len(wait):
            facts.add(
                "server.run_queue_wait_per_core.p50",
                float(wait.median() / 100 / cores),
                f"{source}: run_queue_wait_pct of {who} (its threads' time runnable but waiting for a "
                f"core) / {cores_from}, median",
            )
    _add_host_share(facts, dump, server, who)
    _add_threads_with_requests(facts, dump, server, who)


_MIN_PAIRED = 30  # samples with both the thread count and the requests held


def _add_threads_with_requests(facts: Facts, dump: Dump, server: pd.DataFrame, who: str) -> None:
    """Whether the server's thread count follows the requests it holds (waiting and running, by the
    engine's gauges): a server that starts a thread per connection (llama.cpp's HTTP pool, a
    thread-per-request server) has more threads than cores because its queue is long, not because a
    pool was sized past them."""
    engine = dump.table("server")
    if engine is None or "num_threads" not in server.columns:
        return
    held_columns = [c for c in ("queue_depth", "running") if c in engine.columns]
    if not held_columns:
        return
    held = engine[held_columns].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=1)
    joined = pd.merge_asof(
        server[["ts", "num_threads"]].dropna().sort_values("ts"),
        pd.DataFrame({"ts": pd.to_numeric(engine["ts"], errors="coerce"), "held": held})
        .dropna()
        .sort_values("ts"),
        on="ts",
        direction="nearest",
        tolerance=1.5,  # type: ignore[arg-type]  # a float key takes a float tolerance
    ).dropna()
    if len(joined) < _MIN_PAIRED or joined["held"].nunique() < 3 or joined["num_threads"].nunique() < 3:
        return
    cite = (
        f"{dump.source('processes')}: num_threads of {who} against {' + '.join(held_columns)} "
        f"({dump.source('server')}), {len(joined):,} samples"
    )
    facts.add(
        "server.threads_follow_requests", float(joined["num_threads"].corr(joined["held"], "spearman")), cite
    )
    low, high = np.percentile(joined["num_threads"].to_numpy(dtype="float64"), [5, 95])
    facts.add("server.threads.p5", float(low), cite)
    facts.add("server.threads.p95", float(high), cite)


# The settings that size a process's intra-op pool, as the recorder keeps them (collectors/environment.py).
_POOL_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def _add_pool_facts(facts: Facts, dump: Dump, processes: int, cores: float, cores_from: str) -> None:
    """The pool size the service declares: torch's own (the allocator helper's ``intra_op_threads``),
    else the thread variables of its environment; and what its processes make of it per core."""
    pool, said = None, ""
    allocator = dump.table("allocator")
    if allocator is not None and "intra_op_threads" in allocator.columns:
        threads = pd.to_numeric(allocator["intra_op_threads"], errors="coerce").dropna()
        if len(threads):
            pool, said = float(threads.max()), f"{dump.source('allocator')}: intra_op_threads"
    environment = dump.manifest.extra.get("environment")
    if pool is None and isinstance(environment, dict):
        declared = {
            name: float(str(environment[name]))
            for name in _POOL_SETTINGS
            if str(environment.get(name, "")).isdigit()
        }
        if declared:
            name = max(declared, key=lambda n: declared[n])
            pool, said = declared[name], f"manifest environment: {name}={declared[name]:.0f}"
    if pool is None:
        return
    facts.add("server.pool_threads", pool, said)
    facts.add(
        "server.pool_threads_per_core",
        pool * processes / cores,
        f"{said}, x {processes} server process(es) / {cores_from}",
    )


def _add_switch_facts(facts: Facts, server: pd.DataFrame, cores: float, where: str) -> None:
    columns = ["ctx_switches_voluntary_per_s", "ctx_switches_involuntary_per_s"]
    if not set(columns) <= set(server.columns):
        return
    known = server[columns].dropna()
    if not len(known):
        return
    voluntary, involuntary = (known[c].to_numpy(dtype="float64") for c in columns)
    total = voluntary.sum() + involuntary.sum()
    if total > 0:
        facts.add(
            "server.involuntary_switch_share",
            float(involuntary.sum() / total),
            f"{where}: ctx_switches_involuntary_per_s / all its threads' context switches",
        )
    facts.add(
        "server.involuntary_switches_per_core_s.p50",
        float(np.median(involuntary) / cores),
        f"{where}: ctx_switches_involuntary_per_s per core, median",
    )


def _add_host_share(facts: Facts, dump: Dump, server: pd.DataFrame, who: str) -> None:
    """How much of the host's busy CPU is the server's: its own threads fill the run queue, or not."""
    system = dump.table("system")
    cores = _host_cores(dump)
    if system is None or cores is None or "cpu_pct" not in system.columns:
        return
    host = pd.to_numeric(system["cpu_pct"], errors="coerce").groupby(system["ts"]).mean() * cores
    joined = pd.merge_asof(
        server[["ts", "cpu_pct"]].dropna().sort_values("ts"),
        host.rename("host_cpu").reset_index().sort_values("ts"),
        on="ts",
        direction="nearest",
        tolerance=1.5,  # type: ignore[arg-type]  # a float key takes a float tolerance
    ).dropna()
    joined = joined[joined["host_cpu"] >= _BUSY_HOST_PCT * cores]
    if len(joined) and joined["host_cpu"].sum() > 0:
        facts.add(
            "host.server_cpu_share",
            float(min(1.0, joined["cpu_pct"].sum() / joined["host_cpu"].sum())),
            f"{dump.source('processes')}: cpu_pct of {who} / the host's busy CPU ({dump.source('system')})",
        )
