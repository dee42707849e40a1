"""Processes known only as process-exporter groups (a dump pulled from Prometheus): no pid, a group name."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from diagnose.dump.processes import describe, process_ids
from diagnose.pipeline import analyse_path
from tests.conftest import DUMPS


def test_groups_get_negative_ids_apart_from_pids_and_rows_with_neither_none():
    frame = pd.DataFrame(
        {"pid": [4242, np.nan, np.nan, np.nan, "-"], "group": [None, "vllm", "backup", "vllm", None]}
    )
    ids = process_ids(frame)
    assert ids.tolist()[:4] == [4242, -2, -1, -2] and np.isnan(ids.iloc[4])
    assert (
        describe(frame, ids, -2) == "process-exporter group vllm" and describe(frame, ids, 4242) == "pid 4242"
    )


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """The co-located CPU fixture as process-exporter would have shown it: per-name groups, no pids.

    The group of the periodic ``python3`` job is reported on every scrape (0 CPU between its runs), as
    process-exporter does once it has seen a group; the GPU process table, which has pids, is left out.
    """
    folder = tmp_path_factory.mktemp("grouped") / "dump"
    shutil.copytree(DUMPS / "co-located-contention-cpu", folder)
    (folder / "gpu_processes.csv").unlink()
    processes = pd.read_parquet(folder / "processes.parquet")
    (folder / "processes.parquet").unlink()
    summed = processes.groupby(["ts", "name"], as_index=False)[["cpu_pct", "rss_bytes", "num_threads"]].sum()
    busiest = processes.groupby(["ts", "name"], as_index=False)["max_thread_cpu_pct"].max()
    groups = summed.merge(busiest, on=["ts", "name"])
    every = pd.MultiIndex.from_product([groups["ts"].unique(), groups["name"].unique()], names=["ts", "name"])
    groups = groups.set_index(["ts", "name"]).reindex(every, fill_value=0).reset_index()
    groups.assign(group=groups["name"]).to_csv(folder / "processes.csv", index=False)
    return analyse_path(str(folder))[1].report


def test_a_co_located_job_known_only_as_a_group_is_found_and_named_as_one(grouped):
    first = grouped.hypotheses[0]
    assert first.id == "co-located-contention"
    assert grouped.fact("spikes.colocated.process") == "process-exporter group python3"
    assert "spikes.colocated.pid" not in grouped.facts
    assert any("process-exporter group python3" in line.text for line in first.evidence)
