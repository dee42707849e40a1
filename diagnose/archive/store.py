"""The performance archive: one SQLite file of measured recordings and the comparisons between them.

What is kept of a recording is what a comparison needs once its dump is gone
(compare/evidence.py): every figure with its bootstrap replicates, a sample
of its requests' latencies and lengths, its environment, background load and diagnosis, and
the person's words (label, what changed, the gain expected). Not the raw
tables.

Safe to share: writes are single transactions taken with ``BEGIN IMMEDIATE``
in WAL mode, so concurrent writers wait for each other (up to
``BUSY_TIMEOUT_S``) and a process killed mid-write leaves the file as it was
before that write. The schema's version is the file's ``user_version``: an
older file is migrated in one transaction, a newer one is refused, and a file
that is not an archive (or is damaged) is an error that names it and is never
overwritten.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from diagnose.compare.evidence import Evidence
from diagnose.compare.measure import Measure
from diagnose.compare.model import Comparison, Delivery
from diagnose.errors import ArchiveError
from diagnose.gain import ExpectedGain

SCHEMA_VERSION = 3
APPLICATION_ID = 0x44474E53  # "DGNS": marks the file as a diagnose archive
BUSY_TIMEOUT_S = 30.0

# Each step takes the schema from the version before it to its own; a new version appends one.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            added_at TEXT NOT NULL,
            label TEXT, change TEXT, expect TEXT, note TEXT,
            dump TEXT NOT NULL, window_start TEXT, window_end TEXT,
            requests INTEGER NOT NULL, cold_excluded INTEGER NOT NULL,
            environment TEXT NOT NULL, background TEXT NOT NULL,
            hypotheses TEXT NOT NULL, warnings TEXT NOT NULL)""",
        """CREATE TABLE measures (
            entry INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            position INTEGER NOT NULL, name TEXT NOT NULL, label TEXT NOT NULL, unit TEXT NOT NULL,
            better TEXT, scale TEXT NOT NULL, value REAL, replicates BLOB,
            method TEXT NOT NULL, source TEXT NOT NULL, resolution REAL,
            PRIMARY KEY (entry, name))""",
        """CREATE TABLE samples (
            entry INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            name TEXT NOT NULL, sample BLOB NOT NULL,
            PRIMARY KEY (entry, name))""",
        """CREATE TABLE comparisons (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            added_at TEXT NOT NULL,
            baseline INTEGER NOT NULL REFERENCES entries(id),
            candidate INTEGER NOT NULL REFERENCES entries(id),
            verdict TEXT NOT NULL, headline TEXT NOT NULL,
            expected TEXT, measured TEXT NOT NULL)""",
    ),
    # Each recording's expected gains (a hypothesis's id: what its fix buys), and a comparison's
    # delivery: what a fix delivered against the gain its baseline's diagnosis expected.
    2: (
        "ALTER TABLE entries ADD COLUMN gains TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE comparisons ADD COLUMN delivery TEXT",
    ),
    # diagnose load's runs, each kept whole (capacity.json) under the name of its standard load, so
    # that next week's run of the same name is judged against it.
    3: (
        """CREATE TABLE capacity_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            added_at TEXT NOT NULL,
            name TEXT NOT NULL, folder TEXT NOT NULL,
            regressed INTEGER NOT NULL, result TEXT NOT NULL)""",
        "CREATE INDEX capacity_runs_by_name ON capacity_runs (name, id)",
    ),
}


@dataclass(frozen=True)
class Entry:
    id: int
    added_at: str
    label: str | None
    change: str | None
    expect: str | None
    note: str | None
    dump: str
    window: tuple[str | None, str | None]
    requests: int
    figures: dict[str, float | None]  # each measure's value
    units: dict[str, str]  # and its unit (ms, rps, bytes, share, pct), as it was measured
    hypotheses: list[tuple[str, float]]


@dataclass(frozen=True)
class ComparisonRow:
    id: int
    added_at: str
    baseline: int
    candidate: int
    verdict: str
    headline: str
    expected: str | None
    measured: dict[str, float | None]  # each decisive figure's change
    delivery: Delivery | None = None  # against the gain expected of the fix (--expects)


@dataclass(frozen=True)
class CapacityRun:
    """One archived ``diagnose load`` run: its result as capacity.json holds it."""

    id: int
    added_at: str
    name: str
    folder: str
    regressed: bool  # against the run it was judged against when kept
    result: dict


def default_path() -> Path:
    """``$DIAGNOSE_ARCHIVE``, else the user's data folder (XDG), else ``~/.local/share``."""
    if os.environ.get("DIAGNOSE_ARCHIVE"):
        return Path(os.environ["DIAGNOSE_ARCHIVE"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "diagnose" / "archive.sqlite"


class Archive:
    """An open archive; use as a context manager."""

    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = path
        if not path.exists():
            if not create:
                raise ArchiveError(f"{path}: no archive there yet; add a recording with diagnose archive add")
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.is_file():
            raise ArchiveError(f"{path}: not a file; --archive names the archive's file")
        try:
            self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._open_while_others_do()
        except sqlite3.DatabaseError as error:
            raise ArchiveError(
                f"{path}: not a diagnose archive, or a damaged one ({error}); it was left as it is"
            ) from None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def add(
        self, evidence: Evidence, label: str | None, change: str | None, expect: str | None, note: str | None
    ) -> int:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO entries (added_at, label, change, expect, note, dump, window_start, window_end, "
                "requests, cold_excluded, environment, background, hypotheses, warnings, gains) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    _now(),
                    label,
                    change,
                    expect,
                    note,
                    evidence.dump,
                    *evidence.window,
                    evidence.requests,
                    evidence.cold_excluded,
                    json.dumps(evidence.environment),
                    json.dumps(evidence.background),
                    json.dumps(evidence.hypotheses),
                    json.dumps(evidence.warnings),
                    json.dumps({cause: gain.to_dict() for cause, gain in evidence.gains.items()}),
                ),
            )
            entry = _inserted(cursor)
            db.executemany(
                "INSERT INTO measures VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        entry,
                        position,
                        m.name,
                        m.label,
                        m.unit,
                        m.better,
                        m.scale,
                        m.value,
                        None if m.replicates is None else m.replicates.astype("<f4").tobytes(),
                        m.method,
                        m.source,
                        m.resolution,
                    )
                    for position, m in enumerate(evidence.measures.values())
                ],
            )
            db.executemany(
                "INSERT INTO samples VALUES (?, ?, ?)",
                [(entry, name, values.astype("<f4").tobytes()) for name, values in evidence.samples.items()],
            )
        return entry

    def add_comparison(self, baseline: int, candidate: int, comparison: Comparison, measured: dict) -> int:
        expected = self._row(candidate)["expect"]
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO comparisons (added_at, baseline, candidate, verdict, headline, expected, "
                "measured, delivery) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    _now(),
                    baseline,
                    candidate,
                    comparison.verdict,
                    comparison.headline,
                    expected,
                    json.dumps(measured),
                    None if comparison.delivery is None else json.dumps(asdict(comparison.delivery)),
                ),
            )
            return _inserted(cursor)

    def add_capacity(self, name: str, folder: str, result: dict, regressed: bool) -> int:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO capacity_runs (added_at, name, folder, regressed, result) "
                "VALUES (?, ?, ?, ?, ?)",
                (_now(), name, folder, int(regressed), json.dumps(result)),
            )
            return _inserted(cursor)

    def capacity_runs(self, name: str) -> list[CapacityRun]:
        """The runs kept under ``name``, oldest first."""
        rows = self._db.execute(
            "SELECT id, added_at, name, folder, regressed, result FROM capacity_runs "
            "WHERE name = ? ORDER BY id",
            (name,),
        )
        return [
            CapacityRun(id_, added, name_, folder, bool(regressed), json.loads(result))
            for id_, added, name_, folder, regressed, result in rows
        ]

    def evidence(self, entry_id: int) -> Evidence:
        """An archived recording as the before side of a comparison."""
        row = self._row(entry_id)
        measures = {
            name: Measure(
                name,
                label,
                unit,
                better,
                scale,
                value,
                None if blob is None else np.frombuffer(blob, dtype="<f4").copy(),
                method,
                source,
                step,
            )
            for name, label, unit, better, scale, value, blob, method, source, step in self._db.execute(
                "SELECT name, label, unit, better, scale, value, replicates, method, source, resolution "
                "FROM measures WHERE entry = ? ORDER BY position",
                (entry_id,),
            )
        }
        samples = {
            name: np.frombuffer(blob, dtype="<f4").copy()
            for name, blob in self._db.execute(
                "SELECT name, sample FROM samples WHERE entry = ?", (entry_id,)
            )
        }
        return Evidence(
            f"archive #{entry_id} ({row['label'] or row['dump']})",
            (row["window_start"], row["window_end"]),
            row["requests"],
            row["cold_excluded"],
            measures,
            samples,
            json.loads(row["environment"]),
            json.loads(row["background"]),
            [tuple(h) for h in json.loads(row["hypotheses"])],
            json.loads(row["warnings"]),
            {cause: ExpectedGain.from_dict(gain) for cause, gain in json.loads(row["gains"]).items()},
        )

    def holding(self, evidence: Evidence) -> list[int]:
        """The recordings already kept of the same evidence: the same window and number of requests.

        A profiler trace alone has no window on the wall clock (its own clock is the trace's), so
        none can be told the same by these: none is said to be."""
        if evidence.window[0] is None:
            return []
        rows = self._db.execute(
            "SELECT id FROM entries WHERE window_start IS ? AND window_end IS ? AND requests = ? ORDER BY id",
            (*evidence.window, evidence.requests),
        )
        return [row[0] for row in rows]

    def entries(self) -> list[Entry]:
        ids = [row[0] for row in self._db.execute("SELECT id FROM entries ORDER BY id")]
        return [self.entry(i) for i in ids]

    def entry(self, entry_id: int) -> Entry:
        row = self._row(entry_id)
        measures = self._db.execute(
            "SELECT name, value, unit FROM measures WHERE entry = ? ORDER BY position", (entry_id,)
        ).fetchall()
        return Entry(
            row["id"],
            row["added_at"],
            row["label"],
            row["change"],
            row["expect"],
            row["note"],
            row["dump"],
            (row["window_start"], row["window_end"]),
            row["requests"],
            {name: value for name, value, _ in measures},
            {name: unit for name, _, unit in measures},
            [tuple(h) for h in json.loads(row["hypotheses"])],
        )

    def comparisons(self, entry_id: int) -> list[ComparisonRow]:
        rows = self._db.execute(
            "SELECT id, added_at, baseline, candidate, verdict, headline, expected, measured, delivery "
            "FROM comparisons WHERE baseline = ? OR candidate = ? ORDER BY id",
            (entry_id, entry_id),
        )
        return [
            ComparisonRow(
                id_,
                added,
                baseline,
                candidate,
                verdict,
                headline,
                expected,
                json.loads(measured),
                None if delivery is None else Delivery.from_dict(json.loads(delivery)),
            )
            for id_, added, baseline, candidate, verdict, headline, expected, measured, delivery in rows
        ]

    def _row(self, entry_id: int) -> sqlite3.Row:
        cursor = self._db.cursor()
        cursor.row_factory = sqlite3.Row
        row = cursor.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            known = [str(r[0]) for r in self._db.execute("SELECT id FROM entries ORDER BY id")]
            raise ArchiveError(
                f"{self.path}: no recording #{entry_id}; "
                + (f"the archive holds #{', #'.join(known)}" if known else "the archive is empty")
            )
        return row

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _open_while_others_do(self) -> None:
        """:meth:`_open`, again while another process creates or migrates the same archive: there
        SQLite can answer "database is locked" at once rather than wait out its busy timeout (six
        processes opening one new archive together met it twice in 60 tries)."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._open()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _open(self) -> None:
        """Check what the file is, then create or migrate its schema in one transaction."""
        # Tables first: a writer creating the archive sets both in one commit, so once its tables
        # are seen, so is its id. Read the other way round, a commit between the two reads made a
        # second writer call a new archive "not a diagnose archive".
        tables = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        application = self._db.execute("PRAGMA application_id").fetchone()[0]
        if tables and application != APPLICATION_ID:
            raise ArchiveError(
                f"{self.path}: an SQLite file, but not a diagnose archive; it was left as it is"
            )
        self._check_version()
        if self._version() == SCHEMA_VERSION:
            return
        self._db.execute("PRAGMA journal_mode = WAL")
        with self._write() as db:
            version = self._check_version()  # another process may have done it while this one waited
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[step]:
                    db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _check_version(self) -> int:
        version = self._version()
        if version > SCHEMA_VERSION:
            raise ArchiveError(
                f"{self.path}: written by a newer diagnose (archive schema {version}); this one reads "
                f"schema {SCHEMA_VERSION} and older: upgrade diagnose to use it"
            )
        return version


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _inserted(cursor: sqlite3.Cursor) -> int:
    """The id SQLite gave the row an INSERT just added."""
    if cursor.lastrowid is None:
        raise ArchiveError("the archive did not say which id it gave the new row")
    return cursor.lastrowid
