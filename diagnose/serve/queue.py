"""The alerts ``diagnose serve`` accepted, in an SQLite file: nothing accepted is lost to a restart.

Each incident (an alert's fingerprint and start) is one row, whatever number
of times Alertmanager sends it: a re-sent group finds its row and does no
work. A row is ``queued`` until a worker claims it (``running``), then
``done`` or ``failed``; a resolved alert whose firing was never seen is kept
as ``resolved`` and not diagnosed. Every change is one ``BEGIN IMMEDIATE``
transaction in WAL mode, so the web server's threads and the dispatcher share
the file safely, and a process killed between two changes leaves the last one
whole: at the next start the rows it left ``running`` are queued again (up to
``MAX_ATTEMPTS`` times, so one alert that kills its worker cannot loop).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from diagnose.errors import InputError
from diagnose.serve.webhook import Alert

MAX_ATTEMPTS = 3

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS alerts (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL, starts_at REAL NOT NULL, ends_at REAL,
        name TEXT NOT NULL, instance TEXT NOT NULL,
        labels TEXT NOT NULL, annotations TEXT NOT NULL,
        received_at REAL NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
        finished_at REAL, folder TEXT, findings TEXT, problem TEXT)""",
    "CREATE INDEX IF NOT EXISTS alerts_by_state ON alerts (state, received_at)",
)


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    RESOLVED = "resolved"  # arrived resolved, its firing never seen: kept, not diagnosed


class Outcome(StrEnum):
    """What became of one alert of a notification."""

    QUEUED = "queued"
    SEEN = "already seen"  # the same incident, accepted before: no second diagnosis
    KEPT = "kept, not diagnosed"  # resolved before its firing was seen


class QueueFull(Exception):
    """More alerts wait than the bound allows: the notification is refused whole, to be sent again."""


@dataclass(frozen=True)
class Job:
    """An accepted alert, as a worker diagnoses it."""

    key: str
    fingerprint: str
    starts_at: float
    name: str
    instance: str
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class Entry:
    """An alert as the index page and ``/api/alerts`` show it."""

    job: Job
    state: State
    received_at: float
    ends_at: float | None
    finished_at: float | None
    folder: str | None
    findings: list[dict]
    problem: str | None


class AlertQueue:
    """The store. Each call opens its own connection: safe from any thread or process."""

    def __init__(self, path: Path, bound: int) -> None:
        self.path, self.bound = path, bound
        try:
            with self._write() as db:
                for statement in _SCHEMA:
                    db.execute(statement)
        except sqlite3.DatabaseError as error:
            raise InputError(
                f"{path}: not diagnose serve's alert store, or a damaged one ({error})"
            ) from None

    def accept(self, alerts: list[tuple[Alert, str]]) -> list[Outcome]:
        """Each (alert, instance) queued, recognised, or kept; all or none (:class:`QueueFull`)."""
        now = time.time()
        with self._write() as db:
            outcomes: list[Outcome] = []
            new: list[tuple[Alert, str]] = []
            for alert, instance in alerts:
                row = db.execute("SELECT state FROM alerts WHERE key = ?", (alert.key,)).fetchone()
                if row is not None:
                    if alert.ends_at is not None:
                        db.execute("UPDATE alerts SET ends_at = ? WHERE key = ?", (alert.ends_at, alert.key))
                    outcomes.append(Outcome.SEEN)
                    continue
                if any(other.key == alert.key for other, _ in new):
                    outcomes.append(Outcome.SEEN)
                    continue
                new.append((alert, instance))
                outcomes.append(Outcome.QUEUED if alert.status == "firing" else Outcome.KEPT)
            waiting = db.execute("SELECT count(*) FROM alerts WHERE state = ?", (State.QUEUED,)).fetchone()[0]
            firing = sum(alert.status == "firing" for alert, _ in new)
            if firing and waiting + firing > self.bound:
                raise QueueFull(f"{waiting} alerts wait to be diagnosed (the bound is {self.bound})")
            db.executemany(
                "INSERT INTO alerts (key, fingerprint, starts_at, ends_at, name, instance, labels, "
                "annotations, received_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        alert.key,
                        alert.fingerprint,
                        alert.starts_at,
                        alert.ends_at,
                        alert.name,
                        instance,
                        json.dumps(alert.labels, sort_keys=True),
                        json.dumps(alert.annotations, sort_keys=True),
                        now,
                        State.QUEUED if alert.status == "firing" else State.RESOLVED,
                    )
                    for alert, instance in new
                ],
            )
        return outcomes

    def claim(self) -> Job | None:
        """The oldest queued alert, now running; None when none waits."""
        with self._write() as db:
            row = db.execute(
                f"SELECT {_JOB} FROM alerts WHERE state = ? ORDER BY received_at, key LIMIT 1",
                (State.QUEUED,),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE alerts SET state = ?, attempts = attempts + 1 WHERE key = ?", (State.RUNNING, row[0])
            )
        return _job(row)

    def finish(self, key: str, folder: str, findings: list[dict]) -> None:
        self._end(key, State.DONE, folder=folder, findings=json.dumps(findings), problem=None)

    def fail(self, key: str, problem: str, folder: str | None = None) -> None:
        self._end(key, State.FAILED, folder=folder, findings="[]", problem=problem)

    def recover(self) -> int:
        """After a stop: what was running is queued again (or failed, after ``MAX_ATTEMPTS``). The count."""
        with self._write() as db:
            db.execute(
                "UPDATE alerts SET state = ?, finished_at = ?, problem = ? WHERE state = ? AND attempts >= ?",
                (
                    State.FAILED,
                    time.time(),
                    f"the service stopped {MAX_ATTEMPTS} times while diagnosing it",
                    State.RUNNING,
                    MAX_ATTEMPTS,
                ),
            )
            return db.execute(
                "UPDATE alerts SET state = ? WHERE state = ?", (State.QUEUED, State.RUNNING)
            ).rowcount

    def entry(self, key: str) -> Entry | None:
        rows = self._entries("WHERE key = ?", (key,))
        return rows[0] if rows else None

    def latest(self, name: str, instance: str) -> Entry | None:
        """The newest incident of this alert on this instance (a rule's link to its report)."""
        rows = self._entries(
            "WHERE name = ? AND instance = ? ORDER BY starts_at DESC LIMIT 1", (name, instance)
        )
        return rows[0] if rows else None

    def recent(self, limit: int = 100) -> list[Entry]:
        """The alerts received last, newest first."""
        return self._entries("ORDER BY received_at DESC, key LIMIT ?", (limit,))

    def counts(self) -> dict[State, int]:
        with self._read() as db:
            found = dict(db.execute("SELECT state, count(*) FROM alerts GROUP BY state").fetchall())
        return {state: found.get(state.value, 0) for state in State}

    def _end(self, key: str, state: State, **values: str | None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE alerts SET state = ?, finished_at = ?, folder = ?, findings = ?, problem = ? "
                "WHERE key = ?",
                (state, time.time(), values["folder"], values["findings"], values["problem"], key),
            )

    def _entries(self, tail: str, parameters: tuple) -> list[Entry]:
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_JOB}, state, received_at, ends_at, finished_at, folder, findings, problem "
                f"FROM alerts {tail}",
                parameters,
            ).fetchall()
        return [
            Entry(
                _job(row[:7]),
                State(row[7]),
                row[8],
                row[9],
                row[10],
                row[11],
                json.loads(row[12] or "[]"),
                row[13],
            )
            for row in rows
        ]

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            yield db
        finally:
            db.close()


_JOB = "key, fingerprint, starts_at, name, instance, labels, annotations"


def _job(row: tuple) -> Job:
    key, fingerprint, starts_at, name, instance, labels, annotations = row
    return Job(key, fingerprint, starts_at, name, instance, json.loads(labels), json.loads(annotations))
