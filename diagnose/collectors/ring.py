"""A bounded ring of recent samples on disk, and the dump cut from it when something happens.

The ring is a folder of *segments*, each an ordinary dump written by
:class:`~diagnose.collectors.writer.DumpWriter` (flushed every tick,
synced every few seconds), started every ``segment_s``. Old segments are deleted once they fall
out of the kept span, or sooner when the ring would outgrow its byte budget,
so disk use is bounded by ``max_bytes`` and said before the first sample.
Because every segment is a valid dump at every moment, ``kill -9`` or a power
cut leaves the ring readable: ``diagnose file`` opens any segment, and the
next recorder started on the same folder keeps them and can still dump them.

An incident dump is the rows of the segments that overlap its span, merged
into one folder written beside the ring under a temporary name and renamed
when complete, so whoever watches the folder never sees half a dump.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from diagnose.collectors.writer import DumpWriter
from diagnose.dump.schema import MANIFEST_FILE

RING_FOLDER = ".ring"
_SEGMENT_PREFIX = "segment-"
_MIN_SEGMENT_S, _MAX_SEGMENT_S, _SEGMENTS = 10.0, 300.0, 10


@dataclass(frozen=True)
class Segment:
    path: Path
    start: float  # epoch seconds, from its name

    @property
    def name(self) -> str:
        return self.path.name


class Ring:
    """The recorder's sink in flight-recorder mode: every sample goes into the current segment."""

    def __init__(
        self,
        folder: Path,
        interval_s: float,
        keep_s: float,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder, self._clock = folder, clock
        self.interval_s, self.keep_s, self.max_bytes = interval_s, keep_s, max_bytes
        self.segment_s = min(_MAX_SEGMENT_S, max(_MIN_SEGMENT_S, 5 * interval_s, keep_s / _SEGMENTS))
        folder.mkdir(parents=True, exist_ok=True)
        self.inherited = self.segments()  # from a recorder that stopped or was killed
        self._manifest: dict = {}
        self._started = 0.0
        self._closed_bytes = sum(_size(segment.path) for segment in self.inherited)
        self.dropped_early = 0  # segments deleted before their time, to stay within max_bytes
        self._writer = self._new_segment(clock())

    def segments(self) -> list[Segment]:
        found = []
        for path in self.folder.iterdir():
            if path.is_dir() and path.name.startswith(_SEGMENT_PREFIX):
                try:
                    found.append(Segment(path, int(path.name[len(_SEGMENT_PREFIX) :]) / 1000))
                except ValueError:
                    continue
        return sorted(found, key=lambda segment: segment.start)

    # -- the Sink protocol -------------------------------------------------------------------------

    def append(self, table: str, rows: list[dict]) -> None:
        self._writer.append(table, rows)

    def flush(self) -> None:
        self._writer.flush()
        now = self._clock()
        current = self._writer.bytes_written()
        if now - self._started >= self.segment_s or current > self.max_bytes / _SEGMENTS:
            self._rotate(now)
        elif self._closed_bytes + current > self.max_bytes:
            self._prune(now, current)

    def set_manifest(self, **fields: object) -> None:
        self._manifest.update(fields)
        self._writer.set_manifest(**fields)

    def close(self, **summary: object) -> None:
        self._writer.close(**summary)

    # -- incidents ---------------------------------------------------------------------------------

    def cut(self, start: float, end: float, destination: Path, manifest: dict) -> Path:
        """Write the rows with ``start <= ts <= end`` as one dump at ``destination``."""
        self._writer.flush()
        segments = self.segments()
        ends = [segment.start for segment in segments[1:]] + [float("inf")]
        chosen = [(s, e) for s, e in zip(segments, ends, strict=True) if e >= start and s.start <= end]
        partial = destination.with_name(f".{destination.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        rows: dict[str, int] = {}
        for segment, segment_end in chosen:
            whole = segment.start >= start and segment_end <= end
            for table_file in sorted(segment.path.iterdir()):
                if table_file.suffix in (".csv", ".jsonl") and not table_file.name.startswith("."):
                    kept = _copy_rows(table_file, partial / table_file.name, start, end, whole)
                    rows[table_file.stem] = rows.get(table_file.stem, 0) + kept
        merged = _merged_manifest([s for s, _ in chosen], self._manifest)
        merged.update(manifest)
        merged["rows"] = {table: count for table, count in sorted(rows.items()) if count}
        (partial / MANIFEST_FILE).write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
        os.replace(partial, destination)
        return destination

    # -- private -----------------------------------------------------------------------------------

    def _new_segment(self, now: float) -> DumpWriter:
        path = self.folder / f"{_SEGMENT_PREFIX}{int(now * 1000):015d}"
        writer = DumpWriter(path, self.interval_s, notes="a segment of diagnose record --ring")
        writer.set_manifest(recorder="diagnose record --ring", **self._manifest)
        self._started = now
        return writer

    def _rotate(self, now: float) -> None:
        self._writer.close(segment_of=str(self.folder))
        self._closed_bytes += _size(self._writer.folder)
        self._writer = self._new_segment(now)
        self._prune(now, 0)

    def _prune(self, now: float, current_bytes: int) -> None:
        """Delete what fell out of the kept span, then the oldest until the ring fits its budget."""
        closed = [segment for segment in self.segments() if segment.path != self._writer.folder]
        starts = [segment.start for segment in closed[1:]] + [self._started]
        sizes = {segment.path: _size(segment.path) for segment in closed}
        for segment, end in zip(closed, starts, strict=True):
            over_budget = sum(sizes.values()) + current_bytes > self.max_bytes
            if end < now - self.keep_s or over_budget:
                shutil.rmtree(segment.path, ignore_errors=True)
                sizes.pop(segment.path)
                self.dropped_early += end >= now - self.keep_s
        self._closed_bytes = sum(sizes.values())


def incident_name(host: str, at: float) -> str:
    """``gpu-node-7-20261202T031504Z``: by host and time, sortable, safe in a path."""
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in host) or "host"
    return f"{safe}-{stamp}"


def _copy_rows(source: Path, target: Path, start: float, end: float, whole: bool) -> int:
    """Append the source's rows within [start, end] to target; a torn last line (a crash) is left out."""
    new = not target.exists()
    kept = 0
    with (
        open(source, encoding="utf-8", newline="") as read,
        open(target, "a", encoding="utf-8", newline="") as out,
    ):
        if source.suffix == ".csv":
            header = read.readline()
            if not header.endswith("\n"):
                return 0
            if new:
                out.write(header)
            for line in read:
                if line.endswith("\n") and (whole or _within(_csv_ts(line), start, end)):
                    out.write(line)
                    kept += 1
        else:
            for line in read:
                if line.endswith("\n") and (whole or _within(_json_ts(line), start, end)):
                    out.write(line)
                    kept += 1
    return kept


def _csv_ts(line: str) -> float | None:
    """The recorder writes ``ts`` first in every CSV table (diagnose.dump.schema.COLUMNS)."""
    try:
        return float(next(csv.reader([line]))[0])
    except (ValueError, IndexError, StopIteration):
        return None


def _json_ts(line: str) -> float | None:
    try:
        value = json.loads(line).get("ts")
    except (json.JSONDecodeError, AttributeError):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _within(ts: float | None, start: float, end: float) -> bool:
    """A row whose time cannot be read is kept: the reader will say what is wrong with it."""
    return ts is None or start <= ts <= end


def _merged_manifest(segments: list[Segment], latest: dict) -> dict:
    """The first segment's start, the latest watched pids and sources, every server start seen."""
    manifests = []
    for segment in segments:
        try:
            loaded = yaml.safe_load((segment.path / MANIFEST_FILE).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(loaded, dict):
            manifests.append(loaded)
    merged: dict = {}
    for manifest in manifests:
        merged.update({k: v for k, v in manifest.items() if k not in ("rows", "segment_of", "notes")})
    merged.update(latest)
    starts = sorted({start for manifest in manifests for start in manifest.get("process_start") or []})
    if starts:
        merged["process_start"] = starts
    if manifests:
        merged["started_at"] = manifests[0].get("started_at", merged.get("started_at"))
    merged["ended_at"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    merged["complete"] = True
    merged["recorder"] = "diagnose record --ring"
    for key in (
        "samples",
        "skipped_ticks",
        "stopped_by",
        "recorder_cpu_s",
        "recorder_first_sample_cpu_s",
        "recorder_total_cpu_s",
    ):
        merged.pop(key, None)
    return merged


def _size(folder: Path) -> int:
    total = 0
    try:
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        return 0
    return total
