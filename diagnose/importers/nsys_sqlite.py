"""Nsight Systems' SQLite export (``nsys export --type sqlite``) -> the trace tables, with its timeline.

The export keeps CUPTI's activity records as tables, times in nanoseconds,
names as ids into ``StringIds``:

| table (CUPTI_ACTIVITY_KIND_...) | read into |
|---|---|
| KERNEL: start, end, deviceId, streamId, correlationId, demangledName | gpu_activity, kernel |
| MEMCPY: the same, bytes, copyKind, srcKind, dstKind | gpu_activity, memcpy (pinned or pageable) |
| MEMSET: the same, bytes | gpu_activity, memset |
| RUNTIME: start, end, nameId, correlationId, globalTid | host_calls, runtime |
| SYNCHRONIZATION: start, end, globalTid | host_calls, sync |
| (NVTX_EVENTS: start, end, text or textId, globalTid) | host_calls, annotation |

A runtime call's version suffix goes (``cudaLaunchKernel_v7000`` is
``cudaLaunchKernel``); a copy is pinned or pageable by its host side's memory
kind. The file is opened read-only and immutable: nothing a user gave is
modified, no journal is written beside it. A table the export lacks (a
capture without CUDA tracing) is left out, and what is there is read.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from diagnose.importers.base import Claim, FileImporter, Imported, Source
from diagnose.importers.profiler_trace import with_steps

_MAGIC = b"SQLite format 3\x00"
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_PAGEABLE, _PINNED = 1, 2  # CUpti_ActivityMemoryKind, where the export has no ENUM_CUDA_MEM_KIND table
_VERSION = re.compile(r"_v\d+$")
_CUPTI = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")
_ON_GPU = "start, end, deviceId AS gpu, streamId AS stream, correlationId AS correlation"


class NsysSqliteImporter(FileImporter):
    name = "nsys-sqlite"
    description = (
        "Nsight Systems exports: nsys export --type sqlite (kernels, copies, runtime calls, NVTX ranges)"
    )
    binary = True

    @property
    def example(self) -> str:
        """A binary file: what makes one, and what the importer looks for in it."""
        return (
            "nsys export --type sqlite report.nsys-rep  # report.sqlite: SQLite with "
            "CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, StringIds\n"
        )

    def recognise(self, head: str) -> Claim | None:
        return None  # a binary file: told by recognise_file

    def recognise_file(self, path: Path) -> bool:
        try:
            with open(path, "rb") as handle:
                if handle.read(16) != _MAGIC:
                    return False
            with _open(path) as db:
                return bool(set(_tables(db)) & set(_CUPTI))
        except (OSError, sqlite3.Error):
            return False

    def read_file(self, path: Path, tz: str | None = None) -> Imported:
        result = Imported()
        with _open(path) as db:
            present = set(_tables(db))
            strings = _strings(db) if "StringIds" in present else {}
            activity = [
                frame
                for frame in (
                    _kernels(db, strings) if "CUPTI_ACTIVITY_KIND_KERNEL" in present else None,
                    _copies(db) if "CUPTI_ACTIVITY_KIND_MEMCPY" in present else None,
                    _memsets(db) if "CUPTI_ACTIVITY_KIND_MEMSET" in present else None,
                )
                if frame is not None and len(frame)
            ]
            calls = [
                frame
                for frame in (
                    _runtime(db, strings) if "CUPTI_ACTIVITY_KIND_RUNTIME" in present else None,
                    _syncs(db) if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in present else None,
                    _ranges(db, strings) if "NVTX_EVENTS" in present else None,
                )
                if frame is not None and len(frame)
            ]
        if activity:
            result.tables["gpu_activity"] = pd.concat(activity, ignore_index=True)
        if calls:
            result.tables["host_calls"] = with_steps(pd.concat(calls, ignore_index=True))
        if not activity and not calls:
            result.warnings.append("no kernel, copy or runtime call in the export (was CUDA traced?)")
        return result

    def read(self, source: Source, tz: str | None = None) -> Imported:
        raise ValueError("an nsys export is a binary SQLite file: give the file, not its text")


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def _tables(db: sqlite3.Connection) -> list[str]:
    return [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}  # table: one of ours, not input


def _strings(db: sqlite3.Connection) -> dict[int, str]:
    return dict(db.execute("SELECT id, value FROM StringIds"))


def _timed(frame: pd.DataFrame) -> pd.DataFrame:
    """ns start/end -> the trace tables' microseconds."""
    start = frame.pop("start").to_numpy(dtype="float64")
    end = frame.pop("end").to_numpy(dtype="float64")
    return frame.assign(ts=start / 1000, dur_us=(end - start) / 1000)


def _kernels(db: sqlite3.Connection, strings: dict[int, str]) -> pd.DataFrame:
    columns = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    name = "demangledName" if "demangledName" in columns else "shortName"
    frame = pd.read_sql_query(f"SELECT {_ON_GPU}, {name} AS name_id FROM CUPTI_ACTIVITY_KIND_KERNEL", db)
    frame["name"] = frame.pop("name_id").map(strings)
    return _timed(frame.assign(kind="kernel"))


def _copies(db: sqlite3.Connection) -> pd.DataFrame:
    query = f"SELECT {_ON_GPU}, bytes, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    frame = pd.read_sql_query(query, db)
    pageable, pinned = _memory_kinds(db)
    copy_kind = frame.pop("copyKind").map(_COPY_KINDS)
    source, target = frame.pop("srcKind").to_numpy(), frame.pop("dstKind").to_numpy()
    host_side = np.where(copy_kind == "DtoH", target, np.where(copy_kind == "HtoD", source, -1))
    memory = pd.Series(pd.NA, index=frame.index, dtype="boolean")
    memory[host_side == pinned] = True
    memory[host_side == pageable] = False
    labels = memory.map({True: " (pinned)", False: " (pageable)"}).astype("string").fillna("")
    frame["pinned"] = memory
    frame["copy_kind"] = copy_kind
    frame["name"] = "Memcpy " + copy_kind.fillna("other") + labels
    return _timed(frame.assign(kind="memcpy"))


def _memory_kinds(db: sqlite3.Connection) -> tuple[int, int]:
    """The ids of pageable and pinned host memory: from the export's own enum where it has one."""
    try:
        labels = dict(db.execute("SELECT id, name FROM ENUM_CUDA_MEM_KIND"))
    except sqlite3.Error:
        return _PAGEABLE, _PINNED
    pageable = next((i for i, n in labels.items() if "PAGEABLE" in str(n).upper()), _PAGEABLE)
    pinned = next((i for i, n in labels.items() if "PINNED" in str(n).upper()), _PINNED)
    return pageable, pinned


def _memsets(db: sqlite3.Connection) -> pd.DataFrame:
    frame = pd.read_sql_query(f"SELECT {_ON_GPU}, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET", db)
    return _timed(frame.assign(kind="memset", name="Memset"))


def _runtime(db: sqlite3.Connection, strings: dict[int, str]) -> pd.DataFrame:
    query = "SELECT start, end, nameId, correlationId AS correlation, globalTid AS thread FROM {}"
    frame = pd.read_sql_query(query.format("CUPTI_ACTIVITY_KIND_RUNTIME"), db)
    names = frame.pop("nameId").map(strings).astype("string").fillna("")
    frame["name"] = names.str.replace(_VERSION, "", regex=True)
    frame["thread"] = frame["thread"].astype("string")
    return _timed(frame.assign(kind="runtime"))


def _syncs(db: sqlite3.Connection) -> pd.DataFrame:
    thread = "globalTid" if "globalTid" in _columns(db, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") else "NULL"
    query = f"SELECT start, end, {thread} AS thread FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    frame = pd.read_sql_query(query, db)
    frame["thread"] = frame["thread"].astype("string")
    return _timed(frame.assign(kind="sync", name="Synchronization"))


def _ranges(db: sqlite3.Connection, strings: dict[int, str]) -> pd.DataFrame:
    text_id = "textId" if "textId" in _columns(db, "NVTX_EVENTS") else "NULL"
    query = f"SELECT start, end, text, {text_id} AS text_id, globalTid AS thread FROM NVTX_EVENTS"
    frame = pd.read_sql_query(query + " WHERE end IS NOT NULL", db)
    frame["name"] = frame.pop("text").fillna(frame.pop("text_id").map(strings)).fillna("")
    frame["thread"] = frame["thread"].astype("string")
    return _timed(frame.assign(kind="annotation"))
