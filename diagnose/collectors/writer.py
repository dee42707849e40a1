"""Write a dump as it is recorded, so a recording cut short is still a valid dump.

Rows are appended as they are sampled and every file is flushed once per
interval, into the operating system's hands: Ctrl-C or ``kill -9`` lose at most
the last interval. Files are synced to the disk every ``SYNC_EVERY_S`` seconds
and at the end, so a power cut or a kernel crash loses at most that much (a
sync each second cost a tenth of the recorder's budget; sar and Prometheus's
WAL do not sync each sample either). Time-series tables are CSV with a fixed header (the dump's columns);
requests and events are JSONL, since their fields vary. The manifest is
written at the start and completed at the end.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import yaml

from diagnose.collectors.identity import HostIdentity, this_host
from diagnose.dump.schema import COLUMNS
from diagnose.errors import DiskFull, InputError

JSONL_TABLES = ("requests", "events", "allocator")
SYNC_EVERY_S = 10.0


def check_folder(folder: Path, force: bool) -> None:
    """A dump goes into a new or empty folder, or with ``--force`` into an existing one."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        if not force:
            raise InputError(f"{folder}: already exists and is not empty; choose another -o or pass --force")
        if not folder.is_dir():
            raise InputError(f"{folder}: exists and is not a folder")


class DumpWriter:
    def __init__(
        self,
        folder: Path,
        interval_s: float,
        force: bool = False,
        notes: str | None = None,
        identity: HostIdentity | None = None,
    ) -> None:
        """``identity``: the host the dump is of, where it is not this one (a service read from afar)."""
        check_folder(folder, force)
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._files: dict[str, TextIO] = {}
        self._writers: dict[str, csv.DictWriter] = {}
        self._synced_at = time.monotonic()
        self.rows = dict.fromkeys([*COLUMNS, *JSONL_TABLES], 0)
        identity = identity or this_host()
        self.manifest: dict[str, object] = {
            "format": "diagnose-dump/1",
            "host": identity.host,
            **identity.manifest_fields(),  # which machine, which boot: verify checks it runs there
            "started_at": _now(),
            "interval_s": interval_s,
            "recorder": "diagnose record",
            "complete": False,
        }
        if notes:
            self.manifest["notes"] = notes
        self._write_manifest()

    def append(self, table: str, rows: list[dict]) -> None:
        if not rows:
            return
        try:
            if table in COLUMNS:
                writer = self._csv(table)
                writer.writerows(rows)
            else:
                handle = self._handle(table, f"{table}.jsonl")
                handle.write("".join(json.dumps(row, default=str) + "\n" for row in rows))
        except OSError as error:
            self._raise_if_full(error)
            raise
        self.rows[table] += len(rows)

    def flush(self) -> None:
        """Each sample: what was appended goes to the OS; to the disk every ``SYNC_EVERY_S``."""
        sync = time.monotonic() - self._synced_at >= SYNC_EVERY_S
        if sync:
            self._synced_at = time.monotonic()
        try:
            for handle in self._files.values():
                handle.flush()
                if sync:
                    os.fsync(handle.fileno())
        except OSError as error:
            self._raise_if_full(error)
            raise

    def close(self, **summary: object) -> None:
        for handle in self._files.values():
            try:
                handle.flush()
                os.fsync(handle.fileno())
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    handle.close()
        self.manifest.update(summary)
        self.manifest["ended_at"] = _now()
        self.manifest["complete"] = True
        self.manifest["rows"] = {table: count for table, count in self.rows.items() if count}
        try:
            self._write_manifest()
        except OSError:
            pass  # a full disk: the tables are still a valid dump without the completed manifest

    def set_manifest(self, **fields: object) -> None:
        self.manifest.update(fields)
        self._write_manifest()

    def bytes_written(self) -> int:
        """The tables' size on disk so far (after a flush): what a bounded ring counts."""
        return sum(os.fstat(handle.fileno()).st_size for handle in self._files.values())

    def _csv(self, table: str) -> csv.DictWriter:
        if table not in self._writers:
            handle = self._handle(table, f"{table}.csv")
            writer = csv.DictWriter(handle, fieldnames=COLUMNS[table], extrasaction="ignore")
            writer.writeheader()
            self._writers[table] = writer
        return self._writers[table]

    def _handle(self, table: str, name: str) -> TextIO:
        if table not in self._files:
            self._files[table] = open(self.folder / name, "a", encoding="utf-8", newline="")  # noqa: SIM115
        return self._files[table]

    def _write_manifest(self) -> None:
        temporary = self.folder / ".manifest.yaml.tmp"
        temporary.write_text(yaml.safe_dump(self.manifest, sort_keys=False), encoding="utf-8")
        os.replace(temporary, self.folder / "manifest.yaml")

    @staticmethod
    def _raise_if_full(error: OSError) -> None:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(str(error)) from None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
