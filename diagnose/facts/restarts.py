"""When the service (re)started, from every form of evidence that carries it.

A restart is stated outright by the manifest (``process_start``, the
recorder's own restart detection) or an event (``restart``, ``deploy``). It is
also shown, without being stated, by the process table: the server's pid
replaced by a process of the same name and command line; and by the engine's
own metrics: its process's start time (``process_start_time_seconds``) moved
on, or its counters went back (a Prometheus counter only does when the
process counting restarts). A dump assembled by hand, pulled from Prometheus,
or replayed with its events removed holds only these; it is the same fact, and
the cold-start analysis reads it the same way.

A pid replaced is a restart only where the process is one of its kind: a pool
of workers with the same command line (gunicorn, Ray, a data loader) starts and
stops processes as it runs, and its pids overlap. So a lineage is read only
from a name and command line that never has two pids alive at once, whose old
pid was seen in most samples of its life (not a process drifting in and out of
the recorder's busiest-processes list), and whose new pid came within a few
minutes of the old one's last sample. The start is stamped at the old pid's
last sample: the new process was born after it, and the cold-start analysis
allows a start's slow requests to begin up to half a minute after its stamp.
Where the manifest names the server's pids, only the server's lineage counts:
a command someone ran twice beside it (a CLI, a cron job) is replaced the same
way, and its start warms nothing the requests wait for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.processes import declared_server_pids, identifiers

_RESTART_KINDS = ("restart", "deploy")
_MAX_GAP_S = 300.0  # a replacement comes within minutes of the old process's end, not hours
_MIN_SAMPLES = 3  # each pid seen at least this often: a lineage, not one stray row
_MIN_PRESENCE = 0.5  # the old pid in at least half the samples of its life
_SAME_RESTART_S = 60.0  # a stated start this close to a pid's replacement is the same restart
_ANSWERED_S = 10.0  # an engine that answers /metrics again serves within seconds


@dataclass(frozen=True)
class Replacement:
    """A process whose pid was replaced by one of the same name and command line."""

    at: float  # the old pid's last sample: the restart happened after it
    old_pid: int
    new_pid: int
    name: str


def restart_times(dump: Dump) -> tuple[list[float], str]:
    """Every start the evidence shows, sorted, and where they came from (for a fact's citation)."""
    starts = list(dump.manifest.process_starts)
    sources = ["manifest.yaml process_start"] if starts else []
    events = dump.table("events")
    if events is not None and "kind" in events.columns:
        kinds = events["kind"].astype("string").str.lower()
        found = events.loc[kinds.isin(_RESTART_KINDS), "ts"].tolist()
        if found:
            starts += found
            sources.append(f"{dump.source('events')}: restart/deploy events")
    processes = dump.table("processes")
    if processes is not None:
        # A recorder that saw the pid change also wrote the start: the two stamps of one restart lie
        # seconds apart, and only the stated one is kept.
        servers = declared_server_pids(dump) or frozenset()
        replaced = [
            r
            for r in replacements(processes, servers)
            if all(abs(r.at - t) > _SAME_RESTART_S for t in starts)
        ]
        if replaced:
            starts += [r.at for r in replaced]
            shown = ", ".join(f"{r.name} pid {r.old_pid} -> {r.new_pid}" for r in replaced[:3])
            more = f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
            sources.append(
                f"{dump.source('processes')}: the pid replaced by one of the same name and command line "
                f"({shown}{more})"
            )
    server = dump.table("server")
    if server is not None:
        seen = [
            (at, how)
            for at, how in engine_restarts(server)
            if all(abs(at - t) > _SAME_RESTART_S for t in starts)
        ]
        if seen:
            starts += [at for at, _ in seen]
            hows = sorted({how for _, how in seen})
            sources.append(f"{dump.source('server')}: {' and '.join(hows)}")
    return sorted(set(starts)), " and ".join(sources)


def engine_restarts(server: pd.DataFrame) -> list[tuple[float, str]]:
    """(when, how it shows) for each restart the engine's own metrics show.

    A new ``process_start`` is stamped at itself, the process's birth; counters
    that went back, where no new start time says it, at the scrape before them
    (the restart came after it), or 10 s before the scrape that showed them
    where the engine answered nothing for longer: an engine answers /metrics
    once it is up, and serves soon after.
    """
    ts = pd.to_numeric(server["ts"], errors="coerce").to_numpy(dtype="float64")
    found: list[tuple[float, str]] = []
    if "process_start" in server.columns:
        born = pd.to_numeric(server["process_start"], errors="coerce").to_numpy(dtype="float64")
        known = np.isfinite(born) & np.isfinite(ts)
        values = born[known]
        moved = np.flatnonzero(values[1:] > values[:-1] + 1.0) + 1  # a second's rounding is no restart
        found += [(float(values[i]), "the engine's process_start_time_seconds moved on") for i in moved]
    if "counter_resets" in server.columns:
        went_back = pd.to_numeric(server["counter_resets"], errors="coerce").fillna(0).to_numpy() > 0
        for i in np.flatnonzero(went_back):
            at = max(float(ts[i - 1]), float(ts[i]) - _ANSWERED_S) if i > 0 else float(ts[i])
            if np.isfinite(at) and all(abs(at - t) > _SAME_RESTART_S for t, _ in found):
                found.append((at, "the engine's counters went back (a restarted process counts from 0)"))
    return sorted(found)


def replacements(processes: pd.DataFrame, servers: frozenset[int] = frozenset()) -> list[Replacement]:
    """Each pid replaced by a process of the same name and command line, oldest first; where
    ``servers`` names pids, only the lineages that hold one of them."""
    if not {"ts", "pid", "name"} <= set(processes.columns) or processes.empty:
        return []
    frame = pd.DataFrame(
        {
            "ts": pd.to_numeric(processes["ts"], errors="coerce"),
            "pid": identifiers(processes["pid"]),
            "name": processes["name"].fillna(""),
            "cmdline": processes["cmdline"].fillna("") if "cmdline" in processes else "",
        }
    ).dropna(subset=["ts", "pid"])
    ticks = np.unique(frame["ts"].to_numpy(dtype="float64"))
    if ticks.size < 2 * _MIN_SAMPLES:
        return []
    interval = float(np.median(np.diff(ticks)))
    # grouped by the columns themselves: joining them into one key first costs more than the grouping
    lives = frame.groupby(["name", "cmdline", "pid"], sort=False)["ts"].agg(["min", "max", "count"])
    lives = lives.reset_index()
    found = []
    for (name, _), pids in lives.groupby(["name", "cmdline"], sort=False):
        if len(pids) < 2 or not name:
            continue
        if servers and not servers & {int(p) for p in pids["pid"]}:
            continue  # another program's restarts: nothing the server's requests wait for
        pids = pids.sort_values("min")
        first, last, count = (pids[c].to_numpy(dtype="float64") for c in ("min", "max", "count"))
        if (first[1:] <= last[:-1]).any():
            continue  # two alive at once: a pool of workers, not one server
        for i in range(len(pids) - 1):
            life = (last[i] - first[i]) / interval + 1 if interval > 0 else count[i]
            if (
                count[i] >= _MIN_SAMPLES
                and count[i + 1] >= _MIN_SAMPLES
                and count[i] >= _MIN_PRESENCE * life
                and first[i + 1] - last[i] <= _MAX_GAP_S
            ):
                found.append(
                    Replacement(
                        float(last[i]),
                        int(pids["pid"].iloc[i]),
                        int(pids["pid"].iloc[i + 1]),
                        str(name),
                    )
                )
    return sorted(found, key=lambda r: r.at)
