"""Read one host's window from Prometheus and write it as a dump (docs/pull.md).

What is there decides what is asked: the metric names the host's series have
in the window are read first, so a host without dcgm-exporter gets no GPU
queries (and the manifest says the GPU source was not found), and the engine
is recognised from its names as the recorder recognises it from a scrape.
The step is the scrape interval, read from the ``up`` series' own sample
times; a coarser ``--step`` is allowed and said (each value then stands for a
step, not one scrape).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from diagnose.dump.model import SourceStatus
from diagnose.dump.schema import COLUMNS, GROUP, MANIFEST_FILE
from diagnose.engines.metrics import detect_engine
from diagnose.errors import InputError, PullError
from diagnose.pull.client import PrometheusClient
from diagnose.pull.queries import (
    GPU,
    PROCESSES,
    SYSTEM,
    XID_METRIC,
    XID_QUERY,
    Column,
    engine_columns,
    fill,
    rate_window,
    selector,
)

DEFAULT_SCRAPE_S = 15.0  # what Prometheus scrapes at unless told otherwise


@dataclass(frozen=True)
class PullSummary:
    path: Path
    instance: str
    rows: dict[str, int]
    step_s: float
    scrape_s: float | None
    engine: str | None
    missing: tuple[str, ...]  # sources with no series for this host
    notes: tuple[str, ...] = field(default_factory=tuple)


def pull(
    client: PrometheusClient,
    instance: str,
    start: float,
    end: float,
    output: Path,
    step_s: float | None = None,
    say: Callable[[str], None] = print,
) -> PullSummary:
    """Write the dump of ``instance`` (a host, with or without its port) between ``start`` and ``end``."""
    if end <= start:
        raise InputError(f"--from must be before --to (got {iso_utc(start)} and {iso_utc(end)})")
    _check_output(output)
    host = instance.rsplit(":", 1)[0] if re.fullmatch(r".+:\d+", instance) else instance
    sel = selector(host)
    names = client.metric_names("{" + sel + "}", start, end)
    if not names:
        seen = known_instances(client, end)
        raise PullError(
            f"{client.url}: no series for instance {host!r} between {iso_utc(start)} and {iso_utc(end)}; "
            + (f"instances it has: {', '.join(seen[:20])}" if seen else "it has no up series at all")
        )
    scrape_s = _scrape_interval(client, sel, start, end)
    step = step_s or max(1.0, scrape_s or DEFAULT_SCRAPE_S)
    notes = []
    if scrape_s is None:
        notes.append(f"the scrape interval could not be read from up{{{sel}}}; step {step:g} s assumed")
    elif step > scrape_s * 1.5:
        notes.append(
            f"coarse: step {step:g} s over a {scrape_s:g} s scrape interval, so each value stands for "
            f"{step:g} s (rates are averaged over it; gauges are the last scrape in it)"
        )
    rate, window = rate_window(step, scrape_s or step)
    engine = detect_engine(dict.fromkeys(names, 0.0))
    present = [
        c
        for c in [*SYSTEM, *GPU, *PROCESSES, *(engine_columns(engine, names) if engine else [])]
        if _has(c, names)
    ]
    # Of two sources of one column (a GPU's utilisation; a MIG slice has only the profiling field's),
    # the first the store has is pulled: a second would overwrite it.
    columns: list[Column] = []
    pulled: set[tuple[str, str]] = set()
    for column in present:
        if (column.table, column.column) not in pulled:
            pulled.add((column.table, column.column))
            columns.append(column)
    tables: dict[str, dict[tuple, dict]] = {"system": {}, "gpu": {}, "processes": {}, "server": {}}
    queries: dict[str, dict[str, str]] = {}
    for column in columns:
        query = fill(column, sel, rate, window)
        queries.setdefault(column.table, {})[column.column] = query
        for labels, points in client.query_range(query, start, end, step):
            key_extra = _row_key(column.table, labels)
            for ts, value in points:
                if math.isfinite(value):
                    row = tables[column.table].setdefault((ts, *key_extra), _new_row(ts, key_extra))
                    row[column.column] = value
    events = _xid_events(client, sel, start, end, step, notes) if XID_METRIC in names else []
    restarts = _restarts(client, sel, start, end, step, engine, names)
    events += restarts
    output.mkdir(parents=True, exist_ok=True)
    rows = {}
    for table, keyed in tables.items():
        if keyed:
            rows[table] = _write_csv(output / f"{table}.csv", table, [keyed[k] for k in sorted(keyed)])
    if events:
        rows["events"] = _write_events(output / "events.jsonl", events)
    sources = _sources(client.url, names, engine, rows)
    missing = tuple(name for name, source in sources.items() if source["status"] != "ok")
    environment = host_labels(client, sel, names, start, end)
    manifest = {
        "format": "diagnose-dump/1",
        "host": host,
        "started_at": iso_utc(start),
        "ended_at": iso_utc(end),
        "interval_s": step,
        "recorder": "diagnose pull",
        "complete": True,
        **({"process_start": sorted({iso_utc(e["process_start"]) for e in restarts})} if restarts else {}),
        "sources": sources,
        **({"environment": environment} if environment else {}),
        "pulled": {
            "prometheus": client.url,
            "selector": "{" + sel + "}",
            "step_s": step,
            "scrape_interval_s": scrape_s,
            **({"notes": notes} if notes else {}),
            "queries": queries,
        },
        "rows": rows,
    }
    (output / MANIFEST_FILE).write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    for note in notes:
        say(f"diagnose: {host}: {note}")
    return PullSummary(output, host, rows, step, scrape_s, engine, missing, tuple(notes))


# What describes a host in its series' labels (dcgm-exporter's, node_exporter's info metrics), by the
# environment name diagnose record uses for the same thing where it has one.
_DESCRIBING = {
    "DCGM_FI_DEV_GPU_UTIL": (("modelName", "gpu_model"), ("DCGM_FI_DRIVER_VERSION", "driver_version")),
    "node_uname_info": (("release", "kernel"),),
    "node_os_info": (("pretty_name", "os"),),
}
# Labels on up that name the target or the scrape, not the host: left out of its description.
_NOT_DESCRIBING = {"__name__", "instance", "job"}


def host_labels(
    client: PrometheusClient, sel: str, names: set[str], start: float, end: float
) -> dict[str, str]:
    """What the series say of the host, for the manifest's ``environment``: the GPU model and driver,
    the kernel and OS, and the labels its targets carry beyond instance and job (a node pool, a zone,
    a cluster, as relabelling puts them): ``label_<name>``. The last value in the window; {} where the
    server says nothing (no query here fails a pull)."""
    found: dict[str, str] = {}
    window = f"[{max(1, int(end - start))}s]"
    try:
        for item in client.query(f"last_over_time(up{{{sel}}}{window})", end):
            for label, value in item.get("metric", {}).items():
                if label not in _NOT_DESCRIBING and value:
                    found.setdefault(f"label_{label}", value)
        for metric, described in _DESCRIBING.items():
            if metric not in names:
                continue
            by = ", ".join(label for label, _ in described)
            items = client.query(f"count by ({by}) (last_over_time({metric}{{{sel}}}{window}))", end)
            for label, name in described:
                values = {item.get("metric", {}).get(label) for item in items} - {None, ""}
                if values:
                    found[name] = ", ".join(sorted(values))
    except PullError:
        return found
    return found


def known_instances(client: PrometheusClient, at: float, job: str | None = None) -> list[str]:
    """The hosts with an ``up`` series (ports dropped), for a sweep and for an error that helps."""
    match = f'{{job=~"{job}"}}' if job else ""
    try:
        result = client.query(f"count by (instance) (up{match})", at)
    except PullError:
        return []
    hosts = set()
    for item in result:
        instance = item.get("metric", {}).get("instance", "")
        if instance:
            hosts.add(instance.rsplit(":", 1)[0] if re.fullmatch(r".+:\d+", instance) else instance)
    return sorted(hosts)


def parse_time(text: str, now: float | None = None) -> float:
    """``2026-12-02T03:00:00Z`` (with a zone), epoch seconds, ``now``, ``now-1h`` or ``-1h``."""
    from diagnose.units import parse_duration

    now = time.time() if now is None else now
    value = text.strip()
    relative = re.fullmatch(r"(?:now)?\s*-\s*(\S+)", value)
    if value == "now":
        return now
    if relative:
        return now - parse_duration(relative.group(1))
    try:
        return float(value)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"expected a time such as 2026-12-02T03:00:00Z, an epoch, now or now-1h; got {text!r}"
        ) from None
    if stamp.tzinfo is None:
        raise InputError(f"{text!r}: say the zone, e.g. {value}Z for UTC or {value}+08:00")
    return stamp.timestamp()


def _has(column: Column, names: set[str]) -> bool:
    return all(name in names for name in column.needs)


def _scrape_interval(client: PrometheusClient, sel: str, start: float, end: float) -> float | None:
    """The median gap between the ``up`` series' samples in the window's last ten minutes."""
    span = max(1, min(600, round(end - start)))
    try:
        result = client.query(f"up{{{sel}}}[{span}s]", end)
    except PullError:
        return None
    gaps = []
    for item in result:
        stamps = [float(t) for t, _ in item.get("values", [])]
        gaps += [b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a]
    if not gaps:
        return None
    gaps.sort()
    return round(gaps[len(gaps) // 2], 3)


def _xid_events(
    client: PrometheusClient, sel: str, start: float, end: float, step: float, notes: list[str]
) -> list[dict]:
    """dcgm-exporter's XID gauge holds the last Xid code: each change to a non-zero code is an event.

    A code already there when the window opens happened before it, at a time the gauge does not
    keep: it is a note, not an event stamped at the window's start.
    """
    events = []
    for labels, points in client.query_range(XID_QUERY.format(sel=sel), start, end, step):
        gpu = _gpu_index(labels.get("gpu"))
        if points and points[0][1]:
            notes.append(f"GPU {gpu}'s last Xid before the window: {points[0][1]:g} (its time is not kept)")
        for (_, last), (ts, value) in zip(points, points[1:], strict=False):
            if value and value != last:
                events.append({"ts": ts, "kind": "xid", "gpu": gpu, "message": f"Xid {value:g}"})
    return events


def _restarts(
    client: PrometheusClient,
    sel: str,
    start: float,
    end: float,
    step: float,
    engine: str | None,
    names: set[str],
) -> list[dict]:
    """The serving process's start time (prometheus_client's process collector), where it changes."""
    if engine is None or "process_start_time_seconds" not in names:
        return []
    marker = next(iter(sorted(n for n in names if detect_engine({n: 0.0}) == engine)), None)
    if marker is None:
        return []
    query = (
        f"max(process_start_time_seconds{{{sel}}} and on (instance) group by (instance) ({marker}{{{sel}}}))"
    )
    events, last = [], None
    for _, points in client.query_range(query, start, end, step):
        for _, value in points:
            if value != last and start <= value <= end:
                events.append(
                    {"ts": value, "kind": "restart", "process_start": value, "message": "server started"}
                )
            last = value
    return events


def _row_key(table: str, labels: dict) -> tuple:
    """What tells a table's rows at one time apart: the GPU index, or process-exporter's group name."""
    if table == "gpu":
        return (("gpu", _gpu_index(labels.get("gpu"))),)
    if table == "processes":
        return ((GROUP, str(labels.get("groupname", "?"))),)
    return ()


def _new_row(ts: float, key: tuple) -> dict:
    row = {"ts": ts, **dict(key)}
    if GROUP in row:
        row["name"] = row[GROUP]  # a group has no process name of its own
    return row


def _gpu_index(label: object) -> int | str:
    try:
        return int(str(label))
    except ValueError:
        return str(label)


def _write_csv(path: Path, table: str, rows: list[dict]) -> int:
    known = COLUMNS[table]
    extra = sorted({k for row in rows for k in row} - set(known))
    present = [c for c in known if any(c in row for row in rows)] + extra
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=present)
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
    return len(rows)


def _cell(value: object) -> object:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _write_events(path: Path, events: list[dict]) -> int:
    with open(path, "w", encoding="utf-8") as handle:
        for event in sorted(events, key=lambda e: e["ts"]):
            handle.write(json.dumps(event) + "\n")
    return len(events)


def _sources(url: str, names: set[str], engine: str | None, rows: dict[str, int]) -> dict:
    def source(kind: str, found: bool, table: str, missing: str) -> dict:
        ok = found and rows.get(table, 0) > 0
        return {
            "kind": kind,
            "target": url,
            "status": (SourceStatus.OK if ok else SourceStatus.UNUSED).value,  # it answered: nothing for it
            **({} if ok else {"reason": missing}),
        }

    return {
        "node_exporter": source(
            "node_exporter via Prometheus", any(n.startswith("node_") for n in names), "system",
            "no node_exporter series for this host in the window",
        ),
        "dcgm_exporter": source(
            "dcgm-exporter via Prometheus", any(n.startswith("DCGM_") for n in names), "gpu",
            "no dcgm-exporter series for this host in the window",
        ),
        "engine": source(
            f"{engine or 'serving engine'} /metrics via Prometheus", engine is not None, "server",
            "no vLLM, Triton, TGI, SGLang or MindIE series for this host in the window",
        ),
        # Optional: many hosts run no process-exporter, and its absence is no dead source.
        **({"process_exporter": source(
            "process-exporter via Prometheus (groups, no pids)", True, "processes",
            "no process-exporter group had samples in the window",
        )} if any(n.startswith("namedprocess_namegroup_") for n in names) else {}),
    }  # fmt: skip


def _check_output(output: Path) -> None:
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise InputError(f"{output}: already exists and is not empty; choose another -o")
    parent = output.parent if output.parent != Path("") else Path(".")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise InputError(f"{parent}: permission denied; cannot write the dump there")


def iso_utc(at: float) -> str:
    """Epoch seconds as ISO-8601 UTC, to the second: the manifest's and the summary's times."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
