"""Which process a row of ``processes`` is about: a pid, or a process-exporter group.

A dump recorded on the host names each process by its pid. One pulled from
Prometheus may hold process-exporter's groups instead (``group``: several
processes summed under one name, no pid). The analysis keys processes by one
number either way: the pid, or for a group a negative number (-1, -2, ... in
the order of the group names), so that no group is taken for a process and
none is dropped for lacking a pid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from diagnose.dump.schema import GROUP

if TYPE_CHECKING:
    from diagnose.dump.model import Dump

__all__ = [
    "GROUP",
    "declared_server_pids",
    "describe",
    "find_server_pids",
    "group_label",
    "identifiers",
    "process_ids",
]


def identifiers(column: pd.Series) -> pd.Series:
    """A GPU index or a pid: a whole number from 0 to 2**31, else missing."""
    numbers = pd.to_numeric(column, errors="coerce")
    return numbers.where(numbers.between(0, 2**31) & (numbers == np.floor(numbers)))


def process_ids(frame: pd.DataFrame) -> pd.Series:
    """Each row's process: its pid, a group's negative number, or NaN."""
    if "pid" in frame.columns:
        ids = identifiers(frame["pid"])
    else:
        ids = pd.Series(np.nan, index=frame.index)
    if GROUP not in frame.columns:
        return ids
    groups = frame[GROUP].astype("string")
    grouped = ids.isna() & groups.notna() & (groups.str.len() > 0)
    if grouped.any():
        names = sorted(set(groups[grouped]))
        number = {name: -(i + 1) for i, name in enumerate(names)}
        ids = ids.where(~grouped, groups[grouped].map(number).astype("float64"))
    return ids


def group_label(name: str) -> str:
    return f"process-exporter group {name}"


def describe(frame: pd.DataFrame, ids: pd.Series, process_id: float) -> str:
    """A process as the report names it: ``pid 4242`` or ``process-exporter group vllm``.

    ``ids`` are the frame's :func:`process_ids`, computed once by the caller.
    """
    if process_id >= 0:
        return f"pid {int(process_id)}"
    rows = frame.loc[ids == process_id, GROUP]
    return group_label(rows.iloc[0]) if len(rows) else "a process-exporter group"


def declared_server_pids(dump: Dump) -> frozenset[int] | None:
    """The server's pids as the manifest names them (``server_pid`` or ``server_pids``), or None."""
    declared = dump.manifest.extra.get("server_pid") or dump.manifest.extra.get("server_pids")
    if declared is None:
        return None
    items = declared if isinstance(declared, list) else [declared]
    return frozenset(int(p) for p in items if isinstance(p, int | float | str) and str(p).isdigit())


def find_server_pids(dump: Dump) -> frozenset[int]:
    """The serving process(es): the manifest's server_pid(s), else the heaviest steady process.

    Process ids as :func:`diagnose.dump.processes.process_ids` numbers them (a group is negative).

    A co-located job is, by definition, some other process; this tells them apart. Read through
    ``Dump.server_pids``, found once per dump.
    """
    declared = declared_server_pids(dump)
    if declared is not None:
        return declared
    found: set[int] = set()
    for table, column in (("gpu_processes", "mem_used_bytes"), ("processes", "cpu_pct")):
        frame = dump.table(table)
        if frame is None or column not in frame.columns or not {"pid", GROUP} & set(frame.columns):
            continue
        frame = frame.assign(pid=process_ids(frame)).dropna(subset=["pid"])
        presence = frame.groupby("pid")["ts"].count() / max(frame["ts"].nunique(), 1)
        steady = presence[presence >= 0.9].index
        medians = frame[frame["pid"].isin(steady)].groupby("pid")[column].median().dropna()
        if len(medians):
            found.add(int(cast(float, medians.idxmax())))  # the index holds pids
    return frozenset(found)
