"""Load a dump folder following dump format version 1 (docs/dump-format.md).

Damage is contained: a bad value becomes missing, a bad line is skipped, a bad
file is left out, and each is reported as a warning naming the file and line.
Only a folder with nothing usable at all is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from diagnose.dump.cleaning import normalised
from diagnose.dump.formats import ReadResult, TableReadError, read_json_objects, read_table_file
from diagnose.dump.model import Dump, Manifest, RequestSample
from diagnose.dump.sample import sampled_requests
from diagnose.dump.schema import (
    EVENTS_TABLE,
    MANIFEST_FILE,
    SUMMARY_TABLES,
    TABLES,
    TRACE_TABLES,
    split_table_name,
)
from diagnose.dump.timestamps import parse_ts
from diagnose.errors import DumpError
from diagnose.units import human_bytes

if TYPE_CHECKING:
    from diagnose.importers import Cadence, Imported, Importer, Source
    from diagnose.statements import StatementScan

Progress = Callable[[str], None]  # told what is being read now (a status line on a terminal)

KNOWN_TABLES = (*TABLES, EVENTS_TABLE, *TRACE_TABLES, *SUMMARY_TABLES)


def load_dump(path: str, tz: str | None = None, progress: Progress | None = None) -> Dump:
    """A dump folder, or one file read as a dump of that file alone (``diagnose file vllm.log``).

    ``tz``: the zone of times that foreign files write without an offset (UTC when None).
    """
    progress = progress or _quiet
    given = Path(path)
    if not given.exists():
        raise DumpError(f"{path}: no such file or folder")
    folder, entries = (given, sorted(given.iterdir())) if given.is_dir() else (given.parent, [given])
    warnings: list[str] = []
    not_used: list[str] = []
    candidates: dict[str, list[tuple[Path, str]]] = {}
    manifest = Manifest()
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            not_used.append(entry.name + "/")
            continue
        if entry.name == MANIFEST_FILE:
            manifest = _read_manifest(entry, warnings)
            continue
        parts = split_table_name(entry.name)
        if parts is None or parts[0] not in KNOWN_TABLES:
            not_used.append(entry.name)
            continue
        candidates.setdefault(parts[0], []).append((entry, parts[1]))

    tables: dict[str, pd.DataFrame] = {}
    files: dict[str, list[str]] = {}
    problems: list[str] = []
    request_sample: RequestSample | None = None
    for name, found in candidates.items():
        if len(found) > 1:
            names = " and ".join(p.name for p, _ in found)
            problems.append(f"{names}: both hold table '{name}'; keep one. Table skipped")
            continue
        file, suffix = found[0]
        progress(f"reading {file.name} ({_size(file)})")
        try:
            sampled = sampled_requests(file, file.name, warnings) if name == "requests" else None
            frame = _load_table(name, file, suffix, warnings) if sampled is None else sampled[0]
        except TableReadError as error:
            problems.append(f"{file.name}: {error}; table skipped")
            continue
        if sampled is not None:
            request_sample = sampled[1]
        tables[name] = frame
        files[name] = [file.name]

    warnings[:0] = problems
    # Each profiler trace's tables, by the file(s) they came from: trace table files written by hand
    # (gpu_activity.csv, host_calls.csv) are one trace, each importer's file another.
    by_trace: dict[str, dict[str, tuple[pd.DataFrame, str]]] = {}
    written = {name: (tables.pop(name), files[name][0]) for name in TRACE_TABLES if name in tables}
    if written:
        by_trace[", ".join(file for _, file in written.values())] = written
    environment: dict[str, str] = {}
    cadences: dict[str, Cadence] = {}
    imported = _import_foreign(
        folder, not_used, tables, by_trace, files, warnings, environment, cadences, tz, progress
    )
    traces = _one_trace(by_trace, files, warnings)
    summaries = {name: tables.pop(name) for name in SUMMARY_TABLES if name in tables}
    if environment:
        stated = manifest.extra.get("environment", {})
        manifest.extra = {**manifest.extra, "environment": {**environment, **stated}}
    if not tables and not traces and not summaries:
        if problems:
            raise DumpError(problems[0].removesuffix("; table skipped"))
        if imported:
            said = "; ".join(w for w in warnings if w.startswith(tuple(f"{i['file']}:" for i in imported)))
            names = ", ".join(f"{i['file']} (as {i['importer']})" for i in imported)
            because = f": {said}" if said else ""
            raise DumpError(f"{path}: recognised {names}, but no rows came of it{because}")
        failed = [w for w in warnings if "recognised as" in w]
        if failed:
            raise DumpError(f"{path}: {failed[0]}")
        if not given.is_dir():
            raise DumpError(
                f"{path}: not a format diagnose recognises (`diagnose formats` lists them); "
                "a dump folder holds tables such as requests.csv"
            )
        inner = _dumps_inside(given)
        if inner:
            named = " and ".join(str(p) for p in inner[:3])
            said = "is one: give that folder" if len(inner) == 1 else "are dumps: give one of them"
            raise DumpError(f"{path}: not a diagnose dump itself, but {named} {said}")
        expected = ", ".join(f"{t}.csv" for t in TABLES)
        raise DumpError(f"{path}: not a diagnose dump: no tables found (expected files such as {expected})")
    if request_sample is not None and files.get("requests", [None])[1:]:
        # requests read whole from another file joined the sample: the counts are of the whole of both
        request_sample = None
        warnings.append("requests: a sample and the requests of another file together; counted as read")
    return Dump(
        str(path),
        tables,
        files,
        manifest,
        warnings,
        not_used,
        imported,
        traces,
        request_sample,
        cadences,
        summaries,
    )


def _quiet(_: str) -> None:
    pass


def _size(file: Path) -> str:
    try:
        return human_bytes(file.stat().st_size)
    except OSError:
        return "size unknown"


def _dumps_inside(folder: Path) -> list[Path]:
    """The folders right inside ``folder`` that hold a dump's tables or manifest (a recording kept as
    ``RUN/dump/`` beside its notes, a wrapper folder around an incident's dump)."""

    def is_dump(candidate: Path) -> bool:
        return any(
            child.name == MANIFEST_FILE
            or ((parts := split_table_name(child.name)) is not None and parts[0] in KNOWN_TABLES)
            for child in candidate.iterdir()
            if child.is_file()
        )

    return [child for child in sorted(folder.iterdir()) if child.is_dir() and is_dump(child)]


def _import_foreign(
    folder: Path,
    not_used: list[str],
    tables: dict[str, pd.DataFrame],
    by_trace: dict[str, dict[str, tuple[pd.DataFrame, str]]],
    files: dict[str, list[str]],
    warnings: list[str],
    environment: dict[str, str],
    cadences: dict[str, Cadence],
    tz: str | None = None,
    progress: Progress = _quiet,
) -> list[dict[str, Any]]:
    """Offer every file that is not a dump table to the importers; merge what they read.

    What they say of the environment (driver and CUDA versions) goes to ``environment``; of a table's
    sampling, to ``cadences`` where every file that fed the table said it; each profiler trace's
    tables to ``by_trace``, under its file's name.
    """
    used: list[dict[str, Any]] = []
    said: dict[str, list[Cadence | None]] = {table: [None] for table in tables}  # a table file says none
    offered = [name for name in not_used if not name.endswith("/") and (folder / name).is_file()]
    if not offered:
        return used
    from diagnose.importers import (
        HEAD_BYTES,
        FileImporter,
        Imported,
        Source,
        mend,
        recognise,
        recognise_binary,
        text_head,
    )

    for name in offered:
        path = folder / name
        head = text_head(path, HEAD_BYTES)
        importer = recognise(mend(head).text) if head is not None else recognise_binary(path)
        source: Source | None = None
        result: Imported | None = None
        mended: tuple[str, ...] = ()
        text = head is not None and not isinstance(importer, FileImporter)
        if text:
            # A statement is read wherever it is (statements/): in a file some importer claims or in one
            # none does, block by block as the importer reads it (a large file is mended once).
            source = Source.from_path(path)
            scan = _statement_scan(source, tz)
            source.watch(scan.feed)
        parts = _mixture(path, name, head) if text and head is not None else []
        reads: list[tuple[str, int]] = []  # (importer, rows) of each reading that worked
        if parts:
            # Several tools' outputs in one paste: each section read by its own importer
            progress(f"reading {name} ({_size(path)}) in {len(parts)} sections")
            result, mended = Imported(), ()
            for number, (part_importer, part) in enumerate(parts, start=1):
                try:
                    section = part_importer.read(part, tz)
                except Exception as error:  # noqa: BLE001 - one bad section never stops the rest
                    warnings.append(f"{name}: section {number} not read as {part_importer.name} ({error})")
                    continue
                _merge_into(result, section, f"section {number} ({part_importer.name})")
                reads.append((part_importer.name, section.rows))
        elif importer is not None:
            progress(f"reading {name} ({_size(path)}) as {importer.name}")
            try:
                if isinstance(importer, FileImporter):  # read as it streams from the file: no mending
                    result = importer.read_file(path, tz)
                else:
                    assert source is not None
                    mended = source.mended
                    result = importer.read(source, tz)
                reads.append((importer.name, result.rows))
            except Exception as error:  # noqa: BLE001 - pasted text: one bad file never stops the rest
                reason = f"{type(error).__name__}: {error}"
                warnings.append(f"{name}: recognised as {importer.name} but not read ({reason}); not used")
        stated = 0
        if text:
            assert source is not None
            source.finish_watch()
            events = result.tables.get("events") if result is not None else None
            found = scan.events(_records(events)) if scan.found_any else []
            if found:
                stated = len(found)
                if result is None:
                    mended, result = source.mended, Imported()
                frame = pd.DataFrame(found)
                result.tables["events"] = frame if events is None else pd.concat([events, frame])
        if result is None:
            continue
        if mended:
            warnings.append(f"{name}: read after undoing what pasting did to it: " + "; ".join(mended))
        not_used.remove(name)
        warnings.extend(f"{name}: {w}" for w in result.warnings)
        for read_by, rows in reads:
            if rows or not stated:
                used.append({"file": name, "importer": read_by, "rows": rows})
        if stated:
            used.append({"file": name, "importer": STATEMENTS, "rows": stated})
        if result.environment:
            environment.update(result.environment)
        for table, frame in result.tables.items():
            spec = TRACE_TABLES.get(table) or SUMMARY_TABLES.get(table)
            timed = spec.timed if spec is not None else True
            if frame.empty or (timed and "ts" not in frame):
                continue
            # The same cleaning as a table file's: times, numbers, latency from stages, duplicates.
            read = ReadResult(frame.reset_index(drop=True), 1, rows_only=True)
            try:
                frame = normalised(table, read, f"{name} ({table})", warnings)
            except TableReadError as error:
                warnings.append(f"{name}: its {table} rows are not used: {error}")
                continue
            if frame.empty:
                continue
            if table in TRACE_TABLES:
                by_trace.setdefault(name, {})[table] = (frame, name)
                continue
            merged = frame if table not in tables else pd.concat([tables[table], frame], ignore_index=True)
            if table not in SUMMARY_TABLES:  # a summary's rows stay in the order they were printed
                merged = merged.sort_values("ts", kind="stable", ignore_index=True)
            tables[table] = merged
            files.setdefault(table, []).append(name)
            said.setdefault(table, []).append(result.cadences.get(table))
    for table, cadence in said.items():
        if all(c is not None for c in cadence):
            cadences[table] = min((c for c in cadence if c is not None), key=lambda c: c.seconds)
    return used


STATEMENTS = "statements"  # what the report names as the reader of events found by the catalogue


def _mixture(path: Path, name: str, head: str) -> list[tuple[Importer, Source]]:
    """The file's sections with their importers, where it holds outputs of several formats (a terminal
    capture of several commands: diagnose/importers/sections.py); none where it is one format. Only a
    file whose head shows a second command line is read again to be cut."""
    from diagnose.importers import HEAD_BYTES, Source, mend, recognise
    from diagnose.importers.base import STREAM_BYTES, open_maybe_gzipped
    from diagnose.importers.sections import sections

    stat = path.stat()
    if stat.st_size > STREAM_BYTES or len(sections(head)) < 2:
        return []  # a log of that size is one writer's; a head with one command, one output
    with open_maybe_gzipped(path) as handle:
        pieces = sections(handle.read().decode("utf-8", errors="replace"))
    found: list[tuple[Importer, Source]] = []
    for piece in pieces:
        importer = recognise(mend(piece[:HEAD_BYTES]).text)
        if importer is not None:
            mended = mend(piece)
            found.append(
                (
                    importer,
                    Source(name, mended.text, stat.st_mtime, mended.undone, mended.prefixes, mended.commands),
                )
            )
    return found if len({importer.name for importer, _ in found}) > 1 else []


def _merge_into(result: Imported, read: Imported, section: str) -> None:
    for table, frame in read.tables.items():
        held = result.tables.get(table)
        result.tables[table] = frame if held is None else pd.concat([held, frame], ignore_index=True)
    result.warnings.extend(f"{section}: {w}" for w in read.warnings)
    result.environment.update(read.environment)
    result.cadences.update(read.cadences)


def _statement_scan(source: Source, tz: str | None) -> StatementScan:
    """A scan of the file's lines for the catalogue's statements, timed by each line's own stamp."""
    from diagnose.importers.stamps import line_stamp
    from diagnose.statements import StatementScan, builtin_finder

    year = datetime.fromtimestamp(source.mtime, UTC).year
    return StatementScan(builtin_finder(), lambda line: line_stamp(line, year, tz), source.mtime)


def _records(events: pd.DataFrame | None) -> list[dict[str, Any]]:
    if events is None:
        return []
    return [{str(k): v for k, v in row.items()} for row in events.to_dict("records")]


def _one_trace(
    by_trace: dict[str, dict[str, tuple[pd.DataFrame, str]]], files: dict[str, list[str]], warnings: list[str]
) -> dict[str, pd.DataFrame]:
    """Profiler traces are each on their own clock (and summaries each of their own profile): two in one
    timeline would be neither. The one with the most kernel time (else the most rows) is analysed, and
    the report says which and that the others are not."""
    for table in TRACE_TABLES:
        files.pop(table, None)
    if not by_trace:
        return {}

    def weight(tables: dict[str, tuple[pd.DataFrame, str]]) -> tuple[float, int]:
        activity = tables["gpu_activity"][0] if "gpu_activity" in tables else None
        kernel_us = 0.0
        if activity is not None and {"kind", "dur_us"} <= set(activity.columns):
            kernel_us = float(activity.loc[activity["kind"] == "kernel", "dur_us"].sum())
        return kernel_us, sum(len(frame) for frame, _ in tables.values())

    chosen = max(by_trace, key=lambda name: weight(by_trace[name]))
    for table, (_, file) in by_trace[chosen].items():
        files[table] = [file]
    others = sorted(set(by_trace) - {chosen})
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        warnings.append(
            f"{len(by_trace)} profiler traces or summaries in one dump, each on its own clock: analysed "
            f"{chosen} (the most kernel time), not {shown}; give each alone to diagnose it "
            "(`diagnose compare A B` compares two)"
        )
    return {table: frame for table, (frame, _) in by_trace[chosen].items()}


def _load_table(name: str, file: Path, suffix: str, warnings: list[str]) -> pd.DataFrame:
    if name == EVENTS_TABLE and suffix.startswith(".jsonl"):
        read_warnings: list[str] = []
        records, numbers = read_json_objects(file, read_warnings)
        if not records:
            raise TableReadError("no readable JSON lines (" + "; ".join(read_warnings or ["no data"]) + ")")
        result = ReadResult(pd.DataFrame.from_records(records), 1, numbers, read_warnings)
    else:
        result = read_table_file(file, suffix)
    warnings.extend(f"{file.name}: {w}" for w in result.warnings)
    return normalised(name, result, file.name, warnings)


def table_from_rows(
    name: str, rows: list[dict[str, Any]], label: str, warnings: list[str]
) -> pd.DataFrame | None:
    """Rows collected in memory (a live view) read by the same rules as a file: None if unusable."""
    if not rows:
        return None
    try:
        return normalised(name, ReadResult(pd.DataFrame.from_records(rows), 1), label, warnings)
    except TableReadError as error:
        warnings.append(f"{label}: {error}")
        return None


def read_manifest(path: str) -> Manifest:
    """A dump's manifest alone, without its tables (what a command checks before it reads them); an
    empty one where the dump has none or it cannot be read."""
    file = Path(path) / MANIFEST_FILE
    return _read_manifest(file, []) if file.is_file() else Manifest()


def _read_manifest(file: Path, warnings: list[str]) -> Manifest:
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        warnings.append(f"{file.name}{where}: not valid YAML; manifest ignored")
        return Manifest()
    except (UnicodeDecodeError, OSError) as error:
        warnings.append(f"{file.name}: unreadable ({error}); manifest ignored")
        return Manifest()
    if data is None:
        return Manifest()
    if not isinstance(data, dict):
        warnings.append(f"{file.name}: expected a mapping of keys to values; manifest ignored")
        return Manifest()
    fmt = data.get("format")
    if fmt is not None and fmt != "diagnose-dump/1":
        warnings.append(f"{file.name}: format {fmt!r} is not diagnose-dump/1; read as version 1")
    return Manifest(
        host=str(data["host"]) if data.get("host") is not None else None,
        interval_s=_manifest_number(data, "interval_s", file.name, warnings),
        process_starts=_manifest_times(data.get("process_start"), file.name, warnings),
        slo_p99_ms=_manifest_number(data, "slo_p99_ms", file.name, warnings),
        extra=data,
    )


def _manifest_number(data: dict[str, Any], key: str, file: str, warnings: list[str]) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        warnings.append(f"{file}: {key}: expected a number, got {value!r}; ignored")
        return None
    return number if number > 0 else None


def _manifest_times(value: object, file: str, warnings: list[str]) -> list[float]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    seconds = []
    for item in items:
        if isinstance(item, datetime):  # YAML itself parses unquoted ISO times
            aware = item if item.tzinfo else item.replace(tzinfo=UTC)
            seconds.append(aware.timestamp())
        else:
            parsed = parse_ts(pd.Series([item if isinstance(item, int | float) else str(item)]))
            seconds.append(float(parsed.seconds[0]))
    if not all(np.isfinite(seconds)):
        warnings.append(f"{file}: process_start: some times are not epoch seconds or ISO-8601; ignored")
    return sorted(s for s in seconds if np.isfinite(s))
